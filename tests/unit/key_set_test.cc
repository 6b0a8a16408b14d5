// KeySet (ps/key_set.h): a request's keys from arbitrary ids, and each id's position.
#include "ps/key_set.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

namespace ps {
namespace {

TEST(KeySet, KeysAreTheDistinctIdsAscendingAndEachIdKnowsItsPosition) {
  const std::vector<Key> ids = {42, 7, 42, 1000000000000ULL, 7, 0, 42};
  KeySet set(ids);
  ASSERT_EQ(set.size(), 4u);
  EXPECT_EQ(std::vector<Key>(set.keys().begin(), set.keys().end()),
            (std::vector<Key>{0, 7, 42, 1000000000000ULL}));
  ASSERT_EQ(set.num_ids(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(set.keys()[set.position(i)], ids[i]) << "id " << i;
  }
  EXPECT_EQ(set.Find(42), 2);
  EXPECT_EQ(set.Find(8), -1);
  EXPECT_EQ(set.Find(2000000000000ULL), -1);
}

TEST(KeySet, AgreesWithAPlainSetOnRandomIds) {
  std::mt19937_64 gen(5);
  std::vector<Key> ids(5000);
  for (Key& id : ids) id = gen() % 1500;
  KeySet set(ids.data(), ids.size());
  std::set<Key> plain(ids.begin(), ids.end());
  ASSERT_EQ(set.size(), plain.size());
  size_t at = 0;
  for (Key k : plain) {
    EXPECT_EQ(set.keys()[at], k);
    EXPECT_EQ(set.Find(k), static_cast<int64_t>(at));
    ++at;
  }
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(set.keys()[set.position(i)], ids[i]);
}

TEST(KeySet, NoIdsGiveNoKeys) {
  KeySet set(std::vector<Key>{});
  EXPECT_EQ(set.size(), 0u);
  EXPECT_EQ(set.num_ids(), 0u);
  EXPECT_EQ(set.Find(1), -1);
}

}  // namespace
}  // namespace ps
