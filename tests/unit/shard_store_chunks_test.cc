// ShardStore's chunks (server/shard_store.h): a chunk of a key stored in chunks is kept
// apart from the key's other chunks and from a whole value of the key; the two never
// mix, and a chunk's layout must match what it was created with.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "ps/optimizer.h"
#include "shard_store.h"

namespace ps {
namespace {

class ChunksTest : public ::testing::Test {
 protected:
  ChunksTest() {
    OptimizerOptions options;
    options.kind = OptimizerKind::kSgd;
    options.lr = 1.0;
    optimizer_ = Optimizer::Create(options);
    ValueInit init;
    init.kind = ValueInit::kUniform;
    init.seed = 5;
    store_ = std::make_unique<ShardStore>(optimizer_.get(), init);
  }
  static StoreKey Chunk(Key key, int32_t c, uint64_t offset, uint64_t whole) {
    return StoreKey{key, c, offset, whole};
  }
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ShardStore> store_;
};

TEST_F(ChunksTest, ChunksOfOneKeyAreSeparateSlots) {
  ShardStore::Slot a, b;
  ASSERT_TRUE(store_->Find(Chunk(7, 0, 0, 10), 4, 4, &a).ok());
  ASSERT_TRUE(store_->Find(Chunk(7, 2, 8, 10), 2, 2, &b).ok());
  ASSERT_NE(a.values, b.values);
  a.values[0] = 1.0f;
  b.values[0] = 2.0f;
  ShardStore::Slot again;
  ASSERT_TRUE(store_->Find(Chunk(7, 0, 0, 10), 4, 4, &again).ok());
  EXPECT_EQ(again.values[0], 1.0f);
  EXPECT_EQ(store_->num_keys(), 2u);
}

TEST_F(ChunksTest, AChunkStartsWithTheValuesTheWholeKeyWouldHave) {
  // Initial values depend on (key, position), not on how the key is stored.
  std::vector<float> whole(10);
  ValueInit init;
  init.kind = ValueInit::kUniform;
  init.seed = 5;
  init.Fill(7, whole.data(), whole.size());
  ShardStore::Slot chunk;
  ASSERT_TRUE(store_->Find(Chunk(7, 1, 4, 10), 4, 4, &chunk).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(chunk.values[i], whole[4 + i]) << i;
}

TEST_F(ChunksTest, WholeAndChunkedNeverMix) {
  ShardStore::Slot slot;
  ASSERT_TRUE(store_->Find(Chunk(7, 0, 0, 10), 4, 4, &slot).ok());
  // A whole-key request of a key stored in chunks: refused, nothing created.
  Status s = store_->Find(7, 0, 1, &slot);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("stored in chunks"), std::string::npos) << s;
  EXPECT_EQ(store_->num_keys(), 1u);
  // And chunk 0 of a key stored whole.
  ASSERT_TRUE(store_->Find(9, 3, 3, &slot).ok());
  s = store_->Find(Chunk(9, 0, 0, 10), 4, 4, &slot);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("whole value"), std::string::npos) << s;
}

TEST_F(ChunksTest, AChunkWithAnotherLayoutIsRefused) {
  ShardStore::Slot slot;
  ASSERT_TRUE(store_->Find(Chunk(7, 1, 4, 10), 4, 4, &slot).ok());
  EXPECT_FALSE(store_->Find(Chunk(7, 1, 4, 12), 4, 4, &slot).ok());  // the key grew
  EXPECT_FALSE(store_->Find(Chunk(7, 1, 5, 10), 4, 4, &slot).ok());  // chunk size changed
  EXPECT_FALSE(store_->Find(Chunk(7, 1, 4, 10), 3, 3, &slot).ok());
}

TEST_F(ChunksTest, RoundsAndSnapshotsKeepChunksApart) {
  std::vector<float> g = {1, 2};
  ASSERT_TRUE(store_->Aggregate(Chunk(7, 1, 2, 4), g.data(), 2, 0).ok());
  ASSERT_TRUE(store_->Aggregate(Chunk(7, 0, 0, 4), g.data(), 2, 0).ok());
  store_->CloseRounds(1);
  std::vector<CheckpointRecord> records;
  store_->Snapshot(&records);
  ASSERT_EQ(records.size(), 2u);
  for (const CheckpointRecord& r : records) {
    EXPECT_EQ(r.key, 7u);
    EXPECT_EQ(r.steps, 1);
    EXPECT_EQ(r.value_len, 4u);
    EXPECT_EQ(r.chunk_offset, static_cast<uint64_t>(r.chunk) * 2);
  }
  // Restored into a fresh store, each chunk comes back as itself.
  ShardStore fresh(optimizer_.get(), ValueInit());
  for (const CheckpointRecord& r : records) ASSERT_TRUE(fresh.Restore(r).ok());
  ShardStore::Slot slot;
  ASSERT_TRUE(fresh.Find(Chunk(7, 1, 2, 4), 2, 2, &slot).ok());
  EXPECT_EQ(*slot.steps, 1u);
  EXPECT_EQ(fresh.num_keys(), 2u);
}

TEST_F(ChunksTest, DroppingKeysAServerNoLongerHoldsTakesChunksOneByOne) {
  // A ring change erases the keys and chunks a server no longer holds: each chunk of a
  // key is placed on its own, so one chunk goes and the key's others stay.
  ShardStore::Slot slot;
  ASSERT_TRUE(store_->Find(Chunk(7, 0, 0, 10), 4, 4, &slot).ok());
  ASSERT_TRUE(store_->Find(Chunk(7, 1, 4, 10), 4, 4, &slot).ok());
  ASSERT_TRUE(store_->Find(Chunk(7, 2, 8, 10), 2, 2, &slot).ok());
  ASSERT_TRUE(store_->Find(9, 3, 3, &slot).ok());
  std::vector<float> g = {1, 1, 1, 1};
  ASSERT_TRUE(store_->Aggregate(Chunk(7, 1, 4, 10), g.data(), 4, 0).ok());
  const size_t dropped = store_->DropKeys(
      [](const StoreKey& key) { return key.chunk == 1 || (key.chunk < 0 && key.key == 9); });
  EXPECT_EQ(dropped, 2u);
  EXPECT_EQ(store_->num_keys(), 2u);
  EXPECT_EQ(store_->open_round_entries(), 0u);  // the dropped chunk's round went with it
  std::vector<CheckpointRecord> left;
  store_->Snapshot(&left);
  std::vector<int32_t> chunks;
  for (const CheckpointRecord& r : left) {
    EXPECT_EQ(r.key, 7u);
    chunks.push_back(r.chunk);
  }
  std::sort(chunks.begin(), chunks.end());
  EXPECT_EQ(chunks, (std::vector<int32_t>{0, 2}));
}

}  // namespace
}  // namespace ps
