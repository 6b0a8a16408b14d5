// Key lists as key frames (ps/internal/key_frame.h) and their place in a KV message
// (EncodeKeysFrame / DecodeKeysFrame, ps/internal/kv_message.h).
#include "ps/internal/key_frame.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ps/internal/kv_message.h"

namespace ps {
namespace {

constexpr uint64_t kNoBound = UINT64_MAX;

std::vector<Key> RoundTrip(const std::vector<Key>& keys, size_t* frame_bytes = nullptr) {
  SArray<char> frame;
  EXPECT_TRUE(EncodeKeyFrame(keys.data(), keys.size(), &frame));
  if (frame_bytes) *frame_bytes = frame.size();
  SArray<Key> back;
  Status s = DecodeKeyFrame(frame.data(), frame.size(), kNoBound, &back);
  EXPECT_TRUE(s.ok()) << s;
  return std::vector<Key>(back.begin(), back.end());
}

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

Status Decode(const std::string& frame, SArray<Key>* keys, uint64_t bound = kNoBound) {
  return DecodeKeyFrame(frame.data(), frame.size(), bound, keys);
}

TEST(KeyFrame, ADenseRangeTakesAFewBytesWhateverItsLength) {
  std::vector<Key> keys(1000000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = 5000 + i;
  size_t bytes = 0;
  EXPECT_EQ(RoundTrip(keys, &bytes), keys);
  EXPECT_LE(bytes, 12u);
  EXPECT_EQ(PlanKeyFrame(keys.data(), keys.size()).form, KeyForm::kRuns);
}

TEST(KeyFrame, AStridedLayoutIsOneRunEvenWithHugeSteps) {
  // ps-lite's benchmark: keys kMaxKey / n * i + rank.
  const size_t n = 100000;
  std::vector<Key> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = UINT64_MAX / n * i + 1;
  size_t bytes = 0;
  EXPECT_EQ(RoundTrip(keys, &bytes), keys);
  EXPECT_LE(bytes, 20u);
}

TEST(KeyFrame, SparseSortedKeysTakeAboutOneByteEachForSmallSteps) {
  std::mt19937_64 rng(7);
  std::vector<Key> keys;
  Key k = 0;
  for (int i = 0; i < 10000; ++i) keys.push_back(k += 1 + rng() % 100);
  size_t bytes = 0;
  EXPECT_EQ(RoundTrip(keys, &bytes), keys);
  EXPECT_LE(bytes, keys.size() + 8);
  EXPECT_EQ(PlanKeyFrame(keys.data(), keys.size()).form, KeyForm::kSteps);
}

TEST(KeyFrame, OneRunIsAConstantStepOverTheWholeList) {
  std::vector<Key> strided = {7, 17, 27, 37, 47};
  std::vector<Key> broken = {7, 17, 27, 38, 48};
  std::vector<Key> falling = {9, 5, 1};
  std::vector<Key> wrapping = {UINT64_MAX - 1, UINT64_MAX, 0};  // equal steps mod 2^64
  EXPECT_TRUE(IsOneRun(strided.data(), strided.size()));
  EXPECT_FALSE(IsOneRun(broken.data(), broken.size()));
  EXPECT_FALSE(IsOneRun(falling.data(), falling.size()));
  EXPECT_FALSE(IsOneRun(wrapping.data(), wrapping.size()));
  EXPECT_TRUE(IsOneRun(strided.data(), 1));
  EXPECT_FALSE(IsOneRun(falling.data(), 2));
}

TEST(KeyFrame, ARunBrokenAnywhereIsNoRunAndTheCallersAnswerGivesTheSameFrame) {
  std::vector<Key> keys(5000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = 3 * i;
  EXPECT_TRUE(IsOneRun(keys.data(), keys.size()));
  for (size_t broken : {size_t{2}, size_t{1500}, size_t{4999}}) {
    std::vector<Key> k = keys;
    k[broken] += 1;
    EXPECT_FALSE(IsOneRun(k.data(), k.size())) << broken;
    SArray<char> asked, told;
    ASSERT_TRUE(EncodeKeyFrame(k.data(), k.size(), &asked));
    ASSERT_TRUE(EncodeKeyFrame(k.data(), k.size(), &told, KeyShape::kNotOneRun));
    EXPECT_EQ(std::string(asked.data(), asked.size()), std::string(told.data(), told.size()));
  }
  SArray<char> asked, told;
  ASSERT_TRUE(EncodeKeyFrame(keys.data(), keys.size(), &asked));
  ASSERT_TRUE(EncodeKeyFrame(keys.data(), keys.size(), &told, KeyShape::kOneRun));
  EXPECT_EQ(std::string(asked.data(), asked.size()), std::string(told.data(), told.size()));
  EXPECT_LE(asked.size(), 8u);
}

TEST(KeyFrame, TwoKeysTakeTheStepsFormWhichIsAByteShorterThanTheirRun) {
  // 4736137 takes 4 bytes: steps 2 + 1 + 4 + 1 = 8, half the raw 16; a run would be 9.
  std::vector<Key> keys = {4736137, 4736137 + 45};
  SArray<char> frame;
  ASSERT_TRUE(EncodeKeyFrame(keys.data(), keys.size(), &frame));
  EXPECT_EQ(frame.size(), 8u);
  EXPECT_EQ(static_cast<uint8_t>(frame[1]), static_cast<uint8_t>(KeyForm::kSteps));
  EXPECT_EQ(RoundTrip(keys), keys);
}

TEST(KeyFrame, KeysAtBothEndsOfTheRangeRoundTrip) {
  std::vector<Key> keys = {0, 1, 2, 1ull << 40, UINT64_MAX - 2, UINT64_MAX};
  EXPECT_EQ(RoundTrip(keys), keys);
}

TEST(KeyFrame, NothingIsWrittenForUnsortedRepeatedOrIncompressibleKeys) {
  SArray<char> frame{'x'};
  std::vector<Key> unsorted = {5, 3, 9};
  std::vector<Key> repeated = {1, 2, 2, 3};
  std::vector<Key> one_huge = {UINT64_MAX};  // 2 + 1 + 10 bytes > 8
  std::vector<Key> big_steps;                 // 6 bytes a key: not half the raw size
  std::mt19937_64 rng(3);
  for (Key k = 1; k <= 2000; ++k) big_steps.push_back((k << 40) + rng() % 1000000);
  EXPECT_FALSE(EncodeKeyFrame(unsorted.data(), unsorted.size(), &frame));
  EXPECT_FALSE(EncodeKeyFrame(repeated.data(), repeated.size(), &frame));
  EXPECT_FALSE(EncodeKeyFrame(one_huge.data(), one_huge.size(), &frame));
  EXPECT_FALSE(EncodeKeyFrame(nullptr, 0, &frame));
  EXPECT_FALSE(EncodeKeyFrame(big_steps.data(), big_steps.size(), &frame));
  EXPECT_LT(PlanKeyFrame(big_steps.data(), big_steps.size()).bytes, 2000 * 8u);
  EXPECT_EQ(frame.size(), 1u);
  EXPECT_EQ(PlanKeyFrame(unsorted.data(), unsorted.size()).bytes, 0u);
}

TEST(KeyFrame, TheDecoderRefusesEachMalformedFrameNamingTheFault) {
  SArray<Key> keys{42};
  struct Case {
    std::string frame;
    const char* says;
    uint64_t bound = kNoBound;
  } cases[] = {
      {Bytes({0xA1}), "less than its header"},
      {Bytes({0xC2, 1, 0}), "not a key frame's"},
      {Bytes({0xA1, 4, 0}), "unknown form 4"},
      // The bitmap form.
      {Bytes({0xA1, 3, 0}), "a bitmap frame of no keys"},
      {Bytes({0xA1, 3, 2, 7, 0, 0x03}), "over the 1", 1},
      {Bytes({0xA1, 3, 1}), "the first key's varint"},
      {Bytes({0xA1, 3, 1, 7, 0x80}), "the step varint"},
      {Bytes({0xA1, 3, 1, 7, 0}), "does not start with the first key's bit"},
      {Bytes({0xA1, 3, 1, 7, 0, 0x02}), "does not start with the first key's bit"},
      {Bytes({0xA1, 3, 1, 7, 0, 0x01, 0x00}), "the bitmap's last byte is 0"},
      {Bytes({0xA1, 3, 1, 7, 0, 0x03}), "the bitmap has 2 keys, the count says 1"},
      {Bytes({0xA1, 3, 3, 7, 0, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x80}), "has 2 keys, the count says 3"},
      // 2^64 - 2, then positions 0 and 2 of step 1: the second key would be 2^64.
      {Bytes({0xA1, 3, 2, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1, 0, 0x05}),
       "the bitmap's last key would pass 2^64 - 1"},
      {Bytes({0xA1, 1, 0x80}), "count varint"},
      {Bytes({0xA1, 1, 2, 0x80, 0}), "the first key's varint"},
      {Bytes({0xA1, 1, 4, 7, 0}), "claims 4 keys in 5 bytes"},
      {Bytes({0xA1, 1, 2, 7, 0, 9}), "1 bytes after the last key"},
      {Bytes({0xA1, 2, 3, 7, 0, 5}), "passes the count 3"},
      {Bytes({0xA1, 2, 3, 7, 0}), "the repeat varint of key 1"},
      {Bytes({0xA1, 1, 2, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1, 1}),
       "would pass 2^64 - 1"},
      {Bytes({0xA1, 2, 0xE8, 0x07, 0, 0, 0xE6, 0x07}), "over the 100", 100},
  };
  for (const Case& c : cases) {
    Status s = Decode(c.frame, &keys, c.bound);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << c.says;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
    EXPECT_EQ(keys.size(), 1u) << "a refused frame leaves the output as it was";
  }
}

// A bitmap frame says which of first + j * step are keys: the share of one server of a
// request whose keys are one run.
TEST(KeyFrame, ABitmapFrameDecodesToTheKeysOfItsSetBits) {
  const Key first = 5, step = 3;
  const std::vector<uint64_t> positions = {0, 2, 3, 9, 63, 64, 70, 135};
  const uint64_t span = positions.back() + 1;
  SArray<char> frame;
  char* bits = BeginKeyBitmapFrame(positions.size(), first, step, span, &frame);
  ASSERT_EQ(frame.size(), KeyBitmapFrameBytes(positions.size(), first, step, span));
  EXPECT_EQ(frame.data() + frame.size() - bits, static_cast<long>((span + 7) / 8));
  for (uint64_t j : positions) bits[j / 8] = static_cast<char>(bits[j / 8] | (1 << (j % 8)));
  SArray<Key> keys;
  Status s = DecodeKeyFrame(frame.data(), frame.size(), kNoBound, &keys);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(keys.size(), positions.size());
  for (size_t i = 0; i < positions.size(); ++i) EXPECT_EQ(keys[i], first + positions[i] * step);
  EXPECT_EQ(KeyFrameCount(frame.data(), frame.size()), positions.size());
}

TEST(KeyFrame, ABitmapFrameReachesTheLastKeyAndOneKeyTakesOneByteOfBitmap) {
  const Key first = kMaxKey - 1;  // keys kMaxKey - 1 and kMaxKey, step 1
  SArray<char> frame;
  char* bits = BeginKeyBitmapFrame(2, first, 1, 2, &frame);
  bits[0] = 0x03;
  SArray<Key> keys;
  ASSERT_TRUE(DecodeKeyFrame(frame.data(), frame.size(), kNoBound, &keys).ok());
  EXPECT_EQ(std::vector<Key>(keys.begin(), keys.end()), (std::vector<Key>{kMaxKey - 1, kMaxKey}));
  bits = BeginKeyBitmapFrame(1, 42, 7, 1, &frame);
  bits[0] = 0x01;
  ASSERT_TRUE(DecodeKeyFrame(frame.data(), frame.size(), kNoBound, &keys).ok());
  EXPECT_EQ(std::vector<Key>(keys.begin(), keys.end()), (std::vector<Key>{42}));
}

TEST(KeyFrame, ARunsFrameMayClaimManyKeysOnlyUpToTheBound) {
  // Two bytes of runs for a million keys: the bound is what keeps this from allocating.
  std::string frame = Bytes({0xA1, 2, 0xC0, 0x84, 0x3D, 0, 0, 0xBE, 0x84, 0x3D});
  SArray<Key> keys;
  ASSERT_TRUE(Decode(frame, &keys).ok());
  EXPECT_EQ(keys.size(), 1000000u);
  EXPECT_EQ(keys.back(), 999999u);
  EXPECT_FALSE(Decode(frame, &keys, 999999).ok());
}

TEST(KeyFrame, AMessageCarriesTheFrameAndParsesAsItsKeysAfterDecoding) {
  KVPairs<float> in;
  in.keys = SArray<Key>{100, 101, 102, 103, 104, 200};
  in.vals = SArray<float>{1, 2, 3, 4, 5, 6};
  Message msg;
  AppendKVPairs(in, &msg);
  EncodeKeysFrame(&msg);
  EXPECT_TRUE(msg.meta.keys_encoded);
  EXPECT_EQ(msg.meta.data_type[0], DataType::kChar);
  EXPECT_LT(msg.data[0].size(), 6 * sizeof(Key));

  KVPairs<float> out;
  EXPECT_FALSE(ParseKVPairs(msg, true, &out).ok()) << "a key frame is not raw keys";
  ASSERT_TRUE(DecodeKeysFrame(&msg, kNoBound).ok());
  EXPECT_FALSE(msg.meta.keys_encoded);
  ASSERT_TRUE(ParseKVPairs(msg, true, &out).ok());
  EXPECT_EQ(std::vector<Key>(out.keys.begin(), out.keys.end()),
            std::vector<Key>(in.keys.begin(), in.keys.end()));
}

TEST(KeyFrame, KeysThatDoNotShrinkOrAreNotSortedStayRaw) {
  Message msg;
  msg.AddData(SArray<Key>{9, 3});
  EncodeKeysFrame(&msg);
  EXPECT_FALSE(msg.meta.keys_encoded);
  EXPECT_EQ(msg.meta.data_type[0], DataType::kUInt64);
  EXPECT_TRUE(DecodeKeysFrame(&msg, kNoBound).ok()) << "a message without a key frame";
  EXPECT_EQ(SArray<Key>(msg.data[0]).size(), 2u);
}

TEST(KeyFrame, AMessageThatSaysEncodedWithoutAFrameIsRefused) {
  Message msg;
  msg.AddData(SArray<Key>{1, 2, 3});
  msg.meta.keys_encoded = true;
  Status s = DecodeKeysFrame(&msg, kNoBound);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  Message empty;
  empty.meta.keys_encoded = true;
  EXPECT_FALSE(DecodeKeysFrame(&empty, kNoBound).ok());
}

}  // namespace
}  // namespace ps
