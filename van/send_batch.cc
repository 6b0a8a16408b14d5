// SendBatch (send_batch.h).
#include "send_batch.h"

#include <cstring>
#include <utility>

namespace ps {
namespace {

constexpr char kMagic[4] = {'\0', 'H', 'B', '1'};
constexpr size_t kHeaderBytes = 8;  // magic, message count
constexpr size_t kAlignment = 8;
// A batch's first allocation: room for a few dozen small messages without regrowing.
constexpr size_t kFirstReserve = 4096;

size_t AlignUp(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

void PutU32(std::string* out, uint32_t v) {
  char b[4] = {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
               static_cast<char>(v >> 24)};
  out->append(b, 4);
}

void SetU32(std::string* out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*out)[at + i] = static_cast<char>(v >> (8 * i));
}

uint32_t GetU32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(u[0]) | static_cast<uint32_t>(u[1]) << 8 |
         static_cast<uint32_t>(u[2]) << 16 | static_cast<uint32_t>(u[3]) << 24;
}

void PadTo(std::string* out, size_t at) { out->resize(at, '\0'); }

}  // namespace

void SendBatch::Append(const std::string& meta, const std::vector<SArray<char>>& data) {
  if (bytes_.empty()) {
    bytes_.reserve(kFirstReserve);
    bytes_.append(kMagic, sizeof(kMagic));
    PutU32(&bytes_, 0);  // the count, set by Take
  }
  PadTo(&bytes_, AlignUp(bytes_.size()));
  PutU32(&bytes_, static_cast<uint32_t>(meta.size()));
  PutU32(&bytes_, static_cast<uint32_t>(data.size()));
  for (const SArray<char>& frame : data) PutU32(&bytes_, static_cast<uint32_t>(frame.size()));
  PadTo(&bytes_, AlignUp(bytes_.size()));
  bytes_.append(meta);
  for (const SArray<char>& frame : data) {
    PadTo(&bytes_, AlignUp(bytes_.size()));
    bytes_.append(frame.data(), frame.size());
  }
  ++messages_;
}

size_t SendBatch::MaxAddedBytes(const std::string& meta, const std::vector<SArray<char>>& data) {
  // The header, the message's lengths and the meta, each frame, every one after up to
  // kAlignment - 1 bytes of padding.
  size_t n = kHeaderBytes + (kAlignment - 1) + 8 + 4 * data.size() + (kAlignment - 1) + meta.size();
  for (const SArray<char>& frame : data) n += (kAlignment - 1) + frame.size();
  return n;
}

std::string SendBatch::Take() {
  if (!bytes_.empty()) SetU32(&bytes_, sizeof(kMagic), messages_);
  std::string out;
  out.swap(bytes_);
  messages_ = 0;
  return out;
}

void SendBatch::Restore(std::string bytes, uint32_t messages) {
  bytes_ = std::move(bytes);
  messages_ = messages;
}

bool IsSendBatch(const void* bytes, size_t size) {
  return size >= sizeof(kMagic) && std::memcmp(bytes, kMagic, sizeof(kMagic)) == 0;
}

Status ParseSendBatch(const char* bytes, size_t size, size_t max_frames, ParsedBatch* out) {
  out->messages.clear();
  out->frames.clear();
  auto fail = [out](const std::string& what) {
    out->messages.clear();
    out->frames.clear();
    return Status::InvalidArgument("malformed batch of messages: " + what);
  };
  if (size < kHeaderBytes || !IsSendBatch(bytes, size)) return fail("no batch header");
  if (size > SendBatch::kMaxBytes) {
    return fail(std::to_string(size) + " bytes, more than a batch has (" +
                std::to_string(SendBatch::kMaxBytes) + ")");
  }
  const uint32_t count = GetU32(bytes + sizeof(kMagic));
  if (count == 0) return fail("no messages");
  // Each message takes at least its 8 header bytes: a count larger than that allows is
  // a lie, and must not size anything.
  if (count > size / 8) return fail("a count of " + std::to_string(count) + " messages");
  out->messages.reserve(count);
  size_t at = kHeaderBytes;
  // Skips the zero bytes that align the next item (false: not zero, or past the end).
  auto align = [&]() {
    size_t to = AlignUp(at);
    if (to > size) return false;
    for (; at < to; ++at) {
      if (bytes[at] != 0) return false;
    }
    return true;
  };
  for (uint32_t m = 0; m < count; ++m) {
    if (!align() || size - at < 8) return fail("message " + std::to_string(m) + " is cut off");
    BatchedMessage msg;
    msg.meta_bytes = GetU32(bytes + at);
    msg.frame_count = GetU32(bytes + at + 4);
    msg.first_frame = out->frames.size();
    at += 8;
    if (msg.frame_count > max_frames) {
      return fail(std::to_string(msg.frame_count) + " data frames, more than the limit of " +
                  std::to_string(max_frames));
    }
    if ((size - at) / 4 < msg.frame_count) {
      return fail("message " + std::to_string(m) + " is cut off");
    }
    // A message always has a meta (an empty one is a connection's probe, never batched).
    if (msg.meta_bytes == 0) return fail("message " + std::to_string(m) + " has no meta");
    for (size_t f = 0; f < msg.frame_count; ++f, at += 4) {
      out->frames.push_back(BatchedFrame{0, GetU32(bytes + at)});
    }
    if (!align() || size - at < msg.meta_bytes) {
      return fail("the meta of message " + std::to_string(m) + " is cut off");
    }
    msg.meta_offset = at;
    at += msg.meta_bytes;
    for (size_t f = msg.first_frame; f < out->frames.size(); ++f) {
      BatchedFrame& frame = out->frames[f];
      if (!align() || size - at < frame.bytes) {
        return fail("a data frame of message " + std::to_string(m) + " is cut off");
      }
      frame.offset = at;
      at += frame.bytes;
    }
    out->messages.push_back(msg);
  }
  if (at != size) return fail(std::to_string(size - at) + " bytes after the last message");
  return Status::OK();
}

}  // namespace ps
