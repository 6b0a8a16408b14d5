// The sparse codecs, which send some of the values: topk (the largest magnitudes, exact,
// with varint index gaps), threshold (Strom, 2015: +-tau as 31-bit index words) and
// randomk (values at indices drawn without replacement; the frame carries the draw seed,
// not the indices).
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ps/compressor.h"

namespace ps {
namespace {

// |v| as an integer that orders like |v| for finite floats; >= kNonFinite for inf / NaN.
inline uint32_t Magnitude(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return bits & 0x7fffffffu;
}
constexpr uint32_t kNonFinite = 0x7f800000u;

class TopkCompressor : public Compressor {
 public:
  explicit TopkCompressor(const CodecSpec& spec) : Compressor(spec) {}

  void Encode(const float* g, size_t n, float* residual, uint64_t,
              SArray<char>* out) const override {
    uint64_t k = KeptCount(n);
    // Selection only reads, so a non-finite v throws before *out or the residual changes.
    std::vector<uint64_t> kept = Select(g, residual, n, k);

    size_t varint_bytes = 0;
    uint64_t prev = 0;
    for (uint64_t index : kept) {
      varint_bytes += VarintBytes(index - prev);
      prev = index;
    }
    char* body = BeginFrame(Codec::kTopk, n, VarintBytes(k) + 4 * k + varint_bytes, out);
    char* values = StoreVarint(k, body);
    char* varints = values + 4 * k;
    prev = 0;
    for (uint64_t j = 0; j < k; ++j) {
      uint64_t i = kept[j];
      StoreLE<float>(residual ? g[i] + residual[i] : g[i], values + 4 * j);
      varints = StoreVarint(i - prev, varints);
      prev = i;
    }
    if (!residual) return;
    // residual becomes v - d: v (float addition commutes) where nothing was sent, and 0
    // where d == v bitwise.
    for (size_t i = 0; i < n; ++i) residual[i] += g[i];
    for (uint64_t i : kept) residual[i] = 0.f;
  }

 private:
  uint32_t MagnitudeAt(const float* g, const float* residual, size_t n, size_t i) const {
    float v = residual ? g[i] + residual[i] : g[i];
    uint32_t m = Magnitude(v);
    if (m >= kNonFinite) ThrowNonFinite(i, n, v);
    return m;
  }

  // The indices of the k largest |v|, ties to the lower index, ascending. Each v is
  // checked for finiteness on the way.
  std::vector<uint64_t> Select(const float* g, const float* residual, size_t n, uint64_t k) const {
    std::vector<uint64_t> kept;
    if (k == 0) return kept;
    // Candidates: the values that reach a floor most values miss, in index order.
    std::vector<uint64_t> indices;
    std::vector<uint32_t> magnitudes;
    auto collect = [&](uint32_t floor) {
      indices.clear();
      magnitudes.clear();
      for (size_t i = 0; i < n; ++i) {
        uint32_t m = MagnitudeAt(g, residual, n, i);
        if (m >= floor) {
          indices.push_back(i);
          magnitudes.push_back(m);
        }
      }
    };
    collect(SampledFloor(g, residual, n, k));
    if (indices.size() < k) collect(0);  // the sample misjudged: every value is one
    // The k-th largest candidate magnitude: all above it are kept, and of those equal to
    // it the lowest indices.
    std::vector<uint32_t> order(magnitudes);
    std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), std::greater<uint32_t>());
    uint32_t kth = order[k - 1];
    uint64_t ties_left = k;
    for (uint32_t m : magnitudes) ties_left -= m > kth;
    kept.reserve(k);
    for (size_t j = 0; j < indices.size(); ++j) {
      if (magnitudes[j] > kth) {
        kept.push_back(indices[j]);
      } else if (magnitudes[j] == kth && ties_left > 0) {
        kept.push_back(indices[j]);
        --ties_left;
      }
    }
    return kept;
  }

  // A magnitude that about 2k of the n values reach, estimated from a strided sample of
  // about kSampleSize of them; 0 (every value) when n is small or k is half of n or more.
  uint32_t SampledFloor(const float* g, const float* residual, size_t n, uint64_t k) const {
    constexpr size_t kSampleSize = 16384;
    size_t stride = n / kSampleSize;
    if (stride < 2 || k >= n / 2) return 0;
    std::vector<uint32_t> sample;
    sample.reserve(n / stride + 1);
    for (size_t i = 0; i < n; i += stride) sample.push_back(MagnitudeAt(g, residual, n, i));
    // 2k of n values is 2k / stride of the sample; 8 more for the sample's noise.
    size_t rank = std::min<size_t>(sample.size() - 1, 2 * k / stride + 8);
    std::nth_element(sample.begin(), sample.begin() + rank, sample.end(), std::greater<uint32_t>());
    return sample[rank];
  }
};

class ThresholdCompressor : public Compressor {
 public:
  explicit ThresholdCompressor(const CodecSpec& spec) : Compressor(spec) {}

  void Encode(const float* g, size_t n, float* residual, uint64_t,
              SArray<char>* out) const override {
    if (n > kMaxThresholdCount) {
      throw Error(spec().ToString() + " Encode: " + std::to_string(n) +
                  " values do not fit one threshold frame (at most 2^31: indices are 31 "
                  "bits); split the key into chunks");
    }
    const float tau = spec().tau;
    // First pass, read-only: refuse non-finite values and size the frame.
    uint64_t sent = 0;
    for (size_t i = 0; i < n; ++i) {
      float v = residual ? g[i] + residual[i] : g[i];
      if (!std::isfinite(v)) ThrowNonFinite(i, n, v);
      sent += std::fabs(v) >= tau;
    }
    char* body = BeginFrame(Codec::kThreshold, n, 4 + VarintBytes(sent) + 4 * sent, out);
    StoreLE<float>(tau, body);
    char* words = StoreVarint(sent, body + 4);
    for (size_t i = 0; i < n; ++i) {
      float v = residual ? g[i] + residual[i] : g[i];
      float d = 0;
      if (std::fabs(v) >= tau) {
        bool negative = v < 0;
        d = negative ? -tau : tau;
        StoreLE<uint32_t>(static_cast<uint32_t>(i) | (negative ? 0x80000000u : 0u), words);
        words += 4;
      }
      if (residual) residual[i] = v - d;
    }
  }
};

// A 64-bit finaliser (SplitMix64's): nearby (seed, nonce) pairs give unrelated draws.
inline uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class RandomkCompressor : public Compressor {
 public:
  explicit RandomkCompressor(const CodecSpec& spec) : Compressor(spec) {}

  void Encode(const float* g, size_t n, float* residual, uint64_t nonce,
              SArray<char>* out) const override {
    // Every v is checked, drawn or not: an undrawn one would sit in the residual.
    for (size_t i = 0; i < n; ++i) {
      float v = residual ? g[i] + residual[i] : g[i];
      if (!std::isfinite(v)) ThrowNonFinite(i, n, v);
    }
    uint64_t k = KeptCount(n);
    uint64_t draw_seed = Mix(Mix(spec().seed) ^ (nonce + 0x9e3779b97f4a7c15ULL));
    std::vector<uint64_t> drawn;
    DrawRandomkIndices(draw_seed, n, k, &drawn);

    char* body = BeginFrame(Codec::kRandomk, n, 8 + VarintBytes(k) + 4 * k, out);
    StoreLE<uint64_t>(draw_seed, body);
    char* values = StoreVarint(k, body + 8);
    for (uint64_t j = 0; j < k; ++j) {
      uint64_t i = drawn[j];
      StoreLE<float>(residual ? g[i] + residual[i] : g[i], values + 4 * j);
    }
    if (!residual) return;
    for (size_t i = 0; i < n; ++i) residual[i] += g[i];  // v - d, as for topk
    for (uint64_t i : drawn) residual[i] = 0.f;
  }
};

}  // namespace

std::unique_ptr<Compressor> NewTopkCompressor(const CodecSpec& spec) {
  return std::make_unique<TopkCompressor>(spec);
}

std::unique_ptr<Compressor> NewThresholdCompressor(const CodecSpec& spec) {
  return std::make_unique<ThresholdCompressor>(spec);
}

std::unique_ptr<Compressor> NewRandomkCompressor(const CodecSpec& spec) {
  return std::make_unique<RandomkCompressor>(spec);
}

}  // namespace ps
