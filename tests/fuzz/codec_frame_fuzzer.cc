// InspectFrame / DecodeFrame (ps/internal/codec_frame.h): one compressed values frame,
// as a server receives it in a push (or a worker in an fp16 pull answer).
//
// Input: the frame.
//
// Properties: neither function crashes or reads outside the frame; they agree (a frame
// InspectFrame refuses, DecodeFrame refuses for any count; one it accepts, DecodeFrame
// decodes to exactly the count InspectFrame reported, and to no other count); decoding
// writes only out[0..count); none frames decode to their payload bitwise; sparse codecs
// decode to finite values.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_input.h"
#include "ps/internal/codec_frame.h"

namespace {

// Frames that decode to more floats are inspected only: decoding them would test the
// allocator, not the decoder.
constexpr uint64_t kMaxDecoded = 1 << 20;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ps::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* frame = reinterpret_cast<const char*>(data);
  ps::FrameInfo info;
  ps::Status inspected = ps::InspectFrame(frame, size, &info);

  // The count the header claims (when the header itself is valid), to try DecodeFrame
  // with it.
  ps::FrameInfo header;
  const bool header_ok = ps::ReadFrameHeader(frame, size, &header).ok();
  const uint64_t claimed = header_ok ? header.count : 0;

  if (!inspected.ok()) {
    FUZZ_EXPECT(inspected.code() == ps::Status::Code::kInvalidArgument);
    if (claimed <= kMaxDecoded) {
      std::vector<float> out(claimed);
      FUZZ_EXPECT(!ps::DecodeFrame(frame, size, out.data(), out.size()).ok());
    }
    return 0;
  }
  FUZZ_EXPECT(header_ok && info.count == claimed && info.codec == header.codec);
  FUZZ_EXPECT(info.header_bytes == ps::FrameHeaderBytes(info.count));
  FUZZ_EXPECT(info.header_bytes <= size);
  FUZZ_EXPECT(std::strcmp(ps::CodecName(info.codec), "unknown") != 0);
  if (info.count > kMaxDecoded) return 0;

  // Exactly count floats on the heap: a write past them is caught.
  std::vector<float> out(info.count);
  ps::Status decoded = ps::DecodeFrame(frame, size, out.data(), out.size());
  FUZZ_EXPECT(decoded.ok());
  if (info.codec == ps::Codec::kNone && !out.empty()) {
    FUZZ_EXPECT(std::memcmp(out.data(), frame + info.header_bytes, 4 * out.size()) == 0);
  }
  if (info.codec != ps::Codec::kNone && info.codec != ps::Codec::kFp16) {
    for (float v : out) FUZZ_EXPECT(std::isfinite(v));
  }
  std::vector<float> longer(info.count + 1);
  FUZZ_EXPECT(!ps::DecodeFrame(frame, size, longer.data(), longer.size()).ok());
  if (info.count > 0) {
    FUZZ_EXPECT(!ps::DecodeFrame(frame, size, out.data(), out.size() - 1).ok());
  }
  return 0;
}
