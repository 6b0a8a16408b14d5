// The encoders of worker/include/ps/compressor.h against the decoder of
// ps/internal/codec_frame.h: every frame a worker writes, a server must accept, and the
// error-feedback residual must hold exactly what the frame left out. The decoder is
// fuzzed on hostile frames by codec_frame; here the encoders meet hostile values (NaN,
// infinities, subnormals, ties, huge and tiny magnitudes) and odd parameters.
//
// Input: u8 codec (mod 6), u8 flags (bit 0: keep k values rather than a ratio; bit 1:
// with a residual), u64 k, f64 ratio, f32 tau, u64 seed, u64 nonce, u8 tiling, then
// floats: the gradient, followed by as many residual floats when there is a residual.
// With tiling t >= 240 the gradient (and residual) repeat 2^(t - 240) times, up to 2^16
// values in all, so that a short input reaches the paths for large slices too (topk
// samples slices of 32768 values and more).
//
// Properties: an encoder either throws ps::Error, for a non-finite gradient + residual
// under a codec that keeps a residual, leaving residual and frame untouched, or writes
// one frame that InspectFrame accepts with the codec and count asked for; it decodes;
// none decodes to v bitwise, and with a residual, residual == v - decoded for every
// finite v (0 where v is not finite).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_input.h"
#include "ps/base.h"
#include "ps/compressor.h"
#include "ps/internal/codec_frame.h"

namespace {

constexpr size_t kMaxValues = 1 << 16;

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ps::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ps::fuzz::InputReader in(data, size);
  ps::CodecSpec spec;
  spec.codec = static_cast<ps::Codec>(in.Take<uint8_t>() % 6);
  const uint8_t flags = in.Take<uint8_t>();
  const uint64_t k = in.Take<uint64_t>();
  const double ratio = in.Take<double>();
  if (flags & 1) {
    spec.k = k;
  } else {
    spec.ratio = ratio;
  }
  spec.tau = in.Take<float>();
  spec.seed = in.Take<uint64_t>();
  const uint64_t nonce = in.Take<uint64_t>();
  const uint8_t tiling = in.Take<uint8_t>();
  const size_t copies = tiling < 240 ? 1 : size_t{1} << (tiling - 240);
  const bool with_residual = flags & 2;
  if (!spec.Validate().ok()) return 0;

  const size_t floats = in.left() / sizeof(float) / (with_residual ? 2 : 1);
  if (floats == 0 || floats * copies > kMaxValues) return 0;
  std::vector<float> g0(floats), r0(floats);
  for (float& v : g0) v = in.Take<float>();
  for (size_t i = 0; with_residual && i < floats; ++i) r0[i] = in.Take<float>();
  const size_t n = floats * copies;
  std::vector<float> g(n), residual(n);
  for (size_t i = 0; i < n; ++i) {
    g[i] = g0[i % floats];
    residual[i] = r0[i % floats];
  }
  const std::vector<float> before = residual;

  std::unique_ptr<ps::Compressor> encoder = ps::Compressor::Create(spec);
  ps::SArray<char> frame;
  float* r = with_residual ? residual.data() : nullptr;
  const bool keeps_residual_state =
      spec.codec != ps::Codec::kNone && spec.codec != ps::Codec::kFp16;
  try {
    encoder->Encode(g.data(), n, r, nonce, &frame);
  } catch (const ps::Error&) {
    bool non_finite = false;
    for (size_t i = 0; i < n && !non_finite; ++i) {
      non_finite = !std::isfinite(with_residual ? g[i] + before[i] : g[i]);
    }
    FUZZ_EXPECT(keeps_residual_state && non_finite);
    FUZZ_EXPECT(frame.empty());
    FUZZ_EXPECT(std::memcmp(residual.data(), before.data(), n * sizeof(float)) == 0);
    return 0;
  }

  ps::FrameInfo info;
  ps::Status s = ps::InspectFrame(frame.data(), frame.size(), &info);
  if (!s.ok())
    std::fprintf(stderr, "%s frame refused: %s\n", spec.ToString().c_str(), s.ToString().c_str());
  FUZZ_EXPECT(s.ok());
  FUZZ_EXPECT(info.codec == spec.codec);
  FUZZ_EXPECT(info.count == n);
  std::vector<float> d(n);
  FUZZ_EXPECT(ps::DecodeFrame(frame.data(), frame.size(), d.data(), n).ok());

  for (size_t i = 0; i < n; ++i) {
    const float v = with_residual ? g[i] + before[i] : g[i];
    if (spec.codec == ps::Codec::kNone) FUZZ_EXPECT(SameBits(d[i], v));
    if (!with_residual) continue;
    if (std::isfinite(v)) {
      FUZZ_EXPECT(residual[i] == v - d[i]);
    } else {
      FUZZ_EXPECT(residual[i] == 0.f);
    }
  }
  return 0;
}
