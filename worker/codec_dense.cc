// The dense codecs, which send something for every value: none (float32), fp16 (IEEE
// half) and onebit (Seide et al., 2014: a sign bit and one reconstruction value per sign).
#include <cmath>

#include "ps/compressor.h"

namespace ps {
namespace {

class NoneCompressor : public Compressor {
 public:
  explicit NoneCompressor(const CodecSpec& spec) : Compressor(spec) {}

  void Encode(const float* g, size_t n, float* residual, uint64_t,
              SArray<char>* out) const override {
    char* body = BeginFrame(Codec::kNone, n, 4 * n, out);
    if (!residual) {
      if (n) std::memcpy(body, g, 4 * n);
      return;
    }
    // d == v bitwise, so v - d is 0 (and a non-finite v leaves 0 too).
    for (size_t i = 0; i < n; ++i) {
      StoreLE<float>(g[i] + residual[i], body + 4 * i);
      residual[i] = 0.f;
    }
  }
};

// The largest finite half. Finite values beyond it are sent as it, so that the residual
// (v - d) stays finite and carries the excess.
constexpr float kMaxHalf = 65504.f;

inline uint16_t SaturatedHalf(float v) {
  if (std::fabs(v) > kMaxHalf && std::isfinite(v)) v = std::copysign(kMaxHalf, v);
  return FloatToHalf(v);
}

class Fp16Compressor : public Compressor {
 public:
  explicit Fp16Compressor(const CodecSpec& spec) : Compressor(spec) {}

  void Encode(const float* g, size_t n, float* residual, uint64_t,
              SArray<char>* out) const override {
    char* body = BeginFrame(Codec::kFp16, n, 2 * n, out);
    if (!residual) {
      for (size_t i = 0; i < n; ++i) StoreLE<uint16_t>(SaturatedHalf(g[i]), body + 2 * i);
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      float v = g[i] + residual[i];
      uint16_t h = SaturatedHalf(v);
      StoreLE<uint16_t>(h, body + 2 * i);
      residual[i] = std::isfinite(v) ? v - HalfToFloat(h) : 0.f;
    }
  }
};

// v if keep, else +0: a select that compiles to no branch (compilers turn max() and ?:
// into branches here, and signs are as unpredictable as coin flips).
inline float KeepIf(bool keep, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits &= 0u - static_cast<uint32_t>(keep);
  std::memcpy(&v, &bits, 4);
  return v;
}

class OneBitCompressor : public Compressor {
 public:
  explicit OneBitCompressor(const CodecSpec& spec) : Compressor(spec) {}

  void Encode(const float* g, size_t n, float* residual, uint64_t,
              SArray<char>* out) const override {
    SignSums sums = SumBySign(g, residual, n);
    size_t positives = n - sums.negatives;
    // The mean of finite floats is finite: the scales always pass the decoder's checks.
    float positive_scale = positives ? static_cast<float>(sums.positive / positives) : 0.f;
    float negative_scale =
        sums.negatives ? static_cast<float>(sums.negative / sums.negatives) : 0.f;

    char* body = BeginFrame(Codec::kOneBit, n, 8 + (n + 7) / 8, out);
    StoreLE<float>(positive_scale, body);
    StoreLE<float>(negative_scale, body + 4);
    const float levels[2] = {positive_scale, -negative_scale};
    char* bits = body + 8;
    for (size_t byte = 0; byte * 8 < n; ++byte) {
      uint8_t packed = 0;
      for (size_t i = byte * 8; i < n && i < byte * 8 + 8; ++i) {
        float v = residual ? g[i] + residual[i] : g[i];
        bool negative = v < 0;
        packed |= static_cast<uint8_t>(negative) << (i % 8);
        if (residual) residual[i] = v - levels[negative];
      }
      bits[byte] = static_cast<char>(packed);
    }
  }

 private:
  struct SignSums {
    double positive = 0;  // the sum of the values >= 0
    double negative = 0;  // the sum of |v| over the values < 0
    size_t negatives = 0;
  };

  // The first pass, read-only: refuses non-finite values and sums each side in double,
  // so that the scales are the floats nearest to the means whatever n is. Four sums per
  // side (value i goes to sum i % 4) let the additions run without waiting for each
  // other; the order is fixed, so the scales are too.
  SignSums SumBySign(const float* g, const float* residual, size_t n) const {
    double positive[4] = {0, 0, 0, 0}, negative[4] = {0, 0, 0, 0};
    SignSums sums;
    auto add = [&](size_t i, int lane) {
      float v = residual ? g[i] + residual[i] : g[i];
      if (!std::isfinite(v)) ThrowNonFinite(i, n, v);
      bool is_negative = v < 0;
      positive[lane] += KeepIf(!is_negative, v);
      negative[lane] -= KeepIf(is_negative, v);
      sums.negatives += is_negative;
    };
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
      add(i, 0);
      add(i + 1, 1);
      add(i + 2, 2);
      add(i + 3, 3);
    }
    for (; i < n; ++i) add(i, static_cast<int>(i % 4));
    sums.positive = (positive[0] + positive[1]) + (positive[2] + positive[3]);
    sums.negative = (negative[0] + negative[1]) + (negative[2] + negative[3]);
    return sums;
  }
};

}  // namespace

std::unique_ptr<Compressor> NewNoneCompressor(const CodecSpec& spec) {
  return std::make_unique<NoneCompressor>(spec);
}

std::unique_ptr<Compressor> NewFp16Compressor(const CodecSpec& spec) {
  return std::make_unique<Fp16Compressor>(spec);
}

std::unique_ptr<Compressor> NewOneBitCompressor(const CodecSpec& spec) {
  return std::make_unique<OneBitCompressor>(spec);
}

}  // namespace ps
