// Codec frames, the writing side: the header, varints, the randomk draw (both sides
// draw the same indices from the seed) and float16 conversions. The reading side
// (validation and decoding) is codec_frame.cc.
#include <glog/logging.h>

#include <cstdint>
#include <vector>

#include "ps/internal/codec_frame.h"

namespace ps {
namespace {

// SplitMix64's output function.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The randomk draw stream (part of the wire format): SplitMix64 started at a mix of the
// seed, so that seeds a multiple of its increment apart do not give shifted copies of
// one stream.
class DrawStream {
 public:
  explicit DrawStream(uint64_t seed) : state_(Mix64(seed)) {}
  uint64_t Next() { return Mix64(state_ += 0x9e3779b97f4a7c15ULL); }
  // Uniform in [0, bound), bound >= 1: multiply-shift, rejecting the low products that
  // would bias it.
  uint64_t Below(uint64_t bound) {
    unsigned __int128 m = static_cast<unsigned __int128>(Next()) * bound;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < bound) {
      uint64_t reject_below = (0 - bound) % bound;
      while (low < reject_below) {
        m = static_cast<unsigned __int128>(Next()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace

size_t FrameHeaderBytes(uint64_t count) { return kFrameCountAt + VarintBytes(count); }

char* BeginFrame(Codec codec, uint64_t count, size_t body_bytes, SArray<char>* out) {
  size_t header = FrameHeaderBytes(count);
  size_t total = header + body_bytes;
  SArray<char> frame(new char[total], total, true);
  char* p = frame.data();
  p[0] = static_cast<char>(kFrameMarker);
  p[1] = static_cast<char>(codec);
  char* body = StoreVarint(count, p + kFrameCountAt);
  *out = frame;
  return body;
}

size_t VarintBytes(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

char* StoreVarint(uint64_t v, char* p) {
  while (v >= 0x80) {
    *p++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

void DrawRandomkIndices(uint64_t draw_seed, uint64_t count, uint64_t k,
                        std::vector<uint64_t>* indices) {
  CHECK_LE(k, count) << "randomk draws k distinct indices out of count";
  indices->clear();
  if (k == 0) return;
  // Floyd: for j in [count - k, count), take a uniform t in [0, j], or j itself when t
  // is taken already. Every k-subset comes out equally likely.
  std::vector<uint64_t> taken(count / 64 + 1, 0);
  auto take = [&](uint64_t i) {
    uint64_t& word = taken[i / 64];
    uint64_t bit = uint64_t{1} << (i % 64);
    if (word & bit) return false;
    word |= bit;
    return true;
  };
  DrawStream stream(draw_seed);
  for (uint64_t j = count - k; j < count; ++j) {
    if (!take(stream.Below(j + 1))) take(j);
  }
  indices->reserve(k);
  for (size_t w = 0; w < taken.size(); ++w) {
    for (uint64_t bits = taken[w]; bits; bits &= bits - 1) {
      indices->push_back(64 * w + static_cast<uint64_t>(__builtin_ctzll(bits)));
    }
  }
}

void FloatsToHalves(const float* in, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToHalf(in[i]);
}

void HalvesToFloats(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = HalfToFloat(in[i]);
}

}  // namespace ps
