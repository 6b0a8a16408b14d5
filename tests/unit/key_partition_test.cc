// Splitting a request over servers (ps/internal/key_partition.h): PartitionKeys,
// SelectKVPairs, ValueOffsets and ValidateKVPairsShape; FirstUnsortedKey
// (ps/internal/key_order.h).
#include "ps/internal/key_partition.h"
#include "ps/internal/key_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace ps {
namespace {

constexpr int kServers = 3;

// n distinct keys, sorted ascending, scattered over the whole key space.
std::vector<Key> SortedKeys(size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<Key> keys;
  while (keys.size() < n) {
    for (size_t i = keys.size(); i < n; ++i) keys.push_back(rng());
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  }
  return keys;
}

bool Contains(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST(PartitionKeys, EveryPositionGoesToItsRingOwnerExactlyOnceInRequestOrder) {
  ConsistentHashRing ring(kServers, 128);
  std::vector<Key> keys = SortedKeys(10000, 1);
  KeyPartition part = PartitionKeys(ring, kServers, keys.data(), keys.size());
  ASSERT_EQ(part.positions.size(), static_cast<size_t>(kServers));
  std::vector<int> seen(keys.size(), 0);
  for (int server = 0; server < kServers; ++server) {
    const auto& pos = part.positions[server];
    EXPECT_FALSE(pos.empty()) << "server " << server << " got no keys";
    for (size_t i = 0; i < pos.size(); ++i) {
      ASSERT_LT(pos[i], keys.size());
      EXPECT_EQ(ring.ServerOf(keys[pos[i]]), server);
      if (i > 0) {
        EXPECT_LT(pos[i - 1], pos[i]);
      }
      ++seen[pos[i]];
    }
  }
  for (size_t p = 0; p < keys.size(); ++p) ASSERT_EQ(seen[p], 1) << "position " << p;
}

TEST(PartitionKeys, NoKeysGiveOneEmptyPartPerServer) {
  ConsistentHashRing ring(kServers, 128);
  KeyPartition part = PartitionKeys(ring, kServers, nullptr, 0);
  ASSERT_EQ(part.positions.size(), static_cast<size_t>(kServers));
  for (const auto& pos : part.positions) EXPECT_TRUE(pos.empty());
}

TEST(ValueOffsets, AreThePrefixSumsOfLens) {
  const int lens[] = {3, 0, 2, 1};
  EXPECT_EQ(ValueOffsets(lens, 4), (std::vector<size_t>{0, 3, 3, 5, 6}));
  EXPECT_EQ(ValueOffsets(nullptr, 0), (std::vector<size_t>{0}));
}

// Splits `kvs` over the ring's servers, checks each part against the request, and
// returns the values put back together by position.
std::vector<float> SplitAndReassemble(const KVPairs<float>& kvs, size_t width) {
  ConsistentHashRing ring(kServers, 128);
  KeyPartition partition = PartitionKeys(ring, kServers, kvs.keys.data(), kvs.keys.size());
  std::vector<size_t> offsets;
  if (!kvs.lens.empty()) offsets = ValueOffsets(kvs.lens.data(), kvs.lens.size());
  std::vector<std::vector<float>> by_position(kvs.keys.size());
  for (const auto& pos : partition.positions) {
    KVPairs<float> part = SelectKVPairs(kvs, pos, offsets, width);
    EXPECT_EQ(part.priority, kvs.priority);
    EXPECT_EQ(part.keys.size(), pos.size());
    EXPECT_EQ(part.lens.size(), kvs.lens.empty() ? 0 : pos.size());
    size_t at = 0;
    for (size_t i = 0; i < pos.size(); ++i) {
      EXPECT_EQ(part.keys[i], kvs.keys[pos[i]]);
      size_t len = offsets.empty() ? width : static_cast<size_t>(part.lens[i]);
      if (!offsets.empty()) {
        EXPECT_EQ(part.lens[i], kvs.lens[pos[i]]);
      }
      if (at + len > part.vals.size()) {
        ADD_FAILURE() << "part has fewer values than its keys need";
        return {};
      }
      by_position[pos[i]].assign(part.vals.begin() + at, part.vals.begin() + at + len);
      at += len;
    }
    EXPECT_EQ(at, part.vals.size()) << "part has values that belong to no key";
  }
  std::vector<float> joined;
  for (const auto& v : by_position) joined.insert(joined.end(), v.begin(), v.end());
  return joined;
}

TEST(SelectKVPairs, UniformWidthValuesTravelWithTheirKeys) {
  const size_t kWidth = 3;
  KVPairs<float> kvs;
  kvs.priority = 5;
  kvs.keys = SArray<Key>(SortedKeys(2000, 2));
  for (size_t i = 0; i < kvs.keys.size() * kWidth; ++i) kvs.vals.push_back(i * 0.5f);
  std::vector<float> joined = SplitAndReassemble(kvs, kWidth);
  EXPECT_EQ(joined, std::vector<float>(kvs.vals.begin(), kvs.vals.end()));
}

TEST(SelectKVPairs, VariableLengthValuesTravelWithTheirKeys) {
  KVPairs<float> kvs;
  kvs.keys = SArray<Key>(SortedKeys(2000, 3));
  for (size_t i = 0; i < kvs.keys.size(); ++i) {
    int len = static_cast<int>(i % 4);  // includes keys with no values
    kvs.lens.push_back(len);
    for (int j = 0; j < len; ++j) kvs.vals.push_back(static_cast<float>(i * 10 + j));
  }
  std::vector<float> joined = SplitAndReassemble(kvs, 0);
  EXPECT_EQ(joined, std::vector<float>(kvs.vals.begin(), kvs.vals.end()));
}

TEST(SelectKVPairs, PullWithoutValuesSelectsOnlyTheKeys) {
  KVPairs<float> kvs;
  kvs.keys = SArray<Key>{10, 20, 30, 40};
  KVPairs<float> part = SelectKVPairs(kvs, {1, 3}, {}, 2);
  EXPECT_EQ(std::vector<Key>(part.keys.begin(), part.keys.end()), (std::vector<Key>{20, 40}));
  EXPECT_TRUE(part.vals.empty());
  EXPECT_TRUE(part.lens.empty());
}

TEST(SelectKVPairs, PartIsACopyThatDoesNotShareTheRequestsBuffers) {
  KVPairs<float> kvs;
  kvs.keys = SArray<Key>{1, 2};
  kvs.vals = SArray<float>{1.f, 2.f};
  KVPairs<float> part = SelectKVPairs(kvs, {0, 1}, {}, 1);
  EXPECT_NE(part.keys.data(), kvs.keys.data());
  EXPECT_NE(part.vals.data(), kvs.vals.data());
  part.vals[0] = 99.f;
  EXPECT_EQ(kvs.vals[0], 1.f);
}

Status Validate(const std::vector<Key>& keys, size_t num_vals, const std::vector<int>& lens,
                bool need_vals = true) {
  return ValidateKVPairsShape("Push", keys.data(), keys.size(), num_vals, lens.data(),
                              lens.size(), need_vals);
}

TEST(ValidateKVPairsShape, AcceptsSortedKeysWithTheSameNumberOfValuesEach) {
  EXPECT_TRUE(Validate({1, 5, 9}, 3, {}).ok());
  EXPECT_TRUE(Validate({1, 5, 9}, 12, {}).ok());
  EXPECT_TRUE(Validate({7}, 1, {}).ok());
  EXPECT_TRUE(Validate({}, 0, {}).ok());
}

TEST(ValidateKVPairsShape, AcceptsLensThatAddUpToTheValues) {
  EXPECT_TRUE(Validate({1, 5, 9}, 6, {2, 1, 3}).ok());
  EXPECT_TRUE(Validate({1, 5}, 2, {1, 1}).ok());
}

TEST(ValidateKVPairsShape, RejectsAPushedKeyWithoutValues) {
  Status s = Validate({1, 5, 9}, 5, {2, 0, 3});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "lens[1] is 0")) << s;
  s = Validate({1, 5}, 0, {});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "no values")) << s;
}

TEST(ValidateKVPairsShape, AcceptsAPullWhoseValuesAreTheOutput) {
  // A pull's vals and lens are where the answer goes: their shape is not checked.
  EXPECT_TRUE(Validate({1, 5, 9}, 0, {}, /*need_vals=*/false).ok());
  EXPECT_TRUE(Validate({1, 5, 9}, 7, {1}, /*need_vals=*/false).ok());
}

TEST(ValidateKVPairsShape, RejectsUnsortedKeysNamingTheCallAndTheKeys) {
  Status s = Validate({1, 9, 5}, 3, {});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "Push")) << s;
  EXPECT_TRUE(Contains(s, "sorted")) << s;
  EXPECT_TRUE(Contains(s, "key[1]=9")) << s;
  EXPECT_TRUE(Contains(s, "key[2]=5")) << s;
}

TEST(ValidateKVPairsShape, RejectsDuplicateKeys) {
  Status s = Validate({1, 5, 5}, 3, {});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "duplicates")) << s;
}

TEST(ValidateKVPairsShape, RejectsUnsortedKeysOfAPullToo) {
  Status s = Validate({2, 1}, 0, {}, /*need_vals=*/false);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "sorted")) << s;
}

TEST(ValidateKVPairsShape, RejectsALensCountOtherThanOnePerKey) {
  Status s = Validate({1, 5, 9}, 3, {1, 2});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "2 lens for 3 keys")) << s;
}

TEST(ValidateKVPairsShape, RejectsLensThatDoNotAddUpToTheValues) {
  Status s = Validate({1, 5, 9}, 7, {2, 2, 2});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "add up to 6")) << s;
  EXPECT_TRUE(Contains(s, "7")) << s;
}

TEST(ValidateKVPairsShape, RejectsNegativeLens) {
  Status s = Validate({1, 5, 9}, 2, {2, -1, 1});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "lens[1] is -1")) << s;
}

TEST(ValidateKVPairsShape, RejectsValuesThatDoNotDivideEvenlyOverTheKeys) {
  Status s = Validate({1, 5, 9}, 7, {});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "divide")) << s;
  EXPECT_TRUE(Contains(s, "lens")) << s;  // says what to do instead
}

TEST(ValidateKVPairsShape, RejectsValuesWithoutKeys) {
  Status s = Validate({}, 4, {});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "values without keys")) << s;
}

TEST(FirstUnsortedKey, FindsTheFirstFaultInEveryBlockPosition) {
  const std::vector<Key> empty;
  EXPECT_EQ(FirstUnsortedKey(empty.data(), 0), 0u);
  const Key one = 5;
  EXPECT_EQ(FirstUnsortedKey(&one, 1), 1u);
  std::vector<Key> keys = SortedKeys(5000, 3);
  EXPECT_EQ(FirstUnsortedKey(keys.data(), keys.size()), keys.size());
  // A repeat or a step down at each place, across the 1024-key blocks' edges.
  for (size_t at : {size_t{1}, size_t{2}, size_t{1023}, size_t{1024}, size_t{1025},
                    size_t{2048}, size_t{4999}}) {
    std::vector<Key> repeat = keys;
    repeat[at] = repeat[at - 1];
    EXPECT_EQ(FirstUnsortedKey(repeat.data(), repeat.size()), at) << "repeat at " << at;
    std::vector<Key> down = keys;
    down[at] = down[at - 1] - 1;
    EXPECT_EQ(FirstUnsortedKey(down.data(), down.size()), at) << "step down at " << at;
    if (at + 1 < keys.size()) {
      down[at + 1] = 0;  // a second fault later: the first is reported
      EXPECT_EQ(FirstUnsortedKey(down.data(), down.size()), at);
    }
  }
}

}  // namespace
}  // namespace ps
