// SendBatch: small data-channel messages to one peer packed into one frame. Internal
// to the van.
//
// A burst of small messages (a server's answers to a window of requests) costs one
// ZeroMQ message instead of one per message: one wake-up of each side's I/O thread,
// one system call on the socket and one receive instead of several per message.
//
// Wire (one frame after the ROUTER's identity; integers little-endian):
//   "\0HB1"                      4 bytes; a meta frame (protobuf) never starts with 0
//   u32 message count
//   per message:
//     u32 meta bytes, u32 data frame count, u32 bytes of each data frame
//     the meta, then each data frame; each starts at a multiple of 8 bytes from the
//     batch's start (zero padding before it), so that typed views of it are aligned
// Thread safety: none (a SendBatch lives under its link's mutex).
#ifndef HERDPS_VAN_SEND_BATCH_H_
#define HERDPS_VAN_SEND_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ps/sarray.h"
#include "ps/status.h"

namespace ps {

class SendBatch {
 public:
  // The most bytes a batch has: senders flush before a message would make it larger,
  // receivers refuse a larger one.
  static constexpr size_t kMaxBytes = 64 << 10;
  // Appends one message: its encoded meta and its data frames (copied).
  void Append(const std::string& meta, const std::vector<SArray<char>>& data);
  bool empty() const { return messages_ == 0; }
  uint32_t messages() const { return messages_; }
  // Bytes the batch's frame has now.
  size_t bytes() const { return bytes_.size(); }
  // At most how many bytes Append adds for this message (the batch's own header
  // included, for a first message).
  static size_t MaxAddedBytes(const std::string& meta, const std::vector<SArray<char>>& data);
  // The frame to send; the batch is empty afterwards.
  std::string Take();
  // Puts back, into an empty batch, what Take returned (a send that found no room).
  void Restore(std::string bytes, uint32_t messages);

 private:
  std::string bytes_;
  uint32_t messages_ = 0;
};

// Whether a frame is a batch (starts with the batch's magic).
bool IsSendBatch(const void* bytes, size_t size);

// A parsed batch: where each message's meta lies in the batch, and its data frames,
// frames[first_frame, first_frame + frame_count) of the batch's frame list.
struct BatchedMessage {
  size_t meta_offset = 0;
  size_t meta_bytes = 0;
  size_t first_frame = 0;
  size_t frame_count = 0;
};
struct BatchedFrame {
  size_t offset = 0;
  size_t bytes = 0;
};
struct ParsedBatch {
  std::vector<BatchedMessage> messages;
  std::vector<BatchedFrame> frames;
};

// Takes a batch apart, checking every length against the frame and the limits (at
// most `max_frames` data frames per message). InvalidArgument, with nothing in `out`,
// when anything is malformed: a batch is delivered whole or not at all.
Status ParseSendBatch(const char* bytes, size_t size, size_t max_frames, ParsedBatch* out);

}  // namespace ps

#endif  // HERDPS_VAN_SEND_BATCH_H_
