// EventLoop (ps/internal/event_loop.h): tasks and timers on one thread, in order.
//
// No assertion here bounds how late anything runs (the machine may be loaded): tests
// assert what ran, in which order, and that nothing ran before its deadline; waits for
// something to happen give up only after kPatience.
#include "ps/internal/event_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace ps {
namespace {

using Clock = EventLoop::Clock;
using std::chrono::milliseconds;

constexpr auto kPatience = std::chrono::seconds(10);

// True once `future` is ready, false if that takes longer than kPatience.
template <typename T>
bool Happens(const std::future<T>& future) {
  return future.wait_for(kPatience) == std::future_status::ready;
}

// Runs `task` on `loop`'s thread and waits for it (the loop must be started).
void RunOnLoop(EventLoop& loop, std::function<void()> task) {
  std::promise<void> done;
  loop.Post([&] {
    task();
    done.set_value();
  });
  ASSERT_TRUE(Happens(done.get_future()));
}

// Holds the loop thread inside a task until Release, so work piles up behind it.
class Blocker {
 public:
  explicit Blocker(EventLoop& loop) {
    std::promise<void> entered;
    std::shared_future<void> release = release_.get_future().share();
    loop.Post([&entered, release] {
      entered.set_value();
      release.wait();
    });
    EXPECT_TRUE(Happens(entered.get_future()));
  }
  ~Blocker() { Release(); }
  void Release() {
    if (!released_) release_.set_value();
    released_ = true;
  }

 private:
  std::promise<void> release_;
  bool released_ = false;
};

TEST(EventLoopTest, TimerFiresAtItsDeadlineWithNoOtherActivity) {
  EventLoop loop("test");
  loop.Start();
  std::promise<Clock::time_point> fired;
  Clock::time_point armed = Clock::now();
  loop.RunAfter(milliseconds(50), [&] { fired.set_value(Clock::now()); });
  std::future<Clock::time_point> when = fired.get_future();
  ASSERT_TRUE(Happens(when));
  EXPECT_GE(when.get() - armed, milliseconds(50));
}

TEST(EventLoopTest, ArmingAnEarlierTimerWakesALoopWaitingForALaterOne) {
  EventLoop loop("test");
  loop.Start();
  loop.RunAfter(std::chrono::hours(1), [] {});
  std::promise<void> fired;
  loop.RunAfter(milliseconds(20), [&] { fired.set_value(); });
  EXPECT_TRUE(Happens(fired.get_future()));
}

TEST(EventLoopTest, PostedTasksRunInOrder) {
  EventLoop loop("test");
  loop.Start();
  std::vector<int> order;  // touched only on the loop thread
  for (int i = 0; i < 1000; ++i) loop.Post([&order, i] { order.push_back(i); });
  RunOnLoop(loop, [] {});
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(order[i], i);
}

TEST(EventLoopTest, WorkHandedOverBeforeStartRunsAfterStart) {
  EventLoop loop("test");
  std::atomic<int> ran{0};
  loop.Post([&] { ++ran; });
  loop.RunAfter(milliseconds(0), [&] { ++ran; });
  EXPECT_EQ(loop.NumTimers(), 1u);
  loop.Start();
  loop.Start();  // idempotent
  // Posted after both fell due, so it runs after both.
  RunOnLoop(loop, [] {});
  EXPECT_EQ(ran.load(), 2);
}

TEST(EventLoopTest, EqualDeadlinesRunInArmingOrder) {
  EventLoop loop("test");
  std::vector<int> order;  // touched only on the loop thread
  Clock::time_point deadline = Clock::now() + milliseconds(20);
  for (int i = 1; i <= 100; ++i) loop.RunAt(deadline, [&order, i] { order.push_back(i); });
  // Armed last with an earlier deadline: runs first.
  loop.RunAt(deadline - milliseconds(1), [&order] { order.push_back(0); });
  std::promise<void> done;
  loop.RunAt(deadline, [&] { done.set_value(); });
  loop.Start();
  ASSERT_TRUE(Happens(done.get_future()));
  ASSERT_EQ(order.size(), 101u);
  for (int i = 0; i <= 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(EventLoopTest, TaskThatKeepsRepostingItselfDoesNotStarveADueTimer) {
  EventLoop loop("test");
  loop.Start();
  std::atomic<bool> timer_ran{false};
  std::function<void()> spin = [&] {
    if (!timer_ran) loop.Post(spin);
  };
  loop.RunAfter(milliseconds(10), [&] { timer_ran = true; });
  loop.Post(spin);
  Clock::time_point give_up = Clock::now() + kPatience;
  while (!timer_ran && Clock::now() < give_up) std::this_thread::sleep_for(milliseconds(1));
  EXPECT_TRUE(timer_ran);
  loop.Stop();  // before `spin` goes out of scope
}

TEST(EventLoopTest, CancelledTimerNeverRuns) {
  EventLoop loop("test");
  loop.Start();
  std::atomic<bool> ran{false};
  {
    Blocker blocker(loop);  // the timer falls due but cannot run yet
    EventLoop::TimerId id = loop.RunAfter(milliseconds(0), [&] { ran = true; });
    EXPECT_EQ(loop.NumTimers(), 1u);
    loop.Cancel(id);
    EXPECT_EQ(loop.NumTimers(), 0u);
  }
  std::promise<void> later;
  loop.RunAfter(milliseconds(20), [&] { later.set_value(); });
  ASSERT_TRUE(Happens(later.get_future()));
  EXPECT_FALSE(ran);
}

TEST(EventLoopTest, CancelOnTheLoopThreadStopsATimerThatIsAlreadyDue) {
  EventLoop loop("test");
  std::atomic<bool> second_ran{false};
  Clock::time_point deadline = Clock::now();
  EventLoop::TimerId second = 0;
  loop.RunAt(deadline, [&] { loop.Cancel(second); });
  second = loop.RunAt(deadline, [&] { second_ran = true; });
  loop.Start();
  RunOnLoop(loop, [] {});
  EXPECT_FALSE(second_ran);
  EXPECT_EQ(loop.NumTimers(), 0u);
}

TEST(EventLoopTest, CancelIgnoresUnknownAndFinishedIds) {
  EventLoop loop("test");
  loop.Start();
  std::promise<void> fired;
  EventLoop::TimerId id = loop.RunAfter(milliseconds(0), [&] { fired.set_value(); });
  EXPECT_NE(id, 0u);
  ASSERT_TRUE(Happens(fired.get_future()));
  loop.Cancel(id);
  loop.Cancel(id + 1000);
  loop.Cancel(0);
  std::promise<void> still_running;
  loop.Post([&] { still_running.set_value(); });
  EXPECT_TRUE(Happens(still_running.get_future()));
}

TEST(EventLoopTest, PeriodicTimerCancelledFromItsOwnTaskStops) {
  EventLoop loop("test");
  loop.Start();
  const auto period = milliseconds(2);
  int runs = 0;  // touched only on the loop thread
  EventLoop::TimerId id = 0;
  std::promise<void> done;
  // Armed on the loop thread, so `id` is set before the first run.
  loop.Post([&] {
    id = loop.RunEvery(period, [&] {
      if (++runs < 3) return;
      loop.Cancel(id);
      // Were the timer re-armed, it would fall due before this one.
      loop.RunAfter(5 * period, [&] { done.set_value(); });
    });
  });
  ASSERT_TRUE(Happens(done.get_future()));
  RunOnLoop(loop, [&] {
    EXPECT_EQ(runs, 3);
    EXPECT_EQ(loop.NumTimers(), 0u);
  });
}

TEST(EventLoopTest, PeriodicTimerCancelledFromAnotherThreadDuringARunNeverRunsAgain) {
  EventLoop loop("test");
  loop.Start();
  std::atomic<int> runs{0};
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  EventLoop::TimerId id = loop.RunEvery(milliseconds(1), [&, released] {
    if (++runs == 1) {
      entered.set_value();
      released.wait();
    }
  });
  ASSERT_TRUE(Happens(entered.get_future()));
  loop.Cancel(id);  // the run in progress goes on
  release.set_value();
  std::promise<void> later;
  loop.RunAfter(milliseconds(20), [&] { later.set_value(); });
  ASSERT_TRUE(Happens(later.get_future()));
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(loop.NumTimers(), 0u);
}

TEST(EventLoopTest, OverrunningPeriodicTimerDoesNotBurstToCatchUp) {
  EventLoop loop("test");
  loop.Start();
  const auto period = milliseconds(20);
  std::vector<Clock::time_point> starts;  // touched only on the loop thread
  Clock::time_point first_run_end;
  EventLoop::TimerId id = 0;
  std::promise<void> done;
  loop.Post([&] {
    id = loop.RunEvery(period, [&] {
      starts.push_back(Clock::now());
      if (starts.size() == 1) {
        std::this_thread::sleep_for(5 * period);  // lets four ticks pass
        first_run_end = Clock::now();
      } else if (starts.size() == 3) {
        loop.Cancel(id);
        done.set_value();
      }
    });
  });
  ASSERT_TRUE(Happens(done.get_future()));
  RunOnLoop(loop, [&] {
    ASSERT_EQ(starts.size(), 3u);
    // A burst would run the missed ticks back to back right after the overrun.
    EXPECT_GE(starts[1], first_run_end);
    EXPECT_GE(starts[2] - first_run_end, period);
  });
}

TEST(EventLoopTest, ThrowingTaskDoesNotStopTheLoop) {
  EventLoop loop("test");
  loop.Start();
  loop.Post([] { throw std::runtime_error("posted task fails (expected by the test)"); });
  loop.Post([] { throw 42; });
  int periodic_runs = 0;  // touched only on the loop thread
  EventLoop::TimerId id = 0;
  std::promise<void> done;
  loop.Post([&] {
    id = loop.RunEvery(milliseconds(1), [&] {
      if (++periodic_runs == 3) {
        loop.Cancel(id);
        done.set_value();
      }
      throw std::runtime_error("periodic task fails (expected by the test)");
    });
  });
  EXPECT_TRUE(Happens(done.get_future()));
}

TEST(EventLoopTest, StopDiscardsPendingWorkAndJoins) {
  EventLoop loop("test");
  loop.Start();
  std::atomic<bool> in_progress_finished{false};
  std::promise<void> entered;
  std::promise<void> release;
  loop.Post([&] {
    entered.set_value();
    release.get_future().wait();
    std::this_thread::sleep_for(milliseconds(20));
    in_progress_finished = true;
  });
  ASSERT_TRUE(Happens(entered.get_future()));
  auto captured = std::make_shared<int>(0);  // counts the owners of discarded work
  std::atomic<int> ran{0};
  loop.Post([&ran, captured] { ++ran; });
  loop.RunAfter(milliseconds(0), [&ran, captured] { ++ran; });
  loop.RunEvery(milliseconds(1), [&ran, captured] { ++ran; });
  EXPECT_EQ(captured.use_count(), 4);

  std::future<void> stopped = std::async(std::launch::async, [&] { loop.Stop(); });
  // Stop discards the timers before it waits for the task in progress.
  Clock::time_point give_up = Clock::now() + kPatience;
  while (loop.NumTimers() != 0 && Clock::now() < give_up) std::this_thread::yield();
  release.set_value();
  ASSERT_TRUE(Happens(stopped));
  EXPECT_TRUE(in_progress_finished);  // Stop waited for it
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(captured.use_count(), 1);  // discarded work was destroyed

  loop.Post([&ran, captured] { ++ran; });  // ignored after Stop
  loop.RunAfter(milliseconds(0), [&ran, captured] { ++ran; });
  EXPECT_EQ(captured.use_count(), 1);
  EXPECT_EQ(loop.NumTimers(), 0u);
  loop.Stop();  // idempotent
}

TEST(EventLoopTest, StopFromInsideATaskDoesNotDeadlock) {
  auto loop = std::make_unique<EventLoop>("test");
  std::promise<void> stop_returned;
  std::atomic<bool> later_ran{false};
  loop->Post([&] {
    loop->Stop();
    EXPECT_TRUE(loop->InLoopThread());
    stop_returned.set_value();
  });
  loop->Post([&] { later_ran = true; });
  loop->Start();
  ASSERT_TRUE(Happens(stop_returned.get_future()));
  loop.reset();  // joins
  EXPECT_FALSE(later_ran);
}

TEST(EventLoopTest, InLoopThreadIsTrueOnlyInsideTasks) {
  EventLoop loop("test");
  EXPECT_FALSE(loop.InLoopThread());
  loop.Start();
  EXPECT_FALSE(loop.InLoopThread());
  bool inside = false;
  RunOnLoop(loop, [&] { inside = loop.InLoopThread(); });
  EXPECT_TRUE(inside);
}

TEST(EventLoopTest, ManyThreadsPostConcurrently) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2000;
  EventLoop loop("test");
  loop.Start();
  std::vector<std::vector<int>> seen(kThreads);  // touched only on the loop thread
  std::atomic<int> timer_runs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        loop.Post([&seen, t, i] { seen[t].push_back(i); });
        if (i % 100 == 0) {
          // Timers armed and cancelled from many threads at once, too.
          loop.Cancel(loop.RunAfter(milliseconds(1), [&] { ++timer_runs; }));
          loop.RunAfter(milliseconds(0), [&] { ++timer_runs; });
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  // Posted after every timer fell due, so it runs after them.
  RunOnLoop(loop, [&] {
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_EQ(seen[t].size(), static_cast<size_t>(kPerThread));
      for (int i = 0; i < kPerThread; ++i) ASSERT_EQ(seen[t][i], i);  // FIFO per poster
    }
  });
  const int kUncancelled = kThreads * kPerThread / 100;
  // A cancelled timer may still have run if the loop got to it first.
  EXPECT_GE(timer_runs.load(), kUncancelled);
  EXPECT_LE(timer_runs.load(), 2 * kUncancelled);
}

}  // namespace
}  // namespace ps
