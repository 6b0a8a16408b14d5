// DecodeMeta (van/meta_codec.h): a meta frame and the sizes of the data frames that
// came with it, as the van's receive thread hands them over.
//
// Input: u8 frame count (at most 64, the van's max_frames: it drops messages with more
// before decoding), that many u32 frame sizes, then the meta frame itself.
//
// Properties: DecodeMeta never crashes; a meta it accepts lists exactly the frames that
// arrived; and what it accepts a sender can send: EncodeMeta takes the decoded meta, and
// its bytes decode again to a meta that encodes to the same bytes.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "meta_codec.h"
#include "ps/internal/message.h"

namespace {

constexpr size_t kMaxFrames = 64;
// The round trip builds frames of the declared sizes; bigger ones are left out.
constexpr size_t kMaxRoundTripBytes = 1 << 20;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ps::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ps::fuzz::InputReader in(data, size);
  size_t frames = in.Take<uint8_t>();
  if (frames > kMaxFrames) return 0;
  std::vector<size_t> sizes;
  size_t total = 0;
  for (size_t i = 0; i < frames; ++i) {
    sizes.push_back(in.Take<uint32_t>());
    total += sizes.back();
  }
  // The meta frame in a buffer of its own, so a read past it is caught.
  const std::string meta_bytes = in.TakeRest();
  std::vector<char> meta_frame(meta_bytes.begin(), meta_bytes.end());

  ps::Message msg;
  ps::Status s = ps::DecodeMeta(meta_frame.data(), meta_frame.size(), sizes, &msg.meta);
  if (!s.ok()) {
    FUZZ_EXPECT(!s.message().empty());
    return 0;
  }
  FUZZ_EXPECT(msg.meta.data_type.size() == frames);
  if (total > kMaxRoundTripBytes) return 0;

  for (size_t n : sizes) msg.data.push_back(ps::SArray<char>(n));
  std::string first;
  s = ps::EncodeMeta(msg, &first);
  FUZZ_EXPECT(s.ok());
  ps::Message again;
  s = ps::DecodeMeta(first.data(), first.size(), sizes, &again.meta);
  FUZZ_EXPECT(s.ok());
  again.data = msg.data;
  std::string second;
  s = ps::EncodeMeta(again, &second);
  FUZZ_EXPECT(s.ok());
  FUZZ_EXPECT(first == second);
  return 0;
}
