// ShardStore's synchronous aggregation keyed by clock (server/shard_store.h): rounds
// sum a clock's pushes per key, close in clock order with the mean of the pushes each
// key got, and parked tasks run once the rounds they wait for are applied.
#include "shard_store.h"

#include <gtest/gtest.h>

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
  uint64_t Steps(Key key) {
    ShardStore::Slot slot;
    return store_->Find(key, 0, 0, &slot).ok() ? *slot.steps : 0;
  }

  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ShardStore> store_;
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
  store_->Park(0, [&](ShardStore&) { ran.push_back("now"); });
  EXPECT_EQ(ran, (std::vector<std::string>{"now"})) << "nothing to wait for";
  store_->Park(2, [&](ShardStore&) { ran.push_back("a2"); });
  store_->Park(1, [&](ShardStore&) { ran.push_back("b1"); });
  store_->Park(2, [&](ShardStore&) { ran.push_back("c2"); });
  ASSERT_TRUE(Push(1, {4}, 0).ok());
  store_->Park(1, [&](ShardStore& s) {
    ShardStore::Slot slot;
    ASSERT_TRUE(s.Find(1, 0, 0, &slot).ok());
    ran.push_back("sees " + std::to_string(static_cast<int>(slot.values[0])));
  });
  EXPECT_EQ(store_->parked(), 4u);
  store_->CloseRounds(1);
  EXPECT_EQ(ran, (std::vector<std::string>{"now", "b1", "sees -4"}));
  store_->CloseRounds(5);
  EXPECT_EQ(ran, (std::vector<std::string>{"now", "b1", "sees -4", "a2", "c2"}));
  EXPECT_EQ(store_->parked(), 0u);
}

}  // namespace
}  // namespace ps
