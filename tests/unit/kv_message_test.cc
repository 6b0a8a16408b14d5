// Packing KVPairs into a Message and parsing them back (ps/internal/kv_message.h).
#include "ps/internal/kv_message.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ps {
namespace {

template <typename V>
std::vector<V> ToVector(const SArray<V>& a) {
  return std::vector<V>(a.begin(), a.end());
}

bool Contains(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

// A message with the given frames, typed as their element types say.
template <typename... Frames>
Message MessageOf(const Frames&... frames) {
  Message msg;
  (msg.AddData(frames), ...);
  return msg;
}

TEST(KVMessage, UniformWidthPairsRoundTripWithoutCopying) {
  KVPairs<float> in;
  in.keys = SArray<Key>{1, 5, 9};
  in.vals = SArray<float>{0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f};
  Message msg;
  AppendKVPairs(in, &msg);
  ASSERT_EQ(msg.data.size(), 2u);
  EXPECT_EQ(msg.meta.data_type, (std::vector<DataType>{DataType::kUInt64, DataType::kFloat}));

  KVPairs<float> out;
  Status s = ParseKVPairs(msg, /*need_sorted=*/true, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ToVector(out.keys), ToVector(in.keys));
  EXPECT_EQ(ToVector(out.vals), ToVector(in.vals));
  EXPECT_TRUE(out.lens.empty());
  EXPECT_EQ(out.keys.data(), in.keys.data());  // views the frames
  EXPECT_EQ(out.vals.data(), in.vals.data());
}

TEST(KVMessage, PairsWithLensRoundTrip) {
  KVPairs<double> in;
  in.keys = SArray<Key>{2, 4, 8};
  in.vals = SArray<double>{1, 2, 3, 4};
  in.lens = SArray<int>{1, 0, 3};
  Message msg;
  AppendKVPairs(in, &msg);
  ASSERT_EQ(msg.data.size(), 3u);
  EXPECT_EQ(msg.meta.data_type[2], DataType::kInt32);

  KVPairs<double> out;
  Status s = ParseKVPairs(msg, true, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ToVector(out.keys), ToVector(in.keys));
  EXPECT_EQ(ToVector(out.vals), ToVector(in.vals));
  EXPECT_EQ(ToVector(out.lens), ToVector(in.lens));
}

TEST(KVMessage, PullRequestWithNoValuesParses) {
  KVPairs<float> in;
  in.keys = SArray<Key>{3, 4};
  Message msg;
  AppendKVPairs(in, &msg);
  KVPairs<float> out;
  Status s = ParseKVPairs(msg, true, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out.keys.size(), 2u);
  EXPECT_TRUE(out.vals.empty());
}

TEST(ParseKVPairs, RejectsAKeysFrameThatIsNotUint64) {
  Message msg = MessageOf(SArray<int64_t>{1, 2}, SArray<float>{1.f, 2.f});
  KVPairs<float> out;
  Status s = ParseKVPairs(msg, true, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "keys frame holds int64")) << s;
  EXPECT_TRUE(Contains(s, "uint64")) << s;
}

TEST(ParseKVPairs, RejectsValuesOfAnotherTypeNamingBothTypes) {
  KVPairs<double> sent;
  sent.keys = SArray<Key>{1, 2};
  sent.vals = SArray<double>{1.0, 2.0};
  Message msg;
  AppendKVPairs(sent, &msg);
  KVPairs<float> out;
  Status s = ParseKVPairs(msg, true, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "double")) << s;
  EXPECT_TRUE(Contains(s, "float")) << s;
}

TEST(ParseKVPairs, RejectsALensFrameThatIsNotInt32) {
  Message msg = MessageOf(SArray<Key>{1, 2}, SArray<float>{1.f, 2.f}, SArray<int64_t>{1, 1});
  KVPairs<float> out;
  Status s = ParseKVPairs(msg, true, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "lens frame holds int64")) << s;
}

TEST(ParseKVPairs, RejectsLensThatDoNotAddUpToTheValues) {
  Message msg = MessageOf(SArray<Key>{1, 2}, SArray<float>{1.f, 2.f, 3.f}, SArray<int>{1, 1});
  KVPairs<float> out;
  Status s = ParseKVPairs(msg, true, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "lens add up to 2 values but 3 arrived")) << s;
}

TEST(ParseKVPairs, RejectsALensCountOtherThanOnePerKey) {
  Message msg = MessageOf(SArray<Key>{1, 2}, SArray<float>{1.f, 2.f}, SArray<int>{2});
  KVPairs<float> out;
  Status s = ParseKVPairs(msg, true, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "1 lens for 2 keys")) << s;
}

TEST(ParseKVPairs, RejectsNegativeLens) {
  Message msg = MessageOf(SArray<Key>{1, 2}, SArray<float>{1.f}, SArray<int>{2, -1});
  KVPairs<float> out;
  Status s = ParseKVPairs(msg, true, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "negative")) << s;
}

TEST(ParseKVPairs, RejectsValuesThatDoNotDivideEvenlyOverTheKeys) {
  Message msg = MessageOf(SArray<Key>{1, 2}, SArray<float>{1.f, 2.f, 3.f});
  KVPairs<float> out;
  Status s = ParseKVPairs(msg, true, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "3 values do not divide evenly over 2 keys")) << s;
}

TEST(ParseKVPairs, RejectsUnsortedKeysOnlyWhenAskedTo) {
  Message msg = MessageOf(SArray<Key>{5, 1, 1}, SArray<float>{1.f, 2.f, 3.f});
  KVPairs<float> out;
  Status s = ParseKVPairs(msg, /*need_sorted=*/true, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "not sorted")) << s;
  EXPECT_TRUE(Contains(s, "position 1")) << s;
  EXPECT_TRUE(ParseKVPairs(msg, /*need_sorted=*/false, &out).ok());
}

TEST(ParseKVPairs, RejectsMessagesWithNoFramesOrMoreThanThree) {
  KVPairs<float> out;
  Status none = ParseKVPairs(Message(), true, &out);
  EXPECT_EQ(none.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(none, "0 data frames")) << none;

  Message four = MessageOf(SArray<Key>{1}, SArray<float>{1.f}, SArray<int>{1}, SArray<int>{1});
  Status s = ParseKVPairs(four, true, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "4 data frames")) << s;
}

TEST(ParseKVPairs, RejectsAValuesFrameThatIsNotWholeValues) {
  Message msg = MessageOf(SArray<Key>{1}, SArray<float>{1.f});
  msg.data[1] = SArray<char>(6);  // declared float, 6 bytes
  KVPairs<float> out;
  Status s = ParseKVPairs(msg, true, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "whole number")) << s;
}

// ParseKVPairs promises a Status for every malformed message; a keys or lens frame
// that is not a whole number of elements must not escape as a thrown ps::Error.
TEST(ParseKVPairs, RejectsAKeysFrameThatIsNotWholeKeysWithAStatus) {
  Message msg = MessageOf(SArray<Key>{1, 2}, SArray<float>{1.f, 2.f});
  msg.data[0] = SArray<char>(12);  // declared uint64, 1.5 keys
  KVPairs<float> out;
  Status s;
  EXPECT_NO_THROW(s = ParseKVPairs(msg, true, &out));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s;
}

TEST(ParseKVPairs, RejectsALensFrameThatIsNotWholeLensWithAStatus) {
  Message msg = MessageOf(SArray<Key>{1, 2}, SArray<float>{1.f, 2.f}, SArray<int>{1, 1});
  msg.data[2] = SArray<char>(6);  // declared int32, 1.5 lens
  KVPairs<float> out;
  Status s;
  EXPECT_NO_THROW(s = ParseKVPairs(msg, true, &out));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s;
}

}  // namespace
}  // namespace ps
