// ShardThread (server/shard_thread.h): the thread runs request parts for any peer, so
// nothing a task throws may stop it; RunAndWait hands its task's exception back.
#include "shard_thread.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "ps/optimizer.h"

namespace ps {
namespace {

class ShardThreadTest : public ::testing::Test {
 protected:
  ShardThreadTest() : optimizer_(Optimizer::Create(OptimizerOptions())) {
    thread_ = std::make_unique<ShardThread>(
        std::make_unique<ShardStore>(optimizer_.get(), ValueInit()), /*queue_capacity=*/16);
  }
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ShardThread> thread_;
};

TEST_F(ShardThreadTest, ATaskThatThrowsAnythingIsLoggedAndTheThreadGoesOn) {
  std::vector<int> ran;
  thread_->Enqueue([&](ShardStore&) {
    ran.push_back(1);
    throw 42;  // not a std::exception
  });
  thread_->Enqueue([&](ShardStore&) {
    ran.push_back(2);
    throw std::runtime_error("a std::exception");
  });
  thread_->Enqueue([&](ShardStore&) { ran.push_back(3); });
  thread_->RunAndWait([&](ShardStore&) { ran.push_back(4); });
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3, 4}));
}

TEST_F(ShardThreadTest, RunAndWaitHandsBackWhatItsTaskThrew) {
  EXPECT_THROW(thread_->RunAndWait([](ShardStore&) { throw 7; }), int);
  bool ran = false;
  thread_->RunAndWait([&](ShardStore&) { ran = true; });
  EXPECT_TRUE(ran) << "the thread goes on";
}

}  // namespace
}  // namespace ps
