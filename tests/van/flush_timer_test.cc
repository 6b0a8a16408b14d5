// FlushTimer (van/flush_timer.h): an armed deadline flushes once, not before its delay;
// Disarm cancels it; a flush that leaves something behind (or throws) is tried again,
// later each time, an Arm meanwhile brings the next try forward and a Rearm keeps its
// pace; Arms that come after the timer went to sleep still flush; Stop ends it with
// nothing pending, and Arm then says nothing will flush.
#include "flush_timer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <chrono>
#include <thread>
#include <vector>

namespace ps {
namespace {

using Clock = std::chrono::steady_clock;

// Waits up to 10 s for `count` to reach `n`.
bool ReachesWithin10s(const std::atomic<int>& count, int n) {
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (count.load() < n && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return count.load() >= n;
}

TEST(FlushTimer, AnArmedDeadlineFlushesOnceAndNotBeforeItsDelay) {
  std::atomic<int> flushed{0};
  Clock::time_point flushed_at;
  FlushTimer timer(std::chrono::milliseconds(20), [&] {
    flushed_at = Clock::now();
    flushed.fetch_add(1);
    return false;
  });
  const auto armed_at = Clock::now();
  timer.Arm();
  timer.Arm();  // the earlier deadline stays; still one flush
  ASSERT_TRUE(ReachesWithin10s(flushed, 1));
  EXPECT_GE(flushed_at - armed_at, std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(flushed.load(), 1);
  EXPECT_EQ(timer.flushes(), 1u);
}

TEST(FlushTimer, DisarmCancelsTheDeadline) {
  std::atomic<int> flushed{0};
  FlushTimer timer(std::chrono::milliseconds(500), [&] {
    flushed.fetch_add(1);
    return false;
  });
  timer.Arm();
  timer.Disarm();  // the batches went before the deadline
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_EQ(flushed.load(), 0);
  timer.Arm();  // an Arm after Disarm counts again
  ASSERT_TRUE(ReachesWithin10s(flushed, 1));
}

TEST(FlushTimer, AFlushThatLeavesSomethingBehindIsTriedAgainLaterEachTime) {
  std::atomic<int> flushed{0};
  std::vector<Clock::time_point> at;  // written by the timer's thread only
  FlushTimer timer(std::chrono::milliseconds(1), [&] {
    at.push_back(Clock::now());
    return flushed.fetch_add(1) < 5;  // a peer without room, five times
  });
  timer.Arm();
  ASSERT_TRUE(ReachesWithin10s(flushed, 6));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(flushed.load(), 6);
  // Tries after 1, 2, 4, 8 and 16 ms: each gap at least as long as its backoff.
  for (int i = 1; i < 6; ++i) {
    EXPECT_GE(at[i] - at[i - 1], std::chrono::milliseconds(1 << (i - 1))) << "try " << i;
  }
}

TEST(FlushTimer, AnArmDuringARetrysBackoffBringsTheDeadlineForward) {
  std::atomic<int> flushed{0};
  std::atomic<bool> full{true};
  FlushTimer timer(
      std::chrono::milliseconds(1),
      [&] {
        flushed.fetch_add(1);
        return full.load();  // a peer without room until `full` goes
      },
      /*max_retry=*/std::chrono::seconds(60));
  timer.Arm();
  // Tries after 1, 2, 4, ... 512 ms (about 1 s in all); the next one is 1 s later.
  ASSERT_TRUE(ReachesWithin10s(flushed, 11));
  full = false;
  const int before = flushed.load();
  const auto armed_at = Clock::now();
  timer.Arm();  // a new first request: due in 1 ms, not at the backoff's end
  ASSERT_TRUE(ReachesWithin10s(flushed, before + 1));
  // Due 1 ms after the Arm against 1 s or more without it: half a second of slack for
  // a busy machine.
  EXPECT_LT(Clock::now() - armed_at, std::chrono::milliseconds(500));
}

TEST(FlushTimer, AFlushFromElsewhereThatLeavesSomethingKeepsTheBackoffsPace) {
  std::atomic<int> flushed{0};
  FlushTimer timer(
      std::chrono::milliseconds(1),
      [&] {
        flushed.fetch_add(1);
        return true;  // a peer that never has room
      },
      /*max_retry=*/std::chrono::seconds(60));
  EXPECT_TRUE(timer.Arm());
  // Tries after 1, 2, 4, ... 512 ms; the next one is 1 s after the eleventh.
  ASSERT_TRUE(ReachesWithin10s(flushed, 11));
  const int before = flushed.load();
  // Another thread's flushes (a receive thread's retries every millisecond) that find
  // no room either: each takes the deadline back and puts it back.
  const auto began = Clock::now();
  while (Clock::now() - began < std::chrono::milliseconds(300)) {
    timer.Rearm(timer.Disarm());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // A Rearm taken as a new Arm would have made the timer try every millisecond.
  EXPECT_LE(flushed.load(), before + 1);
}

TEST(FlushTimer, ARearmWithNoDeadlineTakenArmsOne) {
  std::atomic<int> flushed{0};
  FlushTimer timer(std::chrono::milliseconds(1), [&] {
    flushed.fetch_add(1);
    return false;
  });
  EXPECT_EQ(timer.Disarm(), 0);  // nothing armed yet
  timer.Rearm(0);  // a flush that left something with no deadline pending
  ASSERT_TRUE(ReachesWithin10s(flushed, 1));
}

TEST(FlushTimer, AFlushThatThrowsIsLoggedAndTriedAgain) {
  std::atomic<int> flushed{0};
  FlushTimer timer(std::chrono::milliseconds(1), [&]() -> bool {
    if (flushed.fetch_add(1) == 0) throw 42;  // not even a std::exception
    return false;
  });
  timer.Arm();
  ASSERT_TRUE(ReachesWithin10s(flushed, 2));
}

TEST(FlushTimer, AnArmAfterTheTimerWentToSleepStillFlushes) {
  std::atomic<int> flushed{0};
  FlushTimer timer(std::chrono::microseconds(500), [&] {
    flushed.fetch_add(1);
    return false;
  });
  for (int i = 1; i <= 3; ++i) {
    timer.Arm();
    ASSERT_TRUE(ReachesWithin10s(flushed, i)) << "arm " << i;
    // Past kLinger without an Arm: the thread sleeps until the next one wakes it.
    std::this_thread::sleep_for(FlushTimer::kLinger + std::chrono::milliseconds(30));
  }
  EXPECT_EQ(flushed.load(), 3);
}

TEST(FlushTimer, ArmsAndDisarmsFromManyThreadsLeaveATimerThatStillFlushes) {
  std::atomic<int> flushed{0};
  FlushTimer timer(std::chrono::microseconds(200), [&] {
    flushed.fetch_add(1);
    return false;
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        timer.Arm();
        if (i % 7 == 0) timer.Disarm();
        if (i % 100 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
      }
    });
  }
  for (auto& t : threads) t.join();
  // Each thread's last call was an Arm (i = 1999 is no multiple of 7): one flush at least.
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (timer.flushes() == 0 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(timer.flushes(), 1u);
  // Read before the Arm: a flush of a deadline still pending counts as well as its own.
  const int before = flushed.load();
  timer.Arm();
  ASSERT_TRUE(ReachesWithin10s(flushed, before + 1));
}

TEST(FlushTimer, StopEndsTheThreadAndLaterArmsDoNothing) {
  std::atomic<int> flushed{0};
  auto timer = std::make_unique<FlushTimer>(std::chrono::seconds(30), [&] {
    flushed.fetch_add(1);
    return false;
  });
  EXPECT_TRUE(timer->Arm());
  const auto began = Clock::now();
  timer->Stop();  // the 30 s deadline does not hold Stop up
  EXPECT_LT(Clock::now() - began, std::chrono::seconds(10));
  EXPECT_FALSE(timer->Arm());  // nothing will flush: the caller sends at once
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(flushed.load(), 0);
  timer.reset();  // a second Stop, from the destructor
}

}  // namespace
}  // namespace ps
