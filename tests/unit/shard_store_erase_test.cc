// ShardStore (server/shard_store.h) with erasable keys: one-value keys inline in the
// key table, longer keys and chunks in the arena. An erased key comes back as one never
// seen, its memory is reused, its pending rounds go with it; step counts saturate; a
// snapshot restores exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "ps/optimizer.h"
#include "shard_store.h"

namespace ps {
namespace {

class EraseTest : public ::testing::Test {
 protected:
  EraseTest() {
    OptimizerOptions options;
    options.kind = OptimizerKind::kAdam;
    options.lr = 0.1;
    optimizer_ = Optimizer::Create(options);
    init_.kind = ValueInit::kUniform;
    init_.seed = 11;
    store_ = std::make_unique<ShardStore>(optimizer_.get(), init_);
  }
  // What a never-seen key of `len` values holds.
  std::vector<float> Initial(Key key, uint32_t len) const {
    std::vector<float> v(len);
    init_.Fill(key, v.data(), len);
    return v;
  }
  // Creates the key if needed and applies `steps` Adam steps with gradient g.
  ShardStore::Slot Train(const StoreKey& key, uint32_t len, int steps, float g = 0.5f) {
    ShardStore::Slot slot;
    EXPECT_TRUE(store_->Find(key, len, len, &slot).ok());
    std::vector<float> grad(len, g);
    for (int i = 0; i < steps; ++i) {
      optimizer_->Update(slot.values, slot.state(), grad.data(), len, slot.NextStep());
    }
    return slot;
  }
  static std::vector<float> Values(const ShardStore::Slot& s) {
    return std::vector<float>(s.values, s.values + s.len);
  }
  static std::vector<float> State(const ShardStore::Slot& s, size_t width) {
    return std::vector<float>(s.state(), s.state() + s.len * width);
  }

  std::unique_ptr<Optimizer> optimizer_;
  ValueInit init_;
  std::unique_ptr<ShardStore> store_;
};

TEST_F(EraseTest, AnErasedKeyComesBackAsANeverSeenKey) {
  for (uint32_t len : {1u, 5u}) {
    Key key = 100 + len;
    ShardStore::Slot trained = Train(StoreKey{key}, len, 3);
    EXPECT_EQ(*trained.steps, 3u);
    EXPECT_NE(Values(trained), Initial(key, len));
    ASSERT_TRUE(store_->Erase(StoreKey{key}).ok());
    EXPECT_EQ(store_->num_keys(), 0u);
    ShardStore::Slot fresh;
    ASSERT_TRUE(store_->Find(key, 0, len, &fresh).ok());
    EXPECT_EQ(fresh.len, len);
    EXPECT_EQ(Values(fresh), Initial(key, len)) << len;
    EXPECT_EQ(State(fresh, 2), std::vector<float>(2 * len, 0.0f)) << len;
    EXPECT_EQ(*fresh.steps, 0u) << "Adam's step count restarts";
    ASSERT_TRUE(store_->Erase(StoreKey{key}).ok());
  }
}

TEST_F(EraseTest, ErasingAnAbsentKeyDoesNothing) {
  Train(StoreKey{1}, 1, 1);
  EXPECT_TRUE(store_->Erase(StoreKey{2}).ok());
  EXPECT_TRUE(store_->Erase(StoreKey{2, 3, 3000, 5000}).ok());
  EXPECT_EQ(store_->num_keys(), 1u);
}

TEST_F(EraseTest, AWideKeysArrayAndSlotAreReused) {
  ShardStore::Slot first = Train(StoreKey{7}, 4, 1);
  float* array = first.values;
  size_t arena = store_->arena_bytes(), payload = store_->payload_bytes();
  EXPECT_EQ(payload, sizeof(float) * 4 * 3);
  ASSERT_TRUE(store_->Erase(StoreKey{7}).ok());
  EXPECT_EQ(store_->payload_bytes(), 0u);
  ShardStore::Slot other;
  ASSERT_TRUE(store_->Find(8, 0, 4, &other).ok());
  EXPECT_EQ(other.values, array) << "the erased key's array, of the same length";
  EXPECT_EQ(*other.steps, 0u);
  EXPECT_EQ(Values(other), Initial(8, 4));
  EXPECT_EQ(store_->arena_bytes(), arena);
  EXPECT_EQ(store_->payload_bytes(), payload);
}

TEST_F(EraseTest, ReinsertingErasedKeysReusesTheirMemory) {
  const Key n = 300000;
  for (Key k = 0; k < n; ++k) Train(StoreKey{k}, k % 100 ? 1 : 3, 1);
  size_t table = store_->table_bytes(), arena = store_->arena_bytes();
  size_t payload = store_->payload_bytes();
  EXPECT_EQ(payload, sizeof(float) * 3 * (n - n / 100 + 3 * (n / 100)));
  for (int round = 0; round < 3; ++round) {
    for (Key k = 0; k < n; ++k) ASSERT_TRUE(store_->Erase(StoreKey{k}).ok());
    EXPECT_EQ(store_->num_keys(), 0u);
    EXPECT_LT(store_->table_bytes(), table / 20) << "segments shrink as they empty";
    for (Key k = 0; k < n; ++k) Train(StoreKey{k}, k % 100 ? 1 : 3, 1);
    EXPECT_LE(store_->table_bytes(), table * 9 / 8);
    EXPECT_EQ(store_->arena_bytes(), arena) << "wide keys reuse the freed arrays";
    EXPECT_EQ(store_->payload_bytes(), payload);
  }
}

TEST_F(EraseTest, ErasingAKeyDropsItsPendingRoundsOnly) {
  std::vector<float> g = {1.0f};
  ASSERT_TRUE(store_->Aggregate(StoreKey{1}, g.data(), 1, 0).ok());
  ASSERT_TRUE(store_->Aggregate(StoreKey{1}, g.data(), 1, 1).ok());
  ASSERT_TRUE(store_->Aggregate(StoreKey{2}, g.data(), 1, 0).ok());
  EXPECT_EQ(store_->open_round_entries(), 3u);
  ASSERT_TRUE(store_->Erase(StoreKey{1}).ok());
  EXPECT_EQ(store_->open_round_entries(), 1u);
  store_->CloseRounds(2);
  EXPECT_EQ(store_->num_keys(), 1u) << "closing the rounds does not bring key 1 back";
  ShardStore::Slot two;
  ASSERT_TRUE(store_->Find(2, 0, 0, &two).ok());
  EXPECT_EQ(*two.steps, 1u);
}

TEST_F(EraseTest, ChunksAreErasedOneByOneAndNeverMixWithWholeKeys) {
  const StoreKey c0{9, 0, 0, 6}, c1{9, 1, 3, 6};
  Train(c0, 3, 2);
  Train(c1, 3, 2);
  // A whole-key erase of a chunked key would leave its chunks on other servers.
  Status s = store_->Erase(StoreKey{9});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("stored in chunks"), std::string::npos) << s;
  EXPECT_EQ(store_->num_keys(), 2u);
  ASSERT_TRUE(store_->Erase(c1).ok());
  EXPECT_EQ(store_->num_keys(), 1u);
  ShardStore::Slot fresh;
  ASSERT_TRUE(store_->Find(c1, 3, 3, &fresh).ok());
  std::vector<float> whole = Initial(9, 6);
  EXPECT_EQ(Values(fresh), std::vector<float>(whole.begin() + 3, whole.end()));
  EXPECT_EQ(*fresh.steps, 0u);
  ASSERT_TRUE(store_->Erase(c0).ok());
  ASSERT_TRUE(store_->Erase(c1).ok());
  EXPECT_EQ(store_->num_keys(), 0u);
  EXPECT_EQ(store_->payload_bytes(), 0u);
  // And chunk 0 of a key stored whole.
  Train(StoreKey{10}, 2, 1);
  s = store_->Erase(StoreKey{10, 0, 0, 6});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("whole value"), std::string::npos) << s;
  EXPECT_EQ(store_->num_keys(), 1u);
}

TEST_F(EraseTest, StepCountsStopAtTheMaximum) {
  ShardStore::Slot slot = Train(StoreKey{3}, 1, 1);
  *slot.steps = kMaxSteps - 1;
  EXPECT_EQ(slot.NextStep(), static_cast<int64_t>(kMaxSteps));
  EXPECT_EQ(slot.NextStep(), static_cast<int64_t>(kMaxSteps));
  EXPECT_EQ(*slot.steps, kMaxSteps);
  // Adam at the saturated count is Adam with bias corrections of 1, as at any count
  // that large: the same update as at step 2^40.
  std::vector<float> w = {0.3f}, state = {0.01f, 0.02f}, g = {0.5f};
  std::vector<float> w2 = w, state2 = state;
  optimizer_->Update(w.data(), state.data(), g.data(), 1, slot.NextStep());
  optimizer_->Update(w2.data(), state2.data(), g.data(), 1, int64_t{1} << 40);
  EXPECT_EQ(w, w2);
  EXPECT_EQ(state, state2);
}

TEST_F(EraseTest, RestoreClampsStepCountsToThirtyTwoBits) {
  CheckpointRecord r;
  r.key = 4;
  r.values = {1.0f};
  r.state = {0.5f, 0.25f};
  r.steps = int64_t{1} << 40;
  ASSERT_TRUE(store_->Restore(r).ok());
  ShardStore::Slot slot;
  ASSERT_TRUE(store_->Find(4, 0, 0, &slot).ok());
  EXPECT_EQ(*slot.steps, kMaxSteps);
  r.steps = -5;
  ASSERT_TRUE(store_->Restore(r).ok());
  EXPECT_EQ(*slot.steps, 0u);
}

TEST_F(EraseTest, ASnapshotRestoresExactlyAfterErases) {
  // One-value keys (the reserved table key among them), wide keys and chunks, with some
  // erased and some recreated.
  const Key keys[] = {0, 1, 2, 77, KeyTable::kAsideKey, ~Key{0}};
  int steps = 0;
  for (Key k : keys) {
    ++steps;
    Train(StoreKey{k}, 1, steps, 0.1f * steps);
  }
  Train(StoreKey{500}, 4, 3);
  Train(StoreKey{501}, 2, 5);
  Train(StoreKey{600, 0, 0, 5}, 3, 2);
  Train(StoreKey{600, 1, 3, 5}, 2, 4);
  ASSERT_TRUE(store_->Erase(StoreKey{2}).ok());
  ASSERT_TRUE(store_->Erase(StoreKey{501}).ok());
  ASSERT_TRUE(store_->Erase(StoreKey{KeyTable::kAsideKey}).ok());
  Train(StoreKey{KeyTable::kAsideKey}, 1, 2);
  Train(StoreKey{502}, 4, 1);
  std::vector<CheckpointRecord> saved;
  store_->Snapshot(&saved);
  ASSERT_EQ(saved.size(), store_->num_keys());
  ASSERT_EQ(saved.size(), 9u);

  ShardStore fresh(optimizer_.get(), ValueInit());
  for (const CheckpointRecord& r : saved) ASSERT_TRUE(fresh.Restore(r).ok());
  std::vector<CheckpointRecord> again;
  fresh.Snapshot(&again);
  ASSERT_EQ(again.size(), saved.size());
  auto order = [](const CheckpointRecord& a, const CheckpointRecord& b) {
    return a.key != b.key ? a.key < b.key : a.chunk < b.chunk;
  };
  std::sort(saved.begin(), saved.end(), order);
  std::sort(again.begin(), again.end(), order);
  for (size_t r = 0; r < saved.size(); ++r) {
    EXPECT_EQ(again[r].key, saved[r].key);
    EXPECT_EQ(again[r].chunk, saved[r].chunk);
    EXPECT_EQ(again[r].chunk_offset, saved[r].chunk_offset);
    EXPECT_EQ(again[r].value_len, saved[r].value_len);
    EXPECT_EQ(again[r].steps, saved[r].steps);
    EXPECT_EQ(again[r].values, saved[r].values) << saved[r].key;
    EXPECT_EQ(again[r].state, saved[r].state) << saved[r].key;
  }
  EXPECT_EQ(fresh.payload_bytes(), store_->payload_bytes());
}

}  // namespace
}  // namespace ps
