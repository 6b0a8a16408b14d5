// Gradient compression: the codec frames and their validating decoder
// (ps/internal/codec_frame.h), the encoders with error feedback, CodecSpec and
// ResidualStore (ps/compressor.h). Each codec is checked against a reference written
// here in double precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ps/compressor.h"
#include "ps/internal/codec_frame.h"

namespace ps {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::string Str(const SArray<char>& frame) { return std::string(frame.data(), frame.size()); }

bool Contains(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

CodecSpec Spec(const std::string& text) {
  CodecSpec spec;
  Status s = CodecSpec::Parse(text, &spec);
  EXPECT_TRUE(s.ok()) << s;
  return spec;
}

std::string EncodeText(const std::string& spec, const std::vector<float>& g,
                       float* residual = nullptr, uint64_t nonce = 0) {
  SArray<char> frame;
  Compressor::Create(Spec(spec))->Encode(g.data(), g.size(), residual, nonce, &frame);
  return Str(frame);
}

// Decodes from a heap copy of exactly bytes.size() bytes, so that a sanitizer build
// catches any read past the frame.
Status DecodeExact(const std::string& bytes, size_t count, std::vector<float>* out) {
  std::unique_ptr<char[]> copy(new char[bytes.size()]);
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  out->assign(count, -7.f);
  return DecodeFrame(copy.get(), bytes.size(), out->data(), count);
}

Status InspectExact(const std::string& bytes, FrameInfo* info) {
  std::unique_ptr<char[]> copy(new char[bytes.size()]);
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  return InspectFrame(copy.get(), bytes.size(), info);
}

std::vector<float> Decoded(const std::string& frame, size_t count) {
  std::vector<float> out;
  Status s = DecodeExact(frame, count, &out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Gradients with no zeros and magnitudes over a few binades.
std::vector<float> Gradients(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> g(n);
  for (float& v : g) {
    do v = normal(rng);
    while (v == 0.f);
  }
  return g;
}

// A frame written field by field, for malformed cases.
class FrameBytes {
 public:
  FrameBytes(uint8_t codec, uint64_t count) : FrameBytes(codec) { Varint(count); }
  FrameBytes(Codec codec, uint64_t count) : FrameBytes(static_cast<uint8_t>(codec), count) {}
  // The marker and the codec only; the test writes the count.
  explicit FrameBytes(uint8_t codec) {
    bytes_ += static_cast<char>(kFrameMarker);
    bytes_ += static_cast<char>(codec);
  }
  explicit FrameBytes(Codec codec) : FrameBytes(static_cast<uint8_t>(codec)) {}
  FrameBytes& U32(uint32_t v) { return Raw(&v, 4); }
  FrameBytes& U64(uint64_t v) { return Raw(&v, 8); }
  FrameBytes& F32(float v) { return Raw(&v, 4); }
  FrameBytes& Byte(uint8_t v) { return Raw(&v, 1); }
  FrameBytes& Varint(uint64_t v) {
    char buf[kMaxVarintBytes];
    return Raw(buf, StoreVarint(v, buf) - buf);
  }
  const std::string& str() const { return bytes_; }
  size_t size() const { return bytes_.size(); }

 private:
  FrameBytes& Raw(const void* p, size_t n) {
    bytes_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string bytes_;
};

Status DecodeBytes(const FrameBytes& frame, size_t count) {
  std::vector<float> out;
  return DecodeExact(frame.str(), count, &out);
}

// ---------------------------------------------------------------------------------------
// IEEE half: a reference in double. The half nearest |x| is the nearest multiple of the
// half quantum of x's binade (2^(e - 10); 2^-24 below 2^-14), ties to the even multiple.

uint16_t ReferenceHalf(float f) {
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  double a = std::fabs(static_cast<double>(f));
  if (std::isinf(a)) return sign | 0x7c00;
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  double quantum = std::ldexp(1.0, std::max(e - 1, -14) - 10);
  double q = std::nearbyint(a / quantum);  // the default rounding mode: ties to even
  double r = q * quantum;
  if (r >= 65536.0) return sign | 0x7c00;
  if (r < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(q);  // subnormal
  int e2;
  double m = std::frexp(r, &e2);  // r = 2m * 2^(e2-1), 2m in [1, 2)
  return sign | static_cast<uint16_t>((e2 - 1 + 15) << 10) |
         static_cast<uint16_t>((2 * m - 1) * 1024);
}

double ReferenceHalfValue(uint16_t h) {
  double sign = (h & 0x8000) ? -1 : 1;
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return m ? std::nan("") : sign * std::numeric_limits<double>::infinity();
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

bool IsHalfNaN(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

TEST(HalfConversion, HalfToFloatIsExactForEveryHalf) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    double want = ReferenceHalfValue(static_cast<uint16_t>(h));
    float got = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
      EXPECT_EQ(std::signbit(got), (h & 0x8000) != 0) << h;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << h;
      EXPECT_EQ(std::signbit(got), (h & 0x8000) != 0) << h;
    }
  }
}

TEST(HalfConversion, EveryHalfConvertsBackToItself) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    uint16_t half = static_cast<uint16_t>(h);
    if (IsHalfNaN(half)) continue;
    EXPECT_EQ(FloatToHalf(HalfToFloat(half)), half) << h;
  }
}

// Between every two neighbouring finite halves: the midpoint is a tie (to the even one),
// a float ulp on either side of it rounds to the nearer one.
TEST(HalfConversion, MidpointsRoundToEvenAndTheirNeighboursToTheNearer) {
  for (uint32_t h = 0; h < 0x7bff; ++h) {  // 65504 and infinity: in the edge cases
    for (uint16_t sign : {0, 0x8000}) {
      uint16_t lo = static_cast<uint16_t>(h | sign), hi = static_cast<uint16_t>((h + 1) | sign);
      float mid = static_cast<float>((ReferenceHalfValue(lo) + ReferenceHalfValue(hi)) / 2);
      uint16_t even = (lo & 1) ? hi : lo;
      EXPECT_EQ(FloatToHalf(mid), even) << std::hex << lo;
      EXPECT_EQ(FloatToHalf(mid), ReferenceHalf(mid)) << std::hex << lo;
      float toward_lo = std::nextafter(mid, 0.f);
      float toward_hi = std::nextafter(mid, sign ? -kInf : kInf);
      EXPECT_EQ(FloatToHalf(toward_lo), lo) << std::hex << lo;
      EXPECT_EQ(FloatToHalf(toward_hi), hi) << std::hex << lo;
    }
  }
}

TEST(HalfConversion, EdgeCasesMatchTheReference) {
  const float kDenormMin = std::numeric_limits<float>::denorm_min();
  const float kMin = std::numeric_limits<float>::min(), kMax = std::numeric_limits<float>::max();
  const std::vector<float> small = {
      0.f,        -0.f,       1.f,        -1.f,          0x1p-24f,     0x1p-25f, 0x1.000002p-25f,
      0x1.8p-24f, 0x1.8p-23f, 0x1p-14f,   0x1.ff8p-15f,  0x1.ffcp-15f, 0x1p-26f, kDenormMin,
      kMin,       0.1f,       1.0009766f, 1.00048828125f};
  const std::vector<float> large = {65504.f,  65519.996f, 65520.f, 65536.f, 1e10f,
                                    -65520.f, kMax,       kInf,    -kInf};
  for (const auto& cases : {small, large}) {
    for (float f : cases) EXPECT_EQ(FloatToHalf(f), ReferenceHalf(f)) << f;
  }
  EXPECT_EQ(FloatToHalf(0x1p-25f), 0);         // a tie between 0 and 2^-24: to 0
  EXPECT_EQ(FloatToHalf(0x1.8p-24f), 2);       // 1.5 quanta: to 2
  EXPECT_EQ(FloatToHalf(65519.996f), 0x7bff);  // just under the tie: 65504
  EXPECT_EQ(FloatToHalf(65520.f), 0x7c00);     // the tie: infinity (even)
  EXPECT_EQ(FloatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(FloatToHalf(-0.f), 0x8000);
}

TEST(HalfConversion, NaNStaysNaNWithItsSignAndBecomesQuiet) {
  for (uint32_t payload : {0x1u, 0x2000u, 0x400000u, 0x7fffffu, 0x123456u}) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      uint16_t h = FloatToHalf(FromBits(sign | 0x7f800000u | payload));
      EXPECT_TRUE(IsHalfNaN(h)) << payload;
      EXPECT_EQ((h & 0x8000) != 0, sign != 0);
      EXPECT_TRUE(h & 0x200) << "quiet bit";
      EXPECT_TRUE(std::isnan(HalfToFloat(h)));
    }
  }
}

TEST(HalfConversion, RandomFloatsMatchTheReference) {
  std::mt19937 rng(11);
  std::vector<float> in(1 << 20);
  for (float& f : in) {
    do f = FromBits(static_cast<uint32_t>(rng()));
    while (std::isnan(f));
    // Most random bit patterns are far outside the half range; bring half of them in.
    int exponent;
    if (rng() & 1) f = std::ldexp(std::frexp(f, &exponent), static_cast<int>(rng() % 46) - 28);
  }
  std::vector<uint16_t> halves(in.size());
  FloatsToHalves(in.data(), in.size(), halves.data());
  std::vector<float> back(in.size());
  HalvesToFloats(halves.data(), halves.size(), back.data());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(halves[i], ReferenceHalf(in[i])) << in[i];
    ASSERT_EQ(Bits(back[i]), Bits(HalfToFloat(halves[i])));
  }
}

// ---------------------------------------------------------------------------------------
// Each codec against its double-precision reference.

TEST(NoneCodec, SendsEveryValueBitwiseAndLeavesNoResidual) {
  std::vector<float> g = Gradients(100, 1), r = Gradients(100, 2), v(100);
  for (size_t i = 0; i < g.size(); ++i) v[i] = g[i] + r[i];
  std::string frame = EncodeText("none", g, r.data());
  EXPECT_EQ(frame.size(), 3 + 4 * g.size());  // 100 values: a 3-byte header
  std::vector<float> d = Decoded(frame, g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(Bits(d[i]), Bits(v[i]));
    EXPECT_EQ(r[i], 0.f);
  }
  std::vector<float> odd = {-0.f, kInf, kNaN, std::numeric_limits<float>::denorm_min()};
  d = Decoded(EncodeText("none", odd), odd.size());
  for (size_t i = 0; i < odd.size(); ++i) EXPECT_EQ(Bits(d[i]), Bits(odd[i]));
}

TEST(Fp16Codec, SendsTheNearestHalfAndKeepsTheRoundingErrorAsResidual) {
  std::vector<float> g = Gradients(1000, 3);
  g[0] = 1e5f;  // beyond the half range: sent as 65504, the excess kept
  g[1] = -7e4f;
  g[2] = 0x1p-20f;
  std::vector<float> r(g.size(), 0.f);
  std::vector<float> d = Decoded(EncodeText("fp16", g, r.data()), g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    float saturated = std::max(-65504.f, std::min(65504.f, g[i]));
    EXPECT_EQ(static_cast<double>(d[i]), ReferenceHalfValue(ReferenceHalf(saturated))) << i;
    EXPECT_EQ(r[i], g[i] - d[i]) << i;
  }
  EXPECT_EQ(d[0], 65504.f);
  EXPECT_EQ(r[0], 1e5f - 65504.f);
  // Without error feedback, infinity and NaN are carried as they are.
  std::vector<float> odd = {kInf, -kInf, kNaN};
  d = Decoded(EncodeText("fp16", odd), 3);
  EXPECT_EQ(d[0], kInf);
  EXPECT_EQ(d[1], -kInf);
  EXPECT_TRUE(std::isnan(d[2]));
}

// The reference top-k: every index sorted by |v| (exact in double), larger first, ties to
// the lower index.
std::vector<size_t> ReferenceTopk(const std::vector<float>& v, size_t k) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::fabs(static_cast<double>(v[a])) > std::fabs(static_cast<double>(v[b]));
  });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

void ExpectTopk(const std::string& spec, const std::vector<float>& g, size_t k,
                bool with_residual = true) {
  std::vector<float> r = with_residual ? Gradients(g.size(), 99) : std::vector<float>(g.size());
  std::vector<float> v(g.size());
  for (size_t i = 0; i < g.size(); ++i) v[i] = g[i] + r[i];
  std::vector<size_t> want = ReferenceTopk(v, k);
  std::string frame = EncodeText(spec, g, r.data());
  std::vector<float> d = Decoded(frame, g.size());
  std::set<size_t> kept(want.begin(), want.end());
  for (size_t i = 0; i < g.size(); ++i) {
    if (kept.count(i)) {
      ASSERT_EQ(Bits(d[i]), Bits(v[i])) << spec << " index " << i;
      ASSERT_EQ(Bits(r[i]), Bits(0.f)) << spec << " index " << i;
    } else {
      ASSERT_EQ(Bits(d[i]), Bits(0.f)) << spec << " index " << i;
      ASSERT_EQ(Bits(r[i]), Bits(v[i])) << spec << " index " << i;
    }
  }
  size_t varints = 0;
  for (size_t j = 0; j < want.size(); ++j) varints += VarintBytes(want[j] - (j ? want[j - 1] : 0));
  EXPECT_EQ(frame.size(), FrameHeaderBytes(g.size()) + VarintBytes(k) + 4 * k + varints) << spec;
}

TEST(TopkCodec, KeepsTheLargestMagnitudesExactly) {
  std::vector<float> g = Gradients(5000, 4);
  ExpectTopk("topk:0.001", g, 5);
  ExpectTopk("topk:k=77", g, 77);
  ExpectTopk("topk:0.5", g, 2500);
  ExpectTopk("topk:1", g, 5000);
  ExpectTopk("topk:0.00001", g, 1);    // at least one value
  ExpectTopk("topk:k=9999", g, 5000);  // at most n
}

// Slices this large are narrowed to candidates by a strided sample first (one value in
// 12 here). Spikes at exactly that stride make the sample overrate the values, so the
// encoder falls back to every value; the result is exact either way.
TEST(TopkCodec, KeepsTheLargestMagnitudesOfLargeSlicesWhateverTheSampleSees) {
  const size_t n = 200000;
  std::vector<float> g = Gradients(n, 16);
  ExpectTopk("topk:0.001", g, 200);
  ExpectTopk("topk:0.01", g, 2000);
  ExpectTopk("topk:k=1", g, 1);
  ExpectTopk("topk:0.6", g, 120000);
  std::vector<float> spiky(n), coarse(n);
  std::mt19937 rng(17);
  for (size_t i = 0; i < n; ++i) {
    spiky[i] = i % 12 == 0 ? 100.f + 1e-3f * i : 1e-3f * (1 + i % 7);
    coarse[i] = static_cast<float>(static_cast<int>(rng() % 9) - 4) + 0.25f;
  }
  ExpectTopk("topk:k=1000", spiky, 1000, false);
  ExpectTopk("topk:k=17000", spiky, 17000, false);  // all 16667 spikes and 333 ties
  ExpectTopk("topk:k=5000", coarse, 5000, false);   // ties at the floor
}

TEST(TopkCodec, TiesGoToTheLowerIndex) {
  std::mt19937 rng(5);
  std::vector<float> g(3000);
  for (float& v : g) v = static_cast<float>(static_cast<int>(rng() % 7) - 3) + 0.5f;
  // A zero residual, so that v = g: every magnitude is one of four values.
  ExpectTopk("topk:k=10", g, 10, false);
  ExpectTopk("topk:k=700", g, 700, false);
  ExpectTopk("topk:0.4", g, 1200, false);
}

TEST(ThresholdCodec, SendsPlusMinusTauWhereMagnitudeReachesTau) {
  std::vector<float> g = Gradients(4000, 6), r = Gradients(4000, 7), v(4000);
  for (size_t i = 0; i < g.size(); ++i) v[i] = g[i] + r[i];
  v[10] = g[10] = 1.5f, r[10] = 0.f;  // exactly tau: sent
  const float tau = 1.5f;
  std::string frame = EncodeText("threshold:1.5", g, r.data());
  std::vector<float> d = Decoded(frame, g.size());
  size_t sent = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double want = std::fabs(static_cast<double>(v[i])) >= tau ? (v[i] < 0 ? -tau : tau) : 0.0;
    ASSERT_EQ(static_cast<double>(d[i]), want) << i;
    ASSERT_EQ(r[i], v[i] - d[i]) << i;
    sent += want != 0;
  }
  EXPECT_EQ(d[10], tau);
  EXPECT_GT(sent, 100u);
  EXPECT_EQ(frame.size(), FrameHeaderBytes(g.size()) + 4 + VarintBytes(sent) + 4 * sent);
}

TEST(OneBitCodec, ScalesAreTheMeansOfEachSignWithinFloatError) {
  for (size_t n : {1u, 7u, 8u, 9u, 1000u, 100003u}) {
    std::vector<float> g = Gradients(n, n), r = Gradients(n, n + 1), v(n);
    for (size_t i = 0; i < n; ++i) v[i] = g[i] + r[i];
    double pos_sum = 0, neg_sum = 0;
    size_t pos = 0, neg = 0;
    for (float x : v) x < 0 ? (neg_sum -= x, ++neg) : (pos_sum += x, ++pos);
    double pos_mean = pos ? pos_sum / pos : 0, neg_mean = neg ? neg_sum / neg : 0;
    std::string frame = EncodeText("onebit", g, r.data());
    EXPECT_EQ(frame.size(), FrameHeaderBytes(n) + 8 + (n + 7) / 8);
    std::vector<float> d = Decoded(frame, n);
    float pos_scale = 0, neg_scale = 0;
    for (size_t i = 0; i < n; ++i) {
      if (v[i] < 0) {
        neg_scale = -d[i];
      } else {
        pos_scale = d[i];
      }
    }
    // One rounding to float, plus the double sum's own error (far smaller).
    EXPECT_NEAR(pos_scale, pos_mean, pos_mean * 0x1p-23) << n;
    EXPECT_NEAR(neg_scale, neg_mean, neg_mean * 0x1p-23) << n;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(d[i], v[i] < 0 ? -neg_scale : pos_scale) << i;
      ASSERT_EQ(r[i], v[i] - d[i]) << i;
    }
  }
}

TEST(OneBitCodec, AllOfOneSignLeavesTheOtherScaleZero) {
  std::vector<float> g = {1.f, 2.f, 3.f, 0.f, -0.f};
  std::vector<float> d = Decoded(EncodeText("onebit", g), g.size());
  for (float x : d) EXPECT_EQ(x, 1.2f);  // -0 counts as >= 0
}

TEST(RandomkCodec, SendsKValuesAtIndicesTheDecoderRedraws) {
  std::vector<float> g = Gradients(10000, 8), r(10000, 0.f);
  std::string frame = EncodeText("randomk:0.01:seed=7", g, r.data(), 42);
  EXPECT_EQ(frame.size(), 4 + 8 + 1 + 4 * 100);  // 10000 values: a 4-byte header
  std::vector<float> d = Decoded(frame, g.size());
  size_t kept = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (d[i] != 0) {
      ++kept;
      EXPECT_EQ(Bits(d[i]), Bits(g[i]));
      EXPECT_EQ(r[i], 0.f);
    } else {
      EXPECT_EQ(r[i], g[i]);
    }
  }
  EXPECT_EQ(kept, 100u);
  std::vector<uint64_t> drawn;
  uint64_t draw_seed;
  std::memcpy(&draw_seed, frame.data() + FrameHeaderBytes(g.size()), 8);
  DrawRandomkIndices(draw_seed, g.size(), 100, &drawn);
  for (uint64_t i : drawn) EXPECT_NE(d[i], 0.f);
}

TEST(RandomkCodec, TheDrawDependsOnSeedAndNonceOnly) {
  std::vector<float> g = Gradients(500, 9);
  std::string a = EncodeText("randomk:k=20:seed=1", g, nullptr, 5);
  EXPECT_EQ(a, EncodeText("randomk:k=20:seed=1", g, nullptr, 5));
  EXPECT_NE(a, EncodeText("randomk:k=20:seed=1", g, nullptr, 6));
  EXPECT_NE(a, EncodeText("randomk:k=20:seed=2", g, nullptr, 5));
}

TEST(RandomkDraw, IndicesAreDistinctAscendingAndUniform) {
  const uint64_t count = 100, k = 10, draws = 20000;
  std::vector<uint64_t> hits(count, 0), indices;
  for (uint64_t seed = 0; seed < draws; ++seed) {
    DrawRandomkIndices(seed * 0x9e3779b97f4a7c15ULL, count, k, &indices);
    ASSERT_EQ(indices.size(), k);
    for (size_t j = 0; j < k; ++j) {
      ASSERT_LT(indices[j], count);
      if (j) {
        ASSERT_LT(indices[j - 1], indices[j]);
      }
      ++hits[indices[j]];
    }
  }
  // Each index is drawn with probability k / count; chi-square over 99 degrees of freedom
  // (its 99.99th percentile is about 158).
  double expected = static_cast<double>(draws * k) / count, chi2 = 0;
  for (uint64_t h : hits) chi2 += (h - expected) * (h - expected) / expected;
  EXPECT_LT(chi2, 158.0);
  DrawRandomkIndices(3, 64, 64, &indices);
  EXPECT_EQ(indices.size(), 64u);
  EXPECT_EQ(indices.back(), 63u);
  DrawRandomkIndices(3, 1000, 0, &indices);
  EXPECT_TRUE(indices.empty());
}

// ---------------------------------------------------------------------------------------
// Error feedback over many rounds. Each round makes two float roundings per value,
// v = fl(g + residual) and residual' = fl(v - d), each off by at most half an ulp of its
// result, <= 2^-24 * |result|. So after T rounds, per value,
//   |sum(d) + residual - sum(g)| <= sum over rounds of 2^-24 * (|v| + |residual'|),
// which the test accumulates in double next to exact (double) sums of g and d.

void ExpectResidualBookkeeping(const std::string& text) {
  const size_t n = 257;
  const int rounds = 500;
  std::unique_ptr<Compressor> codec = Compressor::Create(Spec(text));
  std::mt19937_64 rng(2024);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> g(n), residual(n, 0.f), d(n);
  std::vector<double> sum_g(n, 0), sum_d(n, 0), budget(n, 0), sum_abs_g(n, 0);
  SArray<char> frame;
  for (int t = 0; t < rounds; ++t) {
    for (float& x : g) x = normal(rng) * (t % 3 == 0 ? 10.f : 1.f);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = g[i] + residual[i];
    codec->Encode(g.data(), n, residual.data(), static_cast<uint64_t>(t), &frame);
    Status s = DecodeFrame(frame.data(), frame.size(), d.data(), n);
    ASSERT_TRUE(s.ok()) << text << ": " << s;
    for (size_t i = 0; i < n; ++i) {
      sum_g[i] += g[i];
      sum_abs_g[i] += std::fabs(g[i]);
      sum_d[i] += d[i];
      budget[i] += 0x1p-24 * (std::fabs(v[i]) + std::fabs(residual[i]));
    }
  }
  for (size_t i = 0; i < n; ++i) {
    double error = std::fabs(sum_d[i] + residual[i] - sum_g[i]);
    ASSERT_LE(error, budget[i] + 1e-12 * sum_abs_g[i]) << text << " value " << i;
  }
}

TEST(ErrorFeedback, DecodedPlusResidualAddsUpToTheGradientsForEveryCodec) {
  for (const char* text : {"none", "fp16", "topk:0.01", "topk:k=40", "threshold:2.5", "onebit",
                           "randomk:0.05:seed=3", "randomk:k=100"}) {
    SCOPED_TRACE(text);
    ExpectResidualBookkeeping(text);
  }
}

// ---------------------------------------------------------------------------------------
// The frame header: marker, codec, count as a shortest-form varint.

TEST(FrameHeader, IsTheMarkerTheCodecAndTheCountAsAShortestVarint) {
  EXPECT_EQ(FrameHeaderBytes(0), 3u);
  EXPECT_EQ(FrameHeaderBytes(127), 3u);
  EXPECT_EQ(FrameHeaderBytes(128), 4u);
  EXPECT_EQ(FrameHeaderBytes(16383), 4u);
  EXPECT_EQ(FrameHeaderBytes(16384), 5u);
  EXPECT_EQ(FrameHeaderBytes(1000000), 5u);
  EXPECT_EQ(FrameHeaderBytes((uint64_t{1} << 21) - 1), 5u);
  EXPECT_EQ(FrameHeaderBytes(uint64_t{1} << 21), 6u);
  EXPECT_EQ(FrameHeaderBytes(~uint64_t{0}), 12u);
  // BeginFrame leaves the body right after the count, at no particular alignment: an fp16
  // body of 300 values starts at byte 4 (300 is 0xac 0x02 as a varint).
  SArray<char> frame;
  char* body = BeginFrame(Codec::kFp16, 300, 600, &frame);
  ASSERT_EQ(frame.size(), 604u);
  EXPECT_EQ(body, frame.data() + 4);
  EXPECT_EQ(Str(frame).substr(0, 4), std::string("\xc2\x01\xac\x02", 4));
  for (size_t i = 0; i < 300; ++i) StoreLE<uint16_t>(FloatToHalf(0.5f * i), body + 2 * i);
  std::vector<float> d = Decoded(Str(frame), 300);
  for (size_t i = 0; i < 300; ++i) ASSERT_EQ(d[i], 0.5f * i) << i;
}

// A sparse push part of apps/linear: a few hundred values, one float each.
TEST(FrameHeader, SmallSparseFramesCostLittleMoreThanTheValuesTheyCarry) {
  const size_t n = 487;
  std::vector<float> g = Gradients(n, 21);
  EXPECT_EQ(FrameHeaderBytes(n), 4u);
  std::string topk = EncodeText("topk:0.001", g);  // k = 1
  size_t index = ReferenceTopk(g, 1)[0];
  EXPECT_EQ(topk.size(), 4 + 1 + 4 + VarintBytes(index));
  EXPECT_LE(topk.size(), 11u);
  EXPECT_EQ(EncodeText("randomk:0.001", g).size(), 4u + 8 + 1 + 4);
  EXPECT_EQ(EncodeText("onebit", g).size(), 4u + 8 + 61);
  EXPECT_EQ(EncodeText("fp16", g).size(), 4u + 2 * n);
  EXPECT_EQ(EncodeText("none", g).size(), 4u + 4 * n);
  size_t sent = 0;
  for (float v : g) sent += std::fabs(v) >= 2.5f;
  EXPECT_EQ(EncodeText("threshold:2.5", g).size(), 4u + 4 + 1 + 4 * sent);
}

TEST(FrameHeader, ReadFrameHeaderReadsTheCountOfFramesInspectFrameRefuses) {
  FrameInfo info;
  std::string valid = EncodeText("topk:k=3", Gradients(1000, 22));
  ASSERT_TRUE(ReadFrameHeader(valid.data(), valid.size(), &info).ok());
  EXPECT_EQ(info.codec, Codec::kTopk);
  EXPECT_EQ(info.count, 1000u);
  EXPECT_EQ(info.header_bytes, 4u);
  FrameInfo inspected;
  ASSERT_TRUE(InspectExact(valid, &inspected).ok());
  EXPECT_EQ(inspected.header_bytes, 4u);
  // A none frame of 5 values without its payload: the header is fine, the frame is not.
  std::string headless = FrameBytes(Codec::kNone, 5).str();
  ASSERT_TRUE(ReadFrameHeader(headless.data(), headless.size(), &info).ok());
  EXPECT_EQ(info.count, 5u);
  EXPECT_EQ(info.header_bytes, 3u);
  EXPECT_FALSE(InspectExact(headless, &info).ok());
  // A fault in the header itself is refused as InspectFrame refuses it.
  std::string short_count = FrameBytes(Codec::kNone).Byte(0x80).str();
  Status s = ReadFrameHeader(short_count.data(), short_count.size(), &info);
  EXPECT_TRUE(Contains(s, "byte 2: count varint runs past the end")) << s;
  EXPECT_EQ(s.message(), InspectExact(short_count, &info).message());
}

// ---------------------------------------------------------------------------------------
// Malformed frames: every one refused with a Status, nothing read outside the frame.

// The end of the varint starting at bytes[at] (the frames here are valid).
size_t VarintEnd(const std::string& bytes, size_t at) {
  while (static_cast<uint8_t>(bytes[at]) & 0x80) ++at;
  return at + 1;
}

struct ValidFrame {
  std::string spec;
  size_t count = 0;
  std::string bytes;
  // Byte offsets: the codec fields lie in [fields_at, fields_end); of them, the k or m
  // varint in [sent_at, sent_end) (empty for codecs without one).
  size_t fields_at = 0, fields_end = 0, sent_at = 0, sent_end = 0;
};

constexpr size_t kSmallCount = 37;  // not a multiple of 8: onebit has padding bits
// Over 127: a 2-byte count, topk gaps of 1 and 2 bytes, threshold's m of 2 bytes.
constexpr size_t kLargerCount = 300;

std::vector<ValidFrame> ValidFrames(size_t count = kSmallCount) {
  std::vector<float> g = Gradients(count, 12);
  std::vector<ValidFrame> frames;
  for (const char* spec :
       {"none", "fp16", "topk:k=6", "threshold:0.5", "onebit", "randomk:k=6:seed=4"}) {
    ValidFrame f;
    f.spec = spec;
    f.count = count;
    f.bytes = EncodeText(spec, g, nullptr, 3);
    size_t h = FrameHeaderBytes(count);
    f.fields_at = f.fields_end = f.sent_at = f.sent_end = h;
    if (f.spec.rfind("topk", 0) == 0) {
      f.fields_end = f.sent_end = VarintEnd(f.bytes, h);
    } else if (f.spec.rfind("threshold", 0) == 0) {
      f.sent_at = h + 4;
      f.fields_end = f.sent_end = VarintEnd(f.bytes, f.sent_at);
    } else if (f.spec == "onebit") {
      f.fields_end = h + 8;
    } else if (f.spec.rfind("randomk", 0) == 0) {
      f.sent_at = h + 8;
      f.fields_end = f.sent_end = VarintEnd(f.bytes, f.sent_at);
    }
    frames.push_back(f);
  }
  return frames;
}

std::vector<ValidFrame> SmallAndLargerValidFrames() {
  std::vector<ValidFrame> frames = ValidFrames(kSmallCount), larger = ValidFrames(kLargerCount);
  frames.insert(frames.end(), larger.begin(), larger.end());
  return frames;
}

TEST(FrameValidation, ValidFramesInspectAsWhatTheyAre) {
  const Codec codecs[] = {Codec::kNone,      Codec::kFp16,   Codec::kTopk,
                          Codec::kThreshold, Codec::kOneBit, Codec::kRandomk};
  for (size_t count : {kSmallCount, kLargerCount}) {
    std::vector<ValidFrame> frames = ValidFrames(count);
    for (size_t c = 0; c < frames.size(); ++c) {
      FrameInfo info;
      Status s = InspectExact(frames[c].bytes, &info);
      ASSERT_TRUE(s.ok()) << frames[c].spec << ": " << s;
      EXPECT_EQ(info.codec, codecs[c]);
      EXPECT_EQ(info.count, count);
      EXPECT_EQ(info.header_bytes, FrameHeaderBytes(count));
      EXPECT_STREQ(CodecName(info.codec),
                   frames[c].spec.substr(0, frames[c].spec.find(':')).c_str());
    }
  }
  // The larger threshold frame does exercise a 2-byte m.
  ValidFrame threshold = ValidFrames(kLargerCount)[3];
  EXPECT_EQ(threshold.sent_end - threshold.sent_at, 2u);
  // Empty slices too.
  for (const char* spec : {"none", "fp16", "topk:0.1", "threshold:1", "onebit", "randomk:0.1"}) {
    std::vector<float> out;
    Status s = DecodeExact(EncodeText(spec, {}), 0, &out);
    EXPECT_TRUE(s.ok()) << spec << ": " << s;
  }
}

TEST(FrameValidation, EveryTruncationAndEveryTrailingByteIsRefused) {
  for (const ValidFrame& f : SmallAndLargerValidFrames()) {
    for (size_t len = 0; len < f.bytes.size(); ++len) {
      FrameInfo info;
      std::vector<float> out;
      EXPECT_FALSE(InspectExact(f.bytes.substr(0, len), &info).ok()) << f.spec << " " << len;
      Status s = DecodeExact(f.bytes.substr(0, len), f.count, &out);
      EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << f.spec << " " << len;
    }
    for (const std::string& tail : {std::string(1, '\0'), std::string(4, '\x01')}) {
      std::vector<float> out;
      Status s = DecodeExact(f.bytes + tail, f.count, &out);
      EXPECT_FALSE(s.ok()) << f.spec << " + " << tail.size() << " bytes";
    }
  }
}

// Marker, codec and every bit of the count varint (a 1-byte and a 2-byte one).
TEST(FrameValidation, EveryBitFlipInTheHeaderIsRefused) {
  for (const ValidFrame& f : SmallAndLargerValidFrames()) {
    for (size_t bit = 0; bit < 8 * f.fields_at; ++bit) {
      std::string bad = f.bytes;
      bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
      std::vector<float> out;
      Status s = DecodeExact(bad, f.count, &out);
      EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << f.spec << " bit " << bit;
    }
  }
}

// The codec fields: a flipped k or m no longer matches the payload; a flipped tau, scale
// or seed may still make a well-formed frame, which then decodes without harm.
TEST(FrameValidation, BitFlipsInCodecFieldsAreRefusedOrDecodeSafely) {
  for (const ValidFrame& f : SmallAndLargerValidFrames()) {
    for (size_t bit = 8 * f.fields_at; bit < 8 * f.fields_end; ++bit) {
      std::string bad = f.bytes;
      bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
      std::vector<float> out;
      Status s = DecodeExact(bad, f.count, &out);
      if (bit / 8 >= f.sent_at && bit / 8 < f.sent_end) {
        EXPECT_FALSE(s.ok()) << f.spec << " " << f.count << " bit " << bit;
      }
      if (s.ok() && f.spec != "none" && f.spec != "fp16") {
        for (float x : out) EXPECT_TRUE(std::isfinite(x)) << f.spec << " bit " << bit;
      }
    }
  }
}

TEST(FrameValidation, RandomBytesAndRandomEditsNeverCrash) {
  std::mt19937_64 rng(77);
  std::vector<ValidFrame> frames = SmallAndLargerValidFrames();
  size_t accepted = 0;
  for (int trial = 0; trial < 6000; ++trial) {
    std::string bytes;
    switch (trial % 3) {
      case 0:  // noise
        bytes.resize(rng() % 200);
        for (char& c : bytes) c = static_cast<char>(rng());
        break;
      case 1: {  // a plausible header over noise
        FrameBytes head(static_cast<uint8_t>(rng() % 7), rng() % 64);
        bytes = head.str() + std::string(rng() % 150, '\0');
        for (size_t i = head.size(); i < bytes.size(); ++i) bytes[i] = static_cast<char>(rng());
        break;
      }
      default: {  // a valid frame with a few bytes changed
        bytes = frames[rng() % frames.size()].bytes;
        for (int edits = 1 + rng() % 3; edits > 0; --edits) {
          bytes[rng() % bytes.size()] = static_cast<char>(rng());
        }
      }
    }
    FrameInfo info;
    Status s = InspectExact(bytes, &info);
    std::vector<float> out;
    if (s.ok() && info.count <= 4096) {
      Status d = DecodeExact(bytes, info.count, &out);
      ASSERT_TRUE(d.ok()) << "InspectFrame accepted what DecodeFrame refuses: " << d;
      ++accepted;
    }
    Status d = DecodeExact(bytes, kSmallCount, &out);
    if (!s.ok()) {
      ASSERT_FALSE(d.ok()) << "DecodeFrame accepted what InspectFrame refuses";
    }
  }
  EXPECT_GT(accepted, 100u) << "the edits should reach the decoders' success paths too";
}

TEST(FrameValidation, CountMismatchIsRefusedNamingBothCounts) {
  for (const ValidFrame& f : ValidFrames()) {
    for (size_t count : {kSmallCount - 1, kSmallCount + 1, size_t{0}}) {
      std::vector<float> out;
      Status s = DecodeExact(f.bytes, count, &out);
      EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << f.spec;
      EXPECT_TRUE(Contains(s, "byte 2: ")) << s;
      EXPECT_TRUE(Contains(s, std::to_string(kSmallCount) + " values but " + std::to_string(count) +
                                  " are expected"))
          << s;
    }
  }
}

TEST(FrameValidation, HeaderFaultsAreNamedWithTheirByte) {
  Status s = DecodeBytes(FrameBytes(Codec::kNone, 0), 0);
  EXPECT_TRUE(s.ok()) << s;
  FrameInfo info;
  for (size_t size : {0, 1}) {
    s = InspectFrame("\xc2", size, &info);
    EXPECT_TRUE(Contains(s, "ends before its count")) << s;
  }
  s = InspectFrame("\xc2\x00", 2, &info);
  EXPECT_TRUE(Contains(s, "byte 2: count varint runs past the end")) << s;
  std::vector<float> out;
  std::string wrong_marker = FrameBytes(Codec::kNone, 0).str();
  wrong_marker[0] = '\x00';
  s = DecodeExact(wrong_marker, 0, &out);
  EXPECT_TRUE(Contains(s, "byte 0: marker 0x00 is not 0xc2")) << s;
  // A frame of format 1 (fixed 12-byte header, u64 count): one float, refused by name.
  std::string format1("\xc1\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x3f", 16);
  s = DecodeExact(format1, 1, &out);
  EXPECT_TRUE(Contains(s, "byte 0: marker 0xc1 is frame format 1")) << s;
  for (uint8_t codec : {6, 99, 255}) {
    s = DecodeBytes(FrameBytes(codec, 0), 0);
    EXPECT_TRUE(Contains(s, "byte 1: unknown codec " + std::to_string(codec))) << s;
  }
  s = DecodeBytes(FrameBytes(Codec::kNone, 2).F32(1.f).F32(2.f).Byte(0), 2);
  EXPECT_TRUE(Contains(s, "byte 3: none frame of 2 values needs 4 bytes per value")) << s;
  s = DecodeBytes(FrameBytes(Codec::kFp16, uint64_t{1} << 62), 4);
  EXPECT_FALSE(s.ok());
}

TEST(FrameValidation, CountVarintFaultsAreRefused) {
  // Not the shortest form: 2 as 0x82 0x00, 0 as 0x80 0x00. The frame is otherwise valid.
  EXPECT_TRUE(DecodeBytes(FrameBytes(Codec::kNone).Byte(0x02).F32(1.f).F32(2.f), 2).ok());
  Status s = DecodeBytes(FrameBytes(Codec::kNone).Byte(0x82).Byte(0x00).F32(1.f).F32(2.f), 2);
  EXPECT_TRUE(Contains(s, "byte 2: count varint is not in its shortest form")) << s;
  s = DecodeBytes(FrameBytes(Codec::kNone).Byte(0x80).Byte(0x00), 0);
  EXPECT_TRUE(Contains(s, "byte 2: count varint is not in its shortest form")) << s;
  // Running past the end of the frame, after 1 to 9 continuation bytes.
  for (int continued = 1; continued < 10; ++continued) {
    FrameBytes f(Codec::kNone);
    for (int i = 0; i < continued; ++i) f.Byte(0xff);
    s = DecodeBytes(f, 0);
    EXPECT_TRUE(Contains(s, "byte 2: count varint runs past the end of the frame")) << s;
  }
  // Over 64 bits: a tenth byte above 1, or an eleventh byte.
  FrameBytes ten(Codec::kNone);
  for (int i = 0; i < 9; ++i) ten.Byte(0xff);
  s = DecodeBytes(FrameBytes(ten).Byte(0x02), 0);
  EXPECT_TRUE(Contains(s, "byte 2: count varint overflows 64 bits")) << s;
  s = DecodeBytes(FrameBytes(ten).Byte(0x81).Byte(0x00), 0);
  EXPECT_TRUE(Contains(s, "byte 2: count varint overflows 64 bits")) << s;
  // 2^64 - 1 is a count: the longest header, 12 bytes.
  FrameInfo info;
  std::string max_count = FrameBytes(ten).Byte(0x01).str();
  ASSERT_TRUE(ReadFrameHeader(max_count.data(), max_count.size(), &info).ok());
  EXPECT_EQ(info.count, ~uint64_t{0});
  EXPECT_EQ(info.header_bytes, 12u);
  s = InspectExact(max_count, &info);
  EXPECT_TRUE(Contains(s, "byte 12: none frame of 18446744073709551615 values")) << s;
}

// Every bound a count sets is checked against the bytes that are there, by division, so
// a huge count neither overflows a size computation nor makes the decoder allocate. (A
// sanitizer build would report an allocation this size; a plain build would throw.)
TEST(FrameValidation, HugeCountsWithTinyPayloadsAreRefusedWithoutAllocating) {
  for (uint64_t count : {uint64_t{1} << 62, ~uint64_t{0}, uint64_t{1} << 35}) {
    std::vector<FrameBytes> frames = {
        FrameBytes(Codec::kNone, count).F32(1.f),
        FrameBytes(Codec::kFp16, count).Byte(0).Byte(0),
        FrameBytes(Codec::kTopk, count).Varint(count).F32(1.f).Varint(0),
        FrameBytes(Codec::kTopk, count).Varint(uint64_t{1} << 30).F32(1.f).Varint(0),
        FrameBytes(Codec::kThreshold, count).F32(1.f).Varint(1).U32(0),
        FrameBytes(Codec::kOneBit, count).F32(1.f).F32(1.f).Byte(0),
        FrameBytes(Codec::kRandomk, count).U64(1).Varint(count).F32(1.f),
        FrameBytes(Codec::kRandomk, count).U64(1).Varint(2).F32(1.f),
    };
    for (const FrameBytes& f : frames) {
      FrameInfo info;
      Status s = InspectExact(f.str(), &info);
      EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << count << " " << f.size();
      EXPECT_FALSE(DecodeBytes(f, 4).ok());
    }
    // One value kept of a huge count is well-formed; it only never matches a buffer.
    FrameBytes one(Codec::kTopk, count);
    one.Varint(1).F32(1.f).Varint(count - 1);
    FrameInfo info;
    EXPECT_TRUE(InspectExact(one.str(), &info).ok());
    EXPECT_TRUE(Contains(DecodeBytes(one, 4), "are expected"));
  }
}

TEST(FrameValidation, TopkFaultsAreRefused) {
  // Count 10: a 3-byte header, k at byte 3, values from byte 4.
  auto topk = [](uint64_t count, uint64_t k) {
    FrameBytes f(Codec::kTopk, count);
    f.Varint(k);
    for (uint64_t i = 0; i < std::min<uint64_t>(k, 8); ++i) f.F32(1.f + i);
    return f;
  };
  EXPECT_TRUE(DecodeBytes(topk(10, 2).Varint(3).Varint(4), 10).ok());
  Status s = DecodeBytes(topk(10, 2).Varint(3).Varint(7), 10);
  EXPECT_TRUE(Contains(s, "lies at or beyond count 10")) << s;  // index 10
  s = DecodeBytes(topk(10, 2).Varint(3).Varint(0), 10);
  EXPECT_TRUE(Contains(s, "byte 13: topk index 3 repeats")) << s;
  // A gap that would wrap around 2^64 to an index below the last one.
  s = DecodeBytes(topk(10, 2).Varint(5).Varint(~uint64_t{0} - 2), 10);
  EXPECT_TRUE(Contains(s, "beyond count")) << s;
  s = DecodeBytes(topk(3, 4), 3);
  EXPECT_TRUE(Contains(s, "byte 3: topk k = 4 exceeds count 3")) << s;
  s = DecodeBytes(topk(uint64_t{1} << 62, uint64_t{1} << 61), 4);  // no allocation from k
  EXPECT_TRUE(Contains(s, "byte 11: topk k = 2305843009213693952 needs at least")) << s;
  s = DecodeBytes(FrameBytes(Codec::kTopk, 10).Byte(0x81).Byte(0x00).F32(1.f).Varint(0), 10);
  EXPECT_TRUE(Contains(s, "byte 3: topk k varint is not in its shortest form")) << s;
  s = DecodeBytes(FrameBytes(Codec::kTopk, 10).Byte(0x81), 10);
  EXPECT_TRUE(Contains(s, "byte 3: topk k varint runs past the end")) << s;
  s = DecodeBytes(topk(10, 1).Byte(0x83).Byte(0x00), 10);  // 3 in two bytes
  EXPECT_TRUE(Contains(s, "byte 8: topk index gap varint is not in its shortest form")) << s;
  FrameBytes overflow = topk(10, 1);
  for (int i = 0; i < 9; ++i) overflow.Byte(0xff);
  s = DecodeBytes(overflow.Byte(0x02), 10);
  EXPECT_TRUE(Contains(s, "overflows 64 bits")) << s;
  s = DecodeBytes(topk(10, 2).Varint(3).Byte(0x80), 10);
  EXPECT_TRUE(Contains(s, "runs past the end")) << s;
  s = DecodeBytes(topk(10, 1).Varint(3).Byte(0), 10);
  EXPECT_TRUE(Contains(s, "1 trailing bytes")) << s;
  s = DecodeBytes(FrameBytes(Codec::kTopk, 10).Varint(1).F32(kNaN).Varint(0), 10);
  EXPECT_TRUE(Contains(s, "byte 4: topk value 0 is nan")) << s;
}

TEST(FrameValidation, ThresholdFaultsAreRefused) {
  // Count 10: a 3-byte header, tau at byte 3, m at byte 7, words from byte 8.
  auto threshold = [](uint64_t count, float tau, std::vector<uint32_t> words) {
    FrameBytes f(Codec::kThreshold, count);
    f.F32(tau).Varint(words.size());
    for (uint32_t w : words) f.U32(w);
    return f;
  };
  std::vector<float> out;
  EXPECT_TRUE(DecodeBytes(threshold(10, 0.5f, {1, 0x80000003u}), 10).ok());
  for (float tau : {0.f, -0.5f, kNaN, kInf}) {
    Status s = DecodeBytes(threshold(10, tau, {}), 10);
    EXPECT_TRUE(Contains(s, "byte 3: threshold tau")) << s;
  }
  Status s = DecodeBytes(FrameBytes(Codec::kThreshold, 10).Byte(0).Byte(0), 10);
  EXPECT_TRUE(Contains(s, "threshold frame ends inside its tau")) << s;
  s = DecodeBytes(threshold(10, 0.5f, {3, 10}), 10);
  EXPECT_TRUE(Contains(s, "byte 12: threshold index 10 is not below count 10")) << s;
  s = DecodeBytes(threshold(10, 0.5f, {4, 0x80000002u}), 10);
  EXPECT_TRUE(Contains(s, "index 2 follows 4")) << s;
  s = DecodeBytes(threshold(10, 0.5f, {4, 0x80000004u}), 10);
  EXPECT_TRUE(Contains(s, "index 4 follows 4")) << s;
  s = DecodeBytes(FrameBytes(Codec::kThreshold, 10).F32(0.5f).Varint(11), 10);
  EXPECT_TRUE(Contains(s, "byte 7: threshold m = 11 exceeds count 10")) << s;
  s = DecodeBytes(FrameBytes(Codec::kThreshold, 10).F32(0.5f).Byte(0x81).Byte(0x00).U32(1), 10);
  EXPECT_TRUE(Contains(s, "byte 7: threshold m varint is not in its shortest form")) << s;
  s = DecodeBytes(FrameBytes(Codec::kThreshold, 10).F32(0.5f).Varint(2).U32(1), 10);
  EXPECT_TRUE(Contains(s, "byte 8: threshold m = 2 needs 8 bytes of words, frame has 4")) << s;
  s = DecodeBytes(threshold(kMaxThresholdCount + 1, 0.5f, {}), 4);
  EXPECT_TRUE(Contains(s, "byte 2: threshold frame of 2147483649 values: at most 2^31")) << s;
}

TEST(FrameValidation, OneBitFaultsAreRefused) {
  // Count 10: a 3-byte header, the scales at bytes 3 and 7, bits at bytes 11 and 12.
  auto onebit = [](uint64_t count, float pos, float neg, std::string bits) {
    FrameBytes f(Codec::kOneBit, count);
    f.F32(pos).F32(neg);
    for (char c : bits) f.Byte(static_cast<uint8_t>(c));
    return f;
  };
  EXPECT_TRUE(DecodeBytes(onebit(10, 1.f, 2.f, std::string("\x05\x02", 2)), 10).ok());
  for (float scale : {kNaN, kInf, -1.f, -0.f}) {
    Status s = DecodeBytes(onebit(10, scale, 1.f, std::string(2, '\0')), 10);
    EXPECT_TRUE(Contains(s, "byte 3: onebit positive scale")) << s;
    s = DecodeBytes(onebit(10, 1.f, scale, std::string(2, '\0')), 10);
    EXPECT_TRUE(Contains(s, "byte 7: onebit negative scale")) << s;
  }
  Status s = DecodeBytes(onebit(10, 1.f, 1.f, std::string("\x00\x04", 2)), 10);
  EXPECT_TRUE(Contains(s, "byte 12: onebit padding bits are not zero")) << s;
  s = DecodeBytes(onebit(10, 1.f, 1.f, std::string(3, '\0')), 10);
  EXPECT_TRUE(Contains(s, "byte 11: onebit frame of 10 values needs 2 bytes of bits, frame has 3"))
      << s;
  s = DecodeBytes(FrameBytes(Codec::kOneBit, 10).F32(1.f), 10);
  EXPECT_TRUE(Contains(s, "onebit frame ends inside its two scales")) << s;
}

TEST(FrameValidation, RandomkFaultsAreRefused) {
  // Count 10: a 3-byte header, the draw seed at byte 3, k at byte 11, values from byte 12.
  auto randomk = [](uint64_t count, uint64_t k, size_t values) {
    FrameBytes f(Codec::kRandomk, count);
    f.U64(123).Varint(k);
    for (size_t i = 0; i < values; ++i) f.F32(1.f);
    return f;
  };
  EXPECT_TRUE(DecodeBytes(randomk(10, 3, 3), 10).ok());
  Status s = DecodeBytes(randomk(10, 11, 11), 10);
  EXPECT_TRUE(Contains(s, "byte 11: randomk k = 11 exceeds count 10")) << s;
  s = DecodeBytes(randomk(10, 3, 2), 10);
  EXPECT_TRUE(Contains(s, "byte 12: randomk k = 3 needs 12 bytes of values, frame has 8")) << s;
  s = DecodeBytes(FrameBytes(Codec::kRandomk, 10).U64(1).Byte(0x83).Byte(0x00), 10);
  EXPECT_TRUE(Contains(s, "byte 11: randomk k varint is not in its shortest form")) << s;
  s = DecodeBytes(FrameBytes(Codec::kRandomk, 10).U64(1).Varint(1).F32(-kInf), 10);
  EXPECT_TRUE(Contains(s, "byte 12: randomk value 0 is -inf")) << s;
  s = DecodeBytes(FrameBytes(Codec::kRandomk, 10).U32(1), 10);
  EXPECT_TRUE(Contains(s, "randomk frame ends inside its 8-byte draw seed")) << s;
  // A huge count is well-formed on its own but never matches a real buffer.
  FrameInfo info;
  EXPECT_TRUE(InspectExact(randomk(uint64_t{1} << 62, 0, 0).str(), &info).ok());
  s = DecodeBytes(randomk(uint64_t{1} << 62, 0, 0), 10);
  EXPECT_TRUE(Contains(s, "are expected")) << s;
}

// ---------------------------------------------------------------------------------------
// The encoders' contract.

TEST(Encode, NonFiniteValuesAreRefusedBeforeAnythingChanges) {
  for (const char* text : {"topk:0.1", "threshold:0.5", "onebit", "randomk:0.1"}) {
    std::vector<float> g = Gradients(50, 13), r = Gradients(50, 14);
    g[31] = kNaN;
    std::vector<float> r_before = r;
    SArray<char> frame = {'x'};
    try {
      Compressor::Create(Spec(text))->Encode(g.data(), g.size(), r.data(), 0, &frame);
      ADD_FAILURE() << text << " took a NaN";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("value 31 of 50"), std::string::npos) << e.what();
    }
    EXPECT_EQ(r, r_before) << text;
    EXPECT_EQ(Str(frame), "x") << text;
    // An infinite sum of finite inputs counts too.
    g = {3e38f, 1.f};
    r = {3e38f, 0.f};
    EXPECT_THROW(Compressor::Create(Spec(text))->Encode(g.data(), 2, r.data(), 0, &frame), Error)
        << text;
  }
}

TEST(Encode, ThresholdRefusesSlicesBeyondThirtyOneBitIndices) {
  std::vector<float> g(1, 1.f);
  SArray<char> frame;
  // n is checked before any value is read.
  EXPECT_THROW(Compressor::Create(Spec("threshold:1"))
                   ->Encode(g.data(), kMaxThresholdCount + 1, nullptr, 0, &frame),
               Error);
}

TEST(Encode, ReplacesTheOutputWithAFreshFrameAndIsDeterministic) {
  std::vector<float> g = Gradients(300, 15);
  for (const char* text : {"none", "fp16", "topk:0.05", "threshold:1", "onebit", "randomk:0.05"}) {
    SArray<char> frame = {'o', 'l', 'd'};
    SArray<char> shared = frame;
    auto codec = Compressor::Create(Spec(text));
    codec->Encode(g.data(), g.size(), nullptr, 9, &frame);
    EXPECT_EQ(Str(shared), "old") << text;
    SArray<char> again;
    codec->Encode(g.data(), g.size(), nullptr, 9, &again);
    EXPECT_EQ(Str(frame), Str(again)) << text;
  }
}

// ---------------------------------------------------------------------------------------
// CodecSpec.

TEST(CodecSpecParse, AcceptsEveryDocumentedForm) {
  CodecSpec s = Spec("none");
  EXPECT_EQ(s.codec, Codec::kNone);
  EXPECT_EQ(Spec("fp16").codec, Codec::kFp16);
  EXPECT_EQ(Spec("onebit").codec, Codec::kOneBit);
  s = Spec("topk:0.001");
  EXPECT_EQ(s.codec, Codec::kTopk);
  EXPECT_EQ(s.ratio, 0.001);
  EXPECT_EQ(s.k, 0u);
  s = Spec("topk:k=100");
  EXPECT_EQ(s.k, 100u);
  EXPECT_EQ(s.ratio, 0);
  s = Spec("threshold:0.01");
  EXPECT_EQ(s.codec, Codec::kThreshold);
  EXPECT_EQ(s.tau, 0.01f);
  s = Spec("randomk:0.01");
  EXPECT_EQ(s.codec, Codec::kRandomk);
  EXPECT_EQ(s.ratio, 0.01);
  EXPECT_EQ(s.seed, 0u);
  s = Spec("randomk:0.01:seed=7");
  EXPECT_EQ(s.seed, 7u);
  s = Spec("randomk:k=5:seed=18446744073709551615");
  EXPECT_EQ(s.k, 5u);
  EXPECT_EQ(s.seed, ~uint64_t{0});
  EXPECT_EQ(Spec("topk:1").ratio, 1.0);
  EXPECT_EQ(Spec("topk:1e-3").ratio, 0.001);
}

TEST(CodecSpecParse, RefusesBadTextQuotingIt) {
  auto expect_refused = [](const std::vector<std::string>& texts) {
    for (const std::string& text : texts) {
      CodecSpec spec;
      spec.codec = Codec::kOneBit;
      Status s = CodecSpec::Parse(text, &spec);
      EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << "'" << text << "'";
      EXPECT_TRUE(Contains(s, "'" + text + "'")) << s;
      EXPECT_EQ(spec.codec, Codec::kOneBit) << "a refused text leaves *out alone";
    }
  };
  // Names and the number of parameters.
  expect_refused({"", "zip", "Topk:0.1", "topk", "topk:", "onebit:1", "none:", "fp16:x",
                  "threshold", "threshold:1:2", "randomk", "topk:0.1:seed=1"});
  // Ratios and counts.
  expect_refused({"topk:0", "topk:1.5", "topk:-0.1", "topk:nan", "topk:inf", "topk:0.1x",
                  "topk: 0.1", "topk:k=0", "topk:k=-1", "topk:k=", "topk:k=1.5", "randomk:0",
                  "randomk:2"});
  // Tau.
  expect_refused(
      {"threshold:0", "threshold:-1", "threshold:nan", "threshold:inf", "threshold:abc"});
  // Seeds.
  expect_refused({"randomk:0.1:seed=", "randomk:0.1:seed=-1", "randomk:0.1:sed=1",
                  "randomk:0.1:seed=1:x", "randomk:0.1:seed=18446744073709551616"});
  CodecSpec spec;
  EXPECT_TRUE(Contains(CodecSpec::Parse("topk:1.5", &spec), "outside (0, 1]"));
  EXPECT_TRUE(Contains(CodecSpec::Parse("zip", &spec), "unknown codec 'zip'"));
}

TEST(CodecSpecParse, ToStringRoundTrips) {
  for (const char* text : {"none", "fp16", "onebit", "topk:0.001", "topk:k=100", "topk:1",
                           "threshold:0.01", "threshold:3.4028235e+38", "randomk:0.01:seed=7",
                           "randomk:k=3:seed=0", "randomk:0.3333333333333333:seed=1"}) {
    CodecSpec spec = Spec(text);
    EXPECT_EQ(spec.ToString(), text);
    CodecSpec again = Spec(spec.ToString());
    EXPECT_EQ(again.codec, spec.codec);
    EXPECT_EQ(again.ratio, spec.ratio);
    EXPECT_EQ(again.k, spec.k);
    EXPECT_EQ(again.tau, spec.tau);
    EXPECT_EQ(again.seed, spec.seed);
  }
  EXPECT_EQ(Spec("randomk:0.5").ToString(), "randomk:0.5:seed=0");
  EXPECT_EQ(Spec("topk:1e-3").ToString(), "topk:0.001");
}

TEST(CodecSpecParse, CreateRefusesASpecThatDoesNotValidate) {
  CodecSpec spec;
  spec.codec = Codec::kTopk;  // neither ratio nor k
  EXPECT_FALSE(spec.Validate().ok());
  EXPECT_THROW(Compressor::Create(spec), Error);
  spec.ratio = 0.1;
  spec.k = 4;  // both
  EXPECT_TRUE(Contains(spec.Validate(), "give one of them"));
  spec.codec = static_cast<Codec>(17);
  EXPECT_THROW(Compressor::Create(spec), Error);
  spec = CodecSpec();
  spec.codec = Codec::kThreshold;
  spec.tau = -1;
  EXPECT_THROW(Compressor::Create(spec), Error);
}

// ---------------------------------------------------------------------------------------
// ResidualStore.

TEST(ResidualStore, NewEntriesAreZeroAndKeepTheirMemoryUntilTheLengthChanges) {
  ResidualStore store;
  float* a = store.Get(1, -1, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(a[i], 0.f);
  a[2] = 5.f;
  EXPECT_EQ(store.Get(1, -1, 4), a);
  EXPECT_EQ(a[2], 5.f);
  float* chunk = store.Get(1, 0, 3);  // a chunk of the same key is its own entry
  EXPECT_NE(chunk, a);
  EXPECT_EQ(store.entries(), 2u);
  EXPECT_EQ(store.floats(), 7u);
  float* longer = store.Get(1, -1, 6);  // re-chunked: reset to zeros
  for (int i = 0; i < 6; ++i) EXPECT_EQ(longer[i], 0.f);
  EXPECT_EQ(store.entries(), 2u);
  EXPECT_EQ(store.floats(), 9u);
  store.Get(2, -1, 1)[0] = 1.f;
  EXPECT_EQ(store.entries(), 3u);
  store.Clear();
  EXPECT_EQ(store.entries(), 0u);
  EXPECT_EQ(store.floats(), 0u);
  EXPECT_EQ(store.Get(2, -1, 1)[0], 0.f);
}

}  // namespace
}  // namespace ps
