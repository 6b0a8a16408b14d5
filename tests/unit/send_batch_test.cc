// SendBatch: small messages packed into one frame and taken apart again, and the
// parser's refusal of every malformed batch (a peer's bytes).
#include "send_batch.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace ps {
namespace {

SArray<char> Frame(const std::string& text) {
  SArray<char> f;
  f.CopyFrom(text.data(), text.size());
  return f;
}

std::string Slice(const std::string& batch, size_t offset, size_t bytes) {
  return batch.substr(offset, bytes);
}

// Message m's meta, and its frame f, as text.
std::string Meta(const std::string& batch, const ParsedBatch& p, size_t m) {
  return Slice(batch, p.messages[m].meta_offset, p.messages[m].meta_bytes);
}
const BatchedFrame& FrameOf(const ParsedBatch& p, size_t m, size_t f) {
  return p.frames[p.messages[m].first_frame + f];
}
std::string Data(const std::string& batch, const ParsedBatch& p, size_t m, size_t f) {
  return Slice(batch, FrameOf(p, m, f).offset, FrameOf(p, m, f).bytes);
}

TEST(SendBatch, MessagesComeBackInOrderWithTheirMetaAndFrames) {
  SendBatch batch;
  EXPECT_TRUE(batch.empty());
  batch.Append("meta-one", {Frame("keys"), Frame("values of one")});
  batch.Append("m2", {});
  batch.Append("third meta", {Frame(""), Frame("x")});
  EXPECT_EQ(batch.messages(), 3u);
  std::string bytes = batch.Take();
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(batch.bytes(), 0u);
  ASSERT_TRUE(IsSendBatch(bytes.data(), bytes.size()));

  ParsedBatch out;
  ASSERT_TRUE(ParseSendBatch(bytes.data(), bytes.size(), 16, &out).ok());
  ASSERT_EQ(out.messages.size(), 3u);
  ASSERT_EQ(out.frames.size(), 4u);
  EXPECT_EQ(Meta(bytes, out, 0), "meta-one");
  ASSERT_EQ(out.messages[0].frame_count, 2u);
  EXPECT_EQ(Data(bytes, out, 0, 0), "keys");
  EXPECT_EQ(Data(bytes, out, 0, 1), "values of one");
  EXPECT_EQ(Meta(bytes, out, 1), "m2");
  EXPECT_EQ(out.messages[1].frame_count, 0u);
  EXPECT_EQ(Meta(bytes, out, 2), "third meta");
  ASSERT_EQ(out.messages[2].frame_count, 2u);
  EXPECT_EQ(FrameOf(out, 2, 0).bytes, 0u);
  EXPECT_EQ(Data(bytes, out, 2, 1), "x");
  // Every frame starts 8-byte aligned within the batch, so typed views of it are legal.
  for (const BatchedFrame& f : out.frames) EXPECT_EQ(f.offset % 8, 0u);
}

TEST(SendBatch, ARestoredBatchIsSentAsItWasAndTakesMore) {
  SendBatch batch;
  batch.Append("a", {Frame("1")});
  std::string first = batch.Take();
  batch.Restore(first, 1);
  batch.Append("b", {Frame("22")});
  std::string bytes = batch.Take();
  ParsedBatch out;
  ASSERT_TRUE(ParseSendBatch(bytes.data(), bytes.size(), 16, &out).ok());
  ASSERT_EQ(out.messages.size(), 2u);
  EXPECT_EQ(Data(bytes, out, 0, 0), "1");
  EXPECT_EQ(Data(bytes, out, 1, 0), "22");
}

TEST(SendBatch, AMetaFrameIsNeverTakenForABatch) {
  // A meta is protobuf, whose first byte (a field's tag) is never 0.
  std::string meta = "\x08\x01\x10\x02";
  EXPECT_FALSE(IsSendBatch(meta.data(), meta.size()));
  EXPECT_FALSE(IsSendBatch("", 0));
}

// Parses `bytes` and expects it refused with nothing in `out`.
void ExpectRefused(const std::string& bytes, size_t max_frames = 16) {
  ParsedBatch out;
  out.messages.resize(1);
  out.frames.resize(1);
  Status s = ParseSendBatch(bytes.data(), bytes.size(), max_frames, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_TRUE(out.messages.empty());
  EXPECT_TRUE(out.frames.empty());
}

TEST(SendBatch, EveryMalformedBatchIsRefusedWhole) {
  SendBatch batch;
  batch.Append("meta", {Frame("payload bytes"), Frame("more")});
  batch.Append("meta2", {Frame("z")});
  const std::string good = batch.Take();
  // Cut anywhere: refused.
  for (size_t n = 0; n < good.size(); ++n) ExpectRefused(good.substr(0, n));
  // Trailing bytes: refused.
  ExpectRefused(good + std::string(8, '\0'));
  // A count of 0, and one larger than the bytes could hold.
  std::string zero = good;
  std::memset(&zero[4], 0, 4);
  ExpectRefused(zero);
  std::string huge = good;
  std::memset(&huge[4], 0xff, 4);
  ExpectRefused(huge);
  // A frame size past the end, and a frame count past the limit.
  std::string long_frame = good;
  std::memset(&long_frame[8 + 8], 0xff, 4);  // first message, first frame's size
  ExpectRefused(long_frame);
  ExpectRefused(good, /*max_frames=*/1);
  // A frame count whose sizes cannot fit.
  std::string many = good;
  std::memset(&many[8 + 4], 0x7f, 4);
  ExpectRefused(many, 1u << 31);
  // Padding that is not zero, a message without a meta, and a batch larger than any
  // sender makes.
  SendBatch two;
  two.Append("m", {Frame("abc")});
  two.Append("n", {Frame("d")});
  std::string dirty = two.Take();
  // The first frame's 3 bytes are followed by 5 of padding.
  ParsedBatch p;
  ASSERT_TRUE(ParseSendBatch(dirty.data(), dirty.size(), 16, &p).ok());
  dirty[p.frames[0].offset + 3] = 1;
  ExpectRefused(dirty);
  SendBatch empty_meta;
  empty_meta.Append("", {Frame("x")});
  ExpectRefused(empty_meta.Take());
  SendBatch big;
  while (big.bytes() <= SendBatch::kMaxBytes) big.Append("meta", {Frame(std::string(1000, 'v'))});
  ExpectRefused(big.Take());
  // Not a batch at all.
  std::string other = good;
  other[0] = 'x';
  ExpectRefused(other);
}

}  // namespace
}  // namespace ps
