// ShardStore's synchronous aggregation keyed by clock (server/shard_store.h): rounds
// sum a clock's pushes per key, close in clock order with the mean of the pushes each
// key got, and parked tasks run once the rounds they wait for are applied. Rounds and
// parked tasks are bounded per key, and Shutdown answers every parked task.
#include "shard_store.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "ps/optimizer.h"

namespace ps {
namespace {

// SGD with lr 1 from zeros: a key's value is minus the sum of the means applied.
class RoundsTest : public ::testing::Test {
 protected:
  RoundsTest() {
    OptimizerOptions options;
    options.kind = OptimizerKind::kSgd;
    options.lr = 1.0;
    optimizer_ = Optimizer::Create(options);
    store_ = std::make_unique<ShardStore>(optimizer_.get(), ValueInit());
  }
  Status Push(Key key, std::vector<float> g, int64_t clock) {
    return store_->Aggregate(StoreKey{key}, g.data(), static_cast<uint32_t>(g.size()), clock);
  }
  std::vector<float> Value(Key key) {
    ShardStore::Slot slot;
    EXPECT_TRUE(store_->Find(key, 0, 0, &slot).ok());
    return std::vector<float>(slot.values, slot.values + slot.len);
  }
  // The keys a parked task holds (they must outlive the park: the fixture's).
  ShardStore::KeyList Keys(std::vector<Key> keys = {}) {
    held_.push_back(std::move(keys));
    return ShardStore::KeyList{held_.back().data(), nullptr, held_.back().size()};
  }
  uint64_t Steps(Key key) {
    ShardStore::Slot slot;
    return store_->Find(key, 0, 0, &slot).ok() ? *slot.steps : 0;
  }

  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ShardStore> store_;
  std::deque<std::vector<Key>> held_;
};

TEST_F(RoundsTest, NothingIsAppliedBeforeTheRoundCloses) {
  ASSERT_TRUE(Push(1, {2, 4}, 0).ok());
  ASSERT_TRUE(Push(1, {4, 8}, 0).ok());
  EXPECT_EQ(Value(1), (std::vector<float>{0, 0}));
  EXPECT_EQ(store_->open_round_entries(), 1u);
  store_->CloseRounds(1);
  EXPECT_EQ(Value(1), (std::vector<float>{-3, -6})) << "one step with the mean";
  EXPECT_EQ(Steps(1), 1u);
  EXPECT_EQ(store_->open_round_entries(), 0u);
  EXPECT_EQ(store_->closed_below(), 1);
}

TEST_F(RoundsTest, ASparseKeyIsAveragedOverThePushesItGot) {
  ASSERT_TRUE(Push(1, {3}, 0).ok());
  ASSERT_TRUE(Push(1, {5}, 0).ok());
  ASSERT_TRUE(Push(1, {7}, 0).ok());
  ASSERT_TRUE(Push(2, {6}, 0).ok());  // one worker touched key 2
  store_->CloseRounds(1);
  EXPECT_EQ(Value(1), (std::vector<float>{-5}));
  EXPECT_EQ(Value(2), (std::vector<float>{-6}));
}

TEST_F(RoundsTest, RoundsCloseInClockOrderAndOnlyBelowTheMinimum) {
  ASSERT_TRUE(Push(1, {1}, 0).ok());
  ASSERT_TRUE(Push(1, {10}, 1).ok());  // a worker one clock ahead
  ASSERT_TRUE(Push(1, {100}, 2).ok());
  store_->CloseRounds(2);
  EXPECT_EQ(Value(1), (std::vector<float>{-11}));
  EXPECT_EQ(Steps(1), 2u);
  EXPECT_EQ(store_->open_round_entries(), 1u) << "clock 2 stays open";
  store_->CloseRounds(1);  // an older minimum changes nothing
  EXPECT_EQ(store_->closed_below(), 2);
  store_->CloseRounds(3);
  EXPECT_EQ(Value(1), (std::vector<float>{-111}));
}

TEST_F(RoundsTest, APushToAnAppliedClockIsRefusedNamingIt) {
  ASSERT_TRUE(Push(1, {1}, 0).ok());
  store_->CloseRounds(1);
  Status late = Push(1, {5}, 0);
  EXPECT_EQ(late.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(late.message().find("push of clock 0 to key 1"), std::string::npos) << late.message();
  EXPECT_EQ(Value(1), (std::vector<float>{-1})) << "nothing added";
  EXPECT_FALSE(Push(1, {1, 2}, 1).ok()) << "a length other than the key's";
  EXPECT_EQ(store_->open_round_entries(), 0u);
}

TEST_F(RoundsTest, ParkedTasksRunOnceTheirRoundsAreAppliedInTheOrderParked) {
  std::vector<std::string> ran;
  auto log = [&](std::string name) {
    return [&ran, name](ShardStore&, const Status& ready) {
      ran.push_back(ready.ok() ? name : name + " refused");
    };
  };
  ASSERT_TRUE(store_->Park(0, Keys(), log("now")).ok());
  EXPECT_EQ(ran, (std::vector<std::string>{"now"})) << "nothing to wait for";
  ASSERT_TRUE(store_->Park(2, Keys(), log("a2")).ok());
  ASSERT_TRUE(store_->Park(1, Keys(), log("b1")).ok());
  ASSERT_TRUE(store_->Park(2, Keys(), log("c2")).ok());
  ASSERT_TRUE(Push(1, {4}, 0).ok());
  ASSERT_TRUE(store_->Park(1, Keys(), [&](ShardStore& s, const Status& ready) {
                ASSERT_TRUE(ready.ok());
                ShardStore::Slot slot;
                ASSERT_TRUE(s.Find(1, 0, 0, &slot).ok());
                ran.push_back("sees " + std::to_string(static_cast<int>(slot.values[0])));
              }).ok());
  EXPECT_EQ(store_->parked(), 4u);
  store_->CloseRounds(1);
  EXPECT_EQ(ran, (std::vector<std::string>{"now", "b1", "sees -4"}));
  store_->CloseRounds(5);
  EXPECT_EQ(ran, (std::vector<std::string>{"now", "b1", "sees -4", "a2", "c2"}));
  EXPECT_EQ(store_->parked(), 0u);
}

TEST_F(RoundsTest, APushFarAheadOfTheAppliedRoundsIsRefusedAndOpensNoRound) {
  Status far = Push(1, {1}, 1000000000);
  EXPECT_EQ(far.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(far.message().find("push of clock 1000000000 to key 1"), std::string::npos)
      << far.message();
  EXPECT_EQ(store_->open_round_entries(), 0u);
  EXPECT_EQ(store_->num_keys(), 0u) << "no key touched";
}

TEST_F(RoundsTest, AKeyHasAtMostTheBoundPlusOneRoundsOpen) {
  const int64_t ahead = ShardStore::kMaxClocksAhead;
  for (int64_t c = 0; c <= ahead; ++c) ASSERT_TRUE(Push(1, {1}, c).ok()) << c;
  EXPECT_FALSE(Push(1, {1}, ahead + 1).ok());
  EXPECT_EQ(store_->open_round_entries(), static_cast<size_t>(ahead + 1));
  store_->CloseRounds(2);  // the window moves with the rounds applied
  EXPECT_TRUE(Push(1, {1}, ahead + 1).ok());
  EXPECT_TRUE(Push(1, {1}, ahead + 2).ok());
  EXPECT_FALSE(Push(1, {1}, ahead + 3).ok());
  EXPECT_EQ(store_->open_round_entries(), static_cast<size_t>(ahead + 1));
}

TEST_F(RoundsTest, ATaskFarAheadOfTheAppliedRoundsIsRefusedAndNotKept) {
  bool ran = false;
  Status far = store_->Park(ShardStore::kMaxClocksAhead + 1, Keys({1}),
                            [&](ShardStore&, const Status&) { ran = true; });
  EXPECT_EQ(far.code(), Status::Code::kInvalidArgument);
  EXPECT_FALSE(ran);
  EXPECT_EQ(store_->parked(), 0u);
  EXPECT_EQ(store_->parked_on(1), 0u);
  EXPECT_TRUE(store_->Park(ShardStore::kMaxClocksAhead, Keys({1}),
                           [&](ShardStore&, const Status&) { ran = true; })
                  .ok());
  EXPECT_EQ(store_->parked(), 1u);
}

TEST_F(RoundsTest, ParkedTasksAreBoundedPerKeyAndEachKeyIsCounted) {
  int ran = 0;
  auto count = [&](ShardStore&, const Status& ready) { ran += ready.ok(); };
  for (uint32_t i = 0; i < ShardStore::kMaxParkedPerKey; ++i) {
    ASSERT_TRUE(store_->Park(1, Keys({7}), count).ok()) << i;
  }
  Status full = store_->Park(1, Keys({3, 7, 9}), count);
  EXPECT_EQ(full.code(), Status::Code::kUnavailable);
  EXPECT_NE(full.message().find("key 7"), std::string::npos) << full.message();
  EXPECT_EQ(store_->parked_on(3), 0u) << "a refused task counts against no key";
  ASSERT_TRUE(store_->Park(1, Keys({3, 9}), count).ok()) << "other keys still park";
  EXPECT_EQ(store_->parked_on(7), ShardStore::kMaxParkedPerKey);
  EXPECT_EQ(store_->parked_on(9), 1u);
  store_->CloseRounds(1);
  EXPECT_EQ(ran, static_cast<int>(ShardStore::kMaxParkedPerKey) + 1);
  EXPECT_EQ(store_->parked_on(7), 0u);
  EXPECT_EQ(store_->parked_on(9), 0u);
  EXPECT_TRUE(store_->Park(2, Keys({7}), count).ok()) << "room again once they ran";
}

TEST_F(RoundsTest, ShutdownAnswersEveryParkedTaskInOrderAndDropsTheRounds) {
  std::vector<std::string> answered;
  // Each task owns memory, as a parked request does: it must be freed by its answer.
  auto answer = [&](std::string name) {
    auto owned = std::make_shared<std::string>(std::move(name));
    return [&answered, owned](ShardStore&, const Status& ready) {
      answered.push_back(*owned + ": " + ready.message());
    };
  };
  ASSERT_TRUE(store_->Park(2, Keys({1}), answer("a")).ok());
  ASSERT_TRUE(store_->Park(1, Keys({1, 2}), answer("b")).ok());
  ASSERT_TRUE(Push(1, {4}, 0).ok());
  ASSERT_TRUE(Push(2, {4}, 1).ok());
  store_->Shutdown(Status::Unavailable("server shutting down"));
  EXPECT_EQ(answered, (std::vector<std::string>{"b: server shutting down",
                                                "a: server shutting down"}));
  EXPECT_EQ(store_->parked(), 0u);
  EXPECT_EQ(store_->parked_on(1), 0u);
  EXPECT_EQ(store_->open_round_entries(), 0u);
  bool ran = false;
  Status later = store_->Park(5, Keys({1}), [&](ShardStore&, const Status&) { ran = true; });
  EXPECT_EQ(later.code(), Status::Code::kUnavailable);
  EXPECT_FALSE(ran) << "refused, not parked for ever";
  EXPECT_EQ(store_->parked(), 0u);
}

}  // namespace
}  // namespace ps
