// KeyListStore (ps/internal/key_list_store.h): the key lists a server keeps for key
// caching, bounded, least recently used out, per sending worker.
#include "ps/internal/key_list_store.h"

#include <gtest/gtest.h>

#include <vector>

namespace ps {
namespace {

using ListId = KeyListStore::ListId;

SArray<Key> Keys(size_t n, Key first = 0) {
  SArray<Key> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = first + i;
  return keys;
}

size_t Cost(size_t n) { return n * sizeof(Key) + KeyListStore::kEntryBytes; }

TEST(KeyListStore, AKeptListIsFoundOnlyByItsSenderCustomerIncarnationAndId) {
  KeyListStore store(size_t{1} << 20);
  const ListId id{9, 77, 0, 1};
  store.Put(id, Keys(10, 100));
  SArray<Key> got;
  ASSERT_TRUE(store.Find(id, &got));
  EXPECT_EQ(got.size(), 10u);
  EXPECT_EQ(got[9], 109u);
  for (const ListId& other : {ListId{11, 77, 0, 1}, ListId{9, 78, 0, 1}, ListId{9, 77, 1, 1},
                              ListId{9, 77, 0, 2}}) {
    EXPECT_FALSE(store.Find(other, &got));
  }
}

TEST(KeyListStore, TheLeastRecentlyUsedListsGoFirstAndEachListCountsItsEntry) {
  KeyListStore store(3 * Cost(100));
  for (uint64_t i = 1; i <= 3; ++i) store.Put(ListId{9, 1, 0, i}, Keys(100));
  EXPECT_EQ(store.bytes(), 3 * Cost(100));
  SArray<Key> got;
  ASSERT_TRUE(store.Find(ListId{9, 1, 0, 1}, &got));  // 1 is now the most recent
  store.Put(ListId{9, 1, 0, 4}, Keys(100));           // 2 goes
  EXPECT_TRUE(store.Find(ListId{9, 1, 0, 1}, &got));
  EXPECT_FALSE(store.Find(ListId{9, 1, 0, 2}, &got));
  EXPECT_TRUE(store.Find(ListId{9, 1, 0, 3}, &got));
  EXPECT_TRUE(store.Find(ListId{9, 1, 0, 4}, &got));
  EXPECT_EQ(store.lists(), 3u);
  EXPECT_LE(store.bytes(), 3 * Cost(100));
}

TEST(KeyListStore, ShortListsListsOverTheBoundAndAZeroBoundKeepNothing) {
  KeyListStore store(Cost(50));
  SArray<Key> got;
  store.Put(ListId{9, 1, 0, 1}, Keys(KeyListStore::kMinKeys - 1));
  store.Put(ListId{9, 1, 0, 2}, Keys(51));
  EXPECT_FALSE(store.Find(ListId{9, 1, 0, 1}, &got));
  EXPECT_FALSE(store.Find(ListId{9, 1, 0, 2}, &got));
  // Many empty lists under new ids cannot grow the store past its bound.
  for (uint64_t i = 10; i < 10000; ++i) store.Put(ListId{9, 1, 0, i}, SArray<Key>());
  EXPECT_EQ(store.lists(), 0u);
  KeyListStore none(0);
  none.Put(ListId{9, 1, 0, 1}, Keys(10));
  EXPECT_FALSE(none.Find(ListId{9, 1, 0, 1}, &got));
}

TEST(KeyListStore, ShortListsAreCopiedLongOnesShared) {
  KeyListStore store(size_t{4} << 20);
  const SArray<Key> small = Keys(10), large = Keys(KeyListStore::kCopyBelowBytes / 8);
  store.Put(ListId{9, 1, 0, 1}, small);
  store.Put(ListId{9, 1, 0, 2}, large);
  SArray<Key> got;
  ASSERT_TRUE(store.Find(ListId{9, 1, 0, 1}, &got));
  EXPECT_NE(got.data(), small.data());
  EXPECT_EQ(got[3], 3u);
  ASSERT_TRUE(store.Find(ListId{9, 1, 0, 2}, &got));
  EXPECT_EQ(got.data(), large.data());
}

TEST(KeyListStore, PuttingAnIdAgainReplacesItsList) {
  KeyListStore store(size_t{1} << 20);
  store.Put(ListId{9, 1, 0, 1}, Keys(10, 0));
  store.Put(ListId{9, 1, 0, 1}, Keys(20, 500));
  SArray<Key> got;
  ASSERT_TRUE(store.Find(ListId{9, 1, 0, 1}, &got));
  EXPECT_EQ(got.size(), 20u);
  EXPECT_EQ(got[0], 500u);
  EXPECT_EQ(store.lists(), 1u);
  EXPECT_EQ(store.bytes(), Cost(20));
}

}  // namespace
}  // namespace ps
