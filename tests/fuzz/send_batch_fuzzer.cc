// ParseSendBatch (van/send_batch.h): a batch frame of small messages, as the van's
// receive thread takes it off the socket (ZmqVan::ReceiveBatch).
//
// Input: the batch frame itself.
//
// Properties: ParseSendBatch never crashes or reads outside the frame; what it accepts
// lies inside the frame, every data frame 8-byte aligned within it, with at most the
// limit of frames per message; and an accepted batch is what a sender writes for those
// messages (SendBatch packs the parsed metas and frames into the same places).
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "ps/sarray.h"
#include "send_batch.h"

namespace {

constexpr size_t kMaxFrames = 64;  // the van's default max_frames

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ps::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // In a buffer of its own, so a read past the frame is caught.
  std::vector<char> frame(reinterpret_cast<const char*>(data),
                          reinterpret_cast<const char*>(data) + size);
  ps::ParsedBatch parsed;
  ps::Status s = ps::ParseSendBatch(frame.data(), frame.size(), kMaxFrames, &parsed);
  if (!s.ok()) {
    FUZZ_EXPECT(!s.message().empty());
    FUZZ_EXPECT(parsed.messages.empty() && parsed.frames.empty());
    return 0;
  }
  FUZZ_EXPECT(!parsed.messages.empty());
  ps::SendBatch again;
  size_t next_frame = 0;
  for (const ps::BatchedMessage& m : parsed.messages) {
    FUZZ_EXPECT(m.meta_offset <= size && m.meta_bytes <= size - m.meta_offset);
    FUZZ_EXPECT(m.first_frame == next_frame && m.frame_count <= kMaxFrames);
    next_frame += m.frame_count;
    FUZZ_EXPECT(next_frame <= parsed.frames.size());
    std::vector<ps::SArray<char>> frames;
    for (size_t f = m.first_frame; f < next_frame && f < parsed.frames.size(); ++f) {
      const ps::BatchedFrame& bf = parsed.frames[f];
      FUZZ_EXPECT(bf.offset % 8 == 0);
      FUZZ_EXPECT(bf.offset <= size && bf.bytes <= size - bf.offset);
      ps::SArray<char> copy;
      copy.CopyFrom(frame.data() + bf.offset, bf.bytes);
      frames.push_back(copy);
    }
    again.Append(std::string(frame.data() + m.meta_offset, m.meta_bytes), frames);
  }
  FUZZ_EXPECT(next_frame == parsed.frames.size());
  // Packed again, the messages take the same places (only the padding, which the
  // parser does not read, may differ).
  const std::string packed = again.Take();
  FUZZ_EXPECT(packed.size() == size);
  ps::ParsedBatch reparsed;
  FUZZ_EXPECT(ps::ParseSendBatch(packed.data(), packed.size(), kMaxFrames, &reparsed).ok());
  FUZZ_EXPECT(reparsed.messages.size() == parsed.messages.size());
  FUZZ_EXPECT(reparsed.frames.size() == parsed.frames.size());
  for (size_t m = 0; m < parsed.messages.size() && m < reparsed.messages.size(); ++m) {
    FUZZ_EXPECT(reparsed.messages[m].meta_offset == parsed.messages[m].meta_offset);
  }
  for (size_t f = 0; f < parsed.frames.size() && f < reparsed.frames.size(); ++f) {
    FUZZ_EXPECT(reparsed.frames[f].offset == parsed.frames[f].offset);
    FUZZ_EXPECT(reparsed.frames[f].bytes == parsed.frames[f].bytes);
  }
  return 0;
}
