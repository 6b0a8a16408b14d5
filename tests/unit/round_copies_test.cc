// Round copies (PS_REPLICATE_ROUNDS): the rounds an owner's shard closes, as its replica
// takes them. The store hands out each round it applies (ShardStore::CloseRounds) and a
// replica applying them (ApplyRound) ends bit for bit where the owner did; the wire
// format (server/round_copies.h) gives back every round, keys ascending per message;
// held keys (a dead owner's, whose rounds are rebuilt from the pushes workers send
// again) take pushes of clocks closed already and apply them only at ReleaseHolds, in
// clock order, after the requests parked on them wait.
#include "round_copies.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ps/optimizer.h"
#include "shard_store.h"

namespace ps {
namespace {

class RoundCopiesTest : public ::testing::Test {
 protected:
  RoundCopiesTest() {
    OptimizerOptions options;
    options.kind = OptimizerKind::kAdam;
    options.lr = 0.1;
    optimizer_ = Optimizer::Create(options);
    owner_ = std::make_unique<ShardStore>(optimizer_.get(), ValueInit());
    replica_ = std::make_unique<ShardStore>(optimizer_.get(), ValueInit());
  }
  Status Push(ShardStore* store, const StoreKey& key, std::vector<float> g, int64_t clock) {
    return store->Aggregate(key, g.data(), static_cast<uint32_t>(g.size()), clock);
  }
  std::vector<float> Record(ShardStore* store, const StoreKey& key) {
    ShardStore::Slot slot;
    EXPECT_TRUE(store->Find(key, 0, 0, &slot).ok()) << key.Name();
    // The values and the optimizer's state behind them.
    return std::vector<float>(slot.values, slot.values + slot.len * (1 + optimizer_->StateWidth()));
  }

  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ShardStore> owner_, replica_;
};

TEST_F(RoundCopiesTest, AReplicaApplyingTheClosedRoundsEndsBitForBitWhereTheOwnerDid) {
  const StoreKey a{3}, b{9};
  for (int64_t clock = 0; clock < 6; ++clock) {
    ASSERT_TRUE(Push(owner_.get(), a, {0.1f * clock, -0.3f}, clock).ok());
    ASSERT_TRUE(Push(owner_.get(), a, {0.7f, 0.2f * clock}, clock).ok());
    if (clock % 2 == 0) ASSERT_TRUE(Push(owner_.get(), b, {1.5f}, clock).ok());
    std::vector<ClosedRound> closed;
    // Two clocks at once every third close.
    if (clock % 3 == 1) continue;
    owner_->CloseRounds(clock + 1, &closed);
    for (const ClosedRound& r : closed) {
      ASSERT_TRUE(replica_->ApplyRound(r.key, r.sum.data(), static_cast<uint32_t>(r.sum.size()),
                                       r.count)
                      .ok());
    }
  }
  EXPECT_EQ(Record(owner_.get(), a), Record(replica_.get(), a));
  EXPECT_EQ(Record(owner_.get(), b), Record(replica_.get(), b));
  ShardStore::Slot slot;
  ASSERT_TRUE(replica_->Find(a, 0, 0, &slot).ok());
  EXPECT_EQ(*slot.steps, 6u) << "one step per round";
}

TEST_F(RoundCopiesTest, ApplyRoundRefusesAnotherLengthOrNoPushes) {
  std::vector<float> sum{1, 2};
  ASSERT_TRUE(replica_->ApplyRound(StoreKey{1}, sum.data(), 2, 2).ok());
  std::vector<float> before = Record(replica_.get(), StoreKey{1});
  EXPECT_EQ(replica_->ApplyRound(StoreKey{1}, sum.data(), 1, 2).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(replica_->ApplyRound(StoreKey{1}, sum.data(), 2, 0).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(Record(replica_.get(), StoreKey{1}), before);
}

TEST_F(RoundCopiesTest, TheWireFormatGivesBackEveryRoundAndTheHeader) {
  std::vector<ClosedRound> rounds;
  auto add = [&](Key key, int32_t chunk, int64_t clock, std::vector<float> sum) {
    ClosedRound r;
    r.key = StoreKey{key, chunk, chunk >= 0 ? uint64_t{1} << 20 : 0,
                     chunk >= 0 ? uint64_t{5} << 20 : 0};
    r.clock = clock;
    r.count = static_cast<uint32_t>(sum.size());
    r.sum = std::move(sum);
    rounds.push_back(std::move(r));
  };
  add(2, -1, 7, {1, 2});
  add(5, -1, 7, {3});
  add(5, 1, 7, {4, 5, 6});  // a chunk: a message of its own
  add(2, -1, 8, {7, 8});    // a later clock: keys start again
  add(9, -1, 8, {9});
  std::vector<const ClosedRound*> in;
  for (const ClosedRound& r : rounds) in.push_back(&r);
  RoundCopyHeader header;
  header.shard = 1;
  header.shards = 4;
  header.below = (int64_t{1} << 33) + 9;
  std::vector<KVPairs<float>> messages;
  ASSERT_TRUE(EncodeRoundCopies(header, in, 1 << 20, &messages).ok());
  EXPECT_EQ(messages.size(), 3u) << "the chunk alone, and a new message where keys go back";
  std::vector<ClosedRound> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    for (size_t k = 1; k < messages[i].keys.size(); ++k) {
      EXPECT_LT(messages[i].keys[k - 1], messages[i].keys[k]);
    }
    RoundCopyHeader got;
    ASSERT_TRUE(DecodeRoundCopy(messages[i], &got, &out).ok());
    EXPECT_EQ(got.shard, 1u);
    EXPECT_EQ(got.shards, 4u);
    EXPECT_EQ(got.below, header.below);
    EXPECT_EQ(got.last, i + 1 == messages.size()) << "only the close's last message says so";
  }
  ASSERT_EQ(out.size(), rounds.size());
  for (size_t i = 0; i < rounds.size(); ++i) {
    EXPECT_EQ(out[i].key.key, rounds[i].key.key);
    EXPECT_EQ(out[i].key.chunk, rounds[i].key.chunk);
    EXPECT_EQ(out[i].key.chunk_offset, rounds[i].key.chunk_offset);
    EXPECT_EQ(out[i].key.value_len, rounds[i].key.value_len);
    EXPECT_EQ(out[i].clock, rounds[i].clock);
    EXPECT_EQ(out[i].count, rounds[i].count);
    EXPECT_EQ(out[i].sum, rounds[i].sum);
  }
  // Small messages: one entry each, still whole.
  messages.clear();
  ASSERT_TRUE(EncodeRoundCopies(header, in, 1, &messages).ok());
  EXPECT_EQ(messages.size(), rounds.size());
}

TEST_F(RoundCopiesTest, AMalformedCopyIsRefusedWithAReason) {
  std::vector<ClosedRound> rounds(1);
  rounds[0].key = StoreKey{4};
  rounds[0].count = 2;
  rounds[0].sum = {1, 2, 3};
  std::vector<const ClosedRound*> in{&rounds[0]};
  std::vector<KVPairs<float>> messages;
  ASSERT_TRUE(EncodeRoundCopies(RoundCopyHeader(), in, 1 << 20, &messages).ok());
  ASSERT_EQ(messages.size(), 1u);
  auto decode = [](const KVPairs<float>& m) {
    RoundCopyHeader h;
    std::vector<ClosedRound> out;
    return DecodeRoundCopy(m, &h, &out);
  };
  KVPairs<float> m = messages[0];
  m.lens[0] = 100;  // past the values
  EXPECT_EQ(decode(m).code(), Status::Code::kInvalidArgument);
  m = messages[0];
  m.lens[0] = 6;  // header and entry, no values
  m.vals.resize(6);
  EXPECT_EQ(decode(m).code(), Status::Code::kInvalidArgument);
  m = messages[0];
  m.vals.resize(m.vals.size() + 1);  // a value no entry holds
  EXPECT_EQ(decode(m).code(), Status::Code::kInvalidArgument);
  m = messages[0];
  m.keys.clear();
  EXPECT_EQ(decode(m).code(), Status::Code::kInvalidArgument);
  m = messages[0];
  m.vals[7] = 0;  // a count of 0 pushes (bits 0)
  EXPECT_EQ(decode(m).code(), Status::Code::kInvalidArgument);
}

// SGD with lr 1 from zeros on the replica that takes a dead owner's keys over: a key's
// value is minus the sum of the means applied.
class HeldRoundsTest : public ::testing::Test {
 protected:
  HeldRoundsTest() {
    OptimizerOptions options;
    options.kind = OptimizerKind::kSgd;
    options.lr = 1.0;
    optimizer_ = Optimizer::Create(options);
    store_ = std::make_unique<ShardStore>(optimizer_.get(), ValueInit());
  }
  Status Push(Key key, float g, int64_t clock) {
    return store_->Aggregate(StoreKey{key}, &g, 1, clock);
  }
  float Value(Key key) {
    ShardStore::Slot slot;
    EXPECT_TRUE(store_->Find(key, 0, 1, &slot).ok());
    return slot.values[0];
  }
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ShardStore> store_;
};

TEST_F(HeldRoundsTest, AHeldKeyTakesPushesOfClosedClocksAndAppliesThemOnlyAtRelease) {
  // Key 1 is the dead owner's, copied here below clock 3; key 2 is this server's.
  ASSERT_TRUE(Push(2, 1, 2).ok());
  store_->CloseRounds(5);
  EXPECT_EQ(Value(2), -1);
  store_->SetHolds([](const StoreKey& k) -> int64_t { return k.key == 1 ? 3 : -1; });
  EXPECT_EQ(store_->HeldFrom(StoreKey{1}), 3);
  EXPECT_EQ(store_->HeldFrom(StoreKey{2}), -1);
  // Pushes the workers send again, in any order, and one of the clock going on now.
  ASSERT_TRUE(Push(1, 4, 4).ok());
  ASSERT_TRUE(Push(1, 2, 3).ok());
  ASSERT_TRUE(Push(1, 6, 3).ok());
  ASSERT_TRUE(Push(1, 10, 5).ok());
  EXPECT_EQ(Push(1, 1, 2).code(), Status::Code::kInvalidArgument)
      << "a round below the hold is in the key's state already";
  EXPECT_EQ(Push(2, 1, 3).code(), Status::Code::kInvalidArgument)
      << "a key not held takes no closed clock";
  store_->CloseRounds(6);
  EXPECT_EQ(Value(1), 0) << "held rounds wait, even once their clock closes";
  EXPECT_EQ(store_->open_round_entries(), 3u);
  // A request that reads the held key waits for the release.
  int ran = 0;
  store_->ParkHeld([&](ShardStore& s, const Status& ready) {
    EXPECT_TRUE(ready.ok());
    ShardStore::Slot slot;
    ASSERT_TRUE(s.Find(StoreKey{1}, 0, 1, &slot).ok());
    EXPECT_EQ(slot.values[0], -(4 + 4 + 10)) << "every held round applied before it runs";
    ++ran;
  });
  EXPECT_EQ(store_->parked(), 1u);
  EXPECT_EQ(ran, 0);
  std::vector<ClosedRound> closed;
  store_->ReleaseHolds(nullptr, &closed);
  EXPECT_EQ(ran, 1);
  EXPECT_FALSE(store_->holding());
  EXPECT_EQ(Value(1), -(4 + 4 + 10)) << "the means of clocks 3, 4, 5";
  ASSERT_EQ(closed.size(), 3u);
  EXPECT_EQ(closed[0].clock, 3);
  EXPECT_EQ(closed[0].count, 2u);
  EXPECT_EQ(closed[1].clock, 4);
  EXPECT_EQ(closed[2].clock, 5);
  EXPECT_EQ(store_->open_round_entries(), 0u);
  // Released: key 1 closes as any other from now on.
  ASSERT_TRUE(Push(1, 2, 6).ok());
  store_->CloseRounds(7);
  EXPECT_EQ(Value(1), -20);
}

TEST_F(HeldRoundsTest, AReleaseKeepsTheKeysStillHeldAndShutdownAnswersParkedTasks) {
  store_->CloseRounds(2);
  store_->SetHolds([](const StoreKey& k) -> int64_t { return k.key <= 2 ? 0 : -1; });
  ASSERT_TRUE(Push(1, 2, 0).ok());
  ASSERT_TRUE(Push(2, 4, 1).ok());
  // Key 1's owner is released, key 2's is still held.
  store_->ReleaseHolds([](const StoreKey& k) -> int64_t { return k.key == 2 ? 0 : -1; });
  EXPECT_EQ(Value(1), -2);
  EXPECT_EQ(Value(2), 0);
  EXPECT_TRUE(store_->holding());
  Status seen;
  store_->ParkHeld([&](ShardStore&, const Status& ready) { seen = ready; });
  store_->Shutdown(Status::Unavailable("stopping"));
  EXPECT_EQ(seen.code(), Status::Code::kUnavailable);
  EXPECT_EQ(store_->open_round_entries(), 0u);
}

}  // namespace
}  // namespace ps
