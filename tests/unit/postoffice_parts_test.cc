// The Postoffice's parts that decide on their own (ps/runtime/*.h, internal): the join
// state, barrier releases, a process's extra workers, the scheduler watch, the idle
// trimmer, the drop injector and a channel's held data. The Postoffice that wires them
// is tested through real nodes (tests/integration).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "barrier_releases.h"
#include "drop_injector.h"
#include "idle_trimmer.h"
#include "inbound_channel.h"
#include "join_state.h"
#include "scheduler_watch.h"
#include "worker_instances.h"

namespace ps {
namespace {

using std::chrono::milliseconds;

TEST(JoinState, WaitEndsWhenJoinedAndTheFirstErrorHolds) {
  JoinState join;
  Status error;
  EXPECT_FALSE(join.WaitFor(milliseconds(10), &error)) << "neither joined nor failed";
  std::thread joiner([&] { join.MarkJoined(); });
  EXPECT_TRUE(join.WaitFor(milliseconds(10000), &error));
  joiner.join();
  EXPECT_TRUE(error.ok());
  EXPECT_TRUE(join.joined());

  join.Reset();
  EXPECT_FALSE(join.joined());
  join.Fail(Status::Unavailable("refused: wrong token"));
  join.Fail(Status::Unavailable("timed out"));
  ASSERT_TRUE(join.WaitFor(milliseconds(10), &error));
  EXPECT_EQ(error.message(), "refused: wrong token");
  EXPECT_EQ(join.Wait().message(), "refused: wrong token");
}

TEST(JoinState, GivingUpIsOnceAndKeepsTheFirstReason) {
  JoinState join;
  EXPECT_FALSE(join.gave_up());
  EXPECT_TRUE(join.GiveUp("the scheduler is gone"));
  EXPECT_FALSE(join.GiveUp("declared dead"));
  EXPECT_TRUE(join.gave_up());
  EXPECT_EQ(join.why_gave_up(), "the scheduler is gone");
  join.Reset();
  EXPECT_FALSE(join.gave_up());
  EXPECT_EQ(join.why_gave_up(), "");
}

TEST(BarrierReleases, AWaitEndsAtTheNextReleaseOfItsKeyOnly) {
  BarrierReleases barriers;
  const BarrierReleases::Key mine{6, 0, 9}, other{6, 0, 11};
  const uint64_t seen = barriers.Count(mine);
  barriers.Release(other);
  std::thread releaser([&] {
    std::this_thread::sleep_for(milliseconds(20));
    barriers.Release(mine);
  });
  EXPECT_TRUE(barriers.WaitBeyond(mine, seen).ok());
  releaser.join();
  EXPECT_EQ(barriers.Count(mine), seen + 1);
  EXPECT_EQ(barriers.Count(other), 1u);
}

TEST(BarrierReleases, FailEndsWaitsNowAndLaterWithTheReason) {
  BarrierReleases barriers;
  const BarrierReleases::Key key{7, 0, 8};
  std::thread failer([&] {
    std::this_thread::sleep_for(milliseconds(20));
    barriers.Fail("the scheduler is gone");
  });
  Status s = barriers.WaitBeyond(key, 0);
  failer.join();
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_EQ(s.message(), "the scheduler is gone");
  EXPECT_FALSE(barriers.WaitBeyond(key, 0).ok()) << "a later wait fails at once";
  barriers.Reset();
  barriers.Release(key);
  EXPECT_TRUE(barriers.WaitBeyond(key, 0).ok());
}

TEST(WorkerInstances, EachNewCustomerIsOneMoreWorkerNamedByTheTable) {
  WorkerInstances instances;
  Node first;  // before the table: no id yet
  first.identity = "h0123";
  instances.Reset(/*first_customer=*/0);
  EXPECT_FALSE(instances.any());
  EXPECT_TRUE(instances.Knows(0));
  EXPECT_FALSE(instances.Add(0, first)) << "the first worker's own customer";
  EXPECT_TRUE(instances.Add(1, first));
  EXPECT_FALSE(instances.Add(1, first)) << "already one";
  EXPECT_TRUE(instances.Add(2, first));
  EXPECT_TRUE(instances.any());
  std::vector<Node> joins = instances.Nodes();
  ASSERT_EQ(joins.size(), 2u);
  EXPECT_EQ(joins[0].instance, 1);
  EXPECT_EQ(joins[1].instance, 2);
  EXPECT_EQ(instances.IdOf(1, 9), kEmpty) << "not named by a table yet";
  EXPECT_FALSE(instances.Has(kEmpty));

  Node a = joins[0], b = joins[1], stranger = joins[0];
  a.id = 11, a.rank = 1;
  b.id = 13, b.rank = 2;
  stranger.identity = "h9999", stranger.id = 15;
  instances.Name({stranger, a, b}, first.identity);
  EXPECT_EQ(instances.IdOf(1, 9), 11);
  EXPECT_EQ(instances.IdOf(2, 9), 13);
  EXPECT_EQ(instances.IdOf(5, 9), 9) << "a customer without an instance is the first's";
  EXPECT_TRUE(instances.Has(13));
  EXPECT_FALSE(instances.Has(15));
}

constexpr int64_t kSecond = 1000000000;

TEST(SchedulerWatch, SilenceAsksAgainThenEndsInGone) {
  SchedulerWatch watch;
  watch.Start(/*interval_s=*/1, /*timeout_s=*/10, 0);
  double seconds = 0;
  int64_t now = 0;
  auto check = [&](int64_t at) {
    now = at;
    return watch.Check(now, /*receiver_busy=*/false, &seconds);
  };
  EXPECT_EQ(check(kSecond), SchedulerWatch::Verdict::kFine);
  EXPECT_EQ(check(2 * kSecond), SchedulerWatch::Verdict::kAskAgain) << "1.5 intervals silent";
  watch.Heard(2 * kSecond);
  EXPECT_EQ(check(3 * kSecond), SchedulerWatch::Verdict::kFine);
  for (int64_t t = 4; t <= 12; ++t) EXPECT_NE(check(t * kSecond), SchedulerWatch::Verdict::kGone);
  EXPECT_EQ(check(13 * kSecond), SchedulerWatch::Verdict::kGone);
  EXPECT_DOUBLE_EQ(seconds, 11.0);
}

TEST(SchedulerWatch, ABusyReceiverIsNotSilenceAndAStallIsForgiven) {
  SchedulerWatch watch;
  watch.Start(1, 10, 0);
  double seconds = 0;
  for (int64_t t = 1; t <= 20; ++t) {
    EXPECT_EQ(watch.Check(t * kSecond, /*receiver_busy=*/true, &seconds),
              SchedulerWatch::Verdict::kFine);
  }
  // This node did not run for a minute: its own pause, not the scheduler's silence.
  EXPECT_EQ(watch.Check(80 * kSecond, false, &seconds), SchedulerWatch::Verdict::kStalled);
  EXPECT_DOUBLE_EQ(seconds, 60.0);
  EXPECT_DOUBLE_EQ(watch.stalled_for_s(), 60.0);
  EXPECT_EQ(watch.Check(81 * kSecond, false, &seconds), SchedulerWatch::Verdict::kFine);
}

TEST(IdleTrimmer, TrimsOncePerIdleSpellAfterTraffic) {
  IdleTrimmer trimmer;
  const auto t0 = IdleTrimmer::Clock::now();
  trimmer.Start(milliseconds(100), t0);
  EXPECT_FALSE(trimmer.Tick(0, t0 + milliseconds(500))) << "nothing to give back yet";
  EXPECT_FALSE(trimmer.Tick(8 << 20, t0 + milliseconds(600))) << "busy";
  EXPECT_FALSE(trimmer.Tick(8 << 20, t0 + milliseconds(650))) << "idle for 50 ms only";
  EXPECT_TRUE(trimmer.Tick((8 << 20) + 100, t0 + milliseconds(701)));
  EXPECT_FALSE(trimmer.Tick((8 << 20) + 200, t0 + milliseconds(900))) << "once per spell";
  EXPECT_FALSE(trimmer.Tick(16 << 20, t0 + milliseconds(950)));
  EXPECT_TRUE(trimmer.Tick(16 << 20, t0 + milliseconds(1100)));
}

TEST(IdleTrimmer, ABarrierAfterTrafficTrimsAtOnceButAtMostOncePerPeriod) {
  IdleTrimmer trimmer;
  const auto t0 = IdleTrimmer::Clock::now();
  trimmer.Start(milliseconds(100), t0);
  EXPECT_FALSE(trimmer.AtBarrier(0, t0 + milliseconds(10))) << "no traffic yet";
  EXPECT_TRUE(trimmer.AtBarrier(8 << 20, t0 + milliseconds(20))) << "right after traffic";
  EXPECT_FALSE(trimmer.AtBarrier(16 << 20, t0 + milliseconds(60))) << "40 ms after the last";
  // The traffic before the refused barrier still counts.
  EXPECT_TRUE(trimmer.AtBarrier(16 << 20, t0 + milliseconds(130)));
  EXPECT_FALSE(trimmer.Tick(16 << 20, t0 + milliseconds(500))) << "given back already";
  EXPECT_FALSE(trimmer.AtBarrier(16 << 20, t0 + milliseconds(510))) << "no traffic since";
  EXPECT_TRUE(trimmer.AtBarrier(24 << 20, t0 + milliseconds(600)));
  EXPECT_FALSE(trimmer.AtBarrier(32 << 20, t0 + milliseconds(640)));
  // The ticks see the traffic after the last trim as theirs.
  EXPECT_FALSE(trimmer.Tick(32 << 20, t0 + milliseconds(700))) << "busy since the last tick";
  EXPECT_FALSE(trimmer.Tick(32 << 20, t0 + milliseconds(750))) << "idle 50 ms only";
  EXPECT_TRUE(trimmer.Tick(32 << 20, t0 + milliseconds(801))) << "idle 101 ms";
}

TEST(IdleTrimmer, FrequentBarriersDoNotHideTrafficFromEither) {
  // Barriers every 50 ms with 900 KiB between them for 5 s, then idle: the barriers
  // trim at most once per period, and the idle check still trims after the last.
  IdleTrimmer trimmer;
  const auto t0 = IdleTrimmer::Clock::now();
  trimmer.Start(milliseconds(1000), t0);
  uint64_t bytes = 0;
  int barrier_trims = 0;
  int tick_trims = 0;
  for (int ms = 50; ms <= 5000; ms += 50) {
    bytes += 900 << 10;
    if (trimmer.AtBarrier(bytes, t0 + milliseconds(ms))) ++barrier_trims;
    if (ms % 500 == 0 && trimmer.Tick(bytes, t0 + milliseconds(ms))) ++tick_trims;
  }
  EXPECT_GE(barrier_trims, 4);
  EXPECT_LE(barrier_trims, 5);
  EXPECT_EQ(tick_trims, 0) << "busy all along";
  EXPECT_FALSE(trimmer.Tick(bytes, t0 + milliseconds(5500)));
  bool idle_trim = false;
  for (int ms = 6000; ms <= 8000 && !idle_trim; ms += 500) {
    idle_trim = trimmer.Tick(bytes, t0 + milliseconds(ms));
  }
  EXPECT_TRUE(idle_trim || barrier_trims == 5) << "the last phases' traffic went back";
}

TEST(IdleTrimmer, ACountThatGoesBackwardsIsANewVanNotTraffic) {
  IdleTrimmer trimmer;
  const auto t0 = IdleTrimmer::Clock::now();
  trimmer.Start(milliseconds(100), t0);
  EXPECT_TRUE(trimmer.AtBarrier(64 << 20, t0 + milliseconds(200)));
  // A new van counting from zero, or a stale look taken before a later one.
  EXPECT_FALSE(trimmer.AtBarrier(1 << 10, t0 + milliseconds(400)));
  EXPECT_FALSE(trimmer.Tick(2 << 10, t0 + milliseconds(500)));
  EXPECT_FALSE(trimmer.Tick(3 << 10, t0 + milliseconds(700)));
  EXPECT_FALSE(trimmer.AtBarrier(4 << 10, t0 + milliseconds(800)));
  EXPECT_TRUE(trimmer.AtBarrier(8 << 20, t0 + milliseconds(900)));
}

TEST(DropInjector, DropsTheRateGivenRepeatablyFromItsSeed) {
  auto draws = [](double rate, uint64_t seed) {
    DropInjector drops;
    drops.Reset(rate, seed);
    std::vector<bool> out;
    for (int i = 0; i < 10000; ++i) out.push_back(drops.ShouldDrop());
    EXPECT_EQ(drops.drops(), static_cast<uint64_t>(std::count(out.begin(), out.end(), true)));
    return out;
  };
  std::vector<bool> a = draws(0.2, 7), b = draws(0.2, 7), none = draws(0, 7);
  EXPECT_EQ(a, b);
  const auto dropped = std::count(a.begin(), a.end(), true);
  EXPECT_GT(dropped, 1700);
  EXPECT_LT(dropped, 2300);
  EXPECT_EQ(std::count(none.begin(), none.end(), true), 0);
}

TEST(InboundChannel, HoldsDataBeforeTheTableInOrderAndResetEmptiesIt) {
  InboundChannel channel;
  channel.Reset(/*resend=*/true, /*window=*/16);
  std::lock_guard<std::mutex> lock(channel.mu());
  ASSERT_NE(channel.sequencer(), nullptr);
  for (uint64_t i = 0; i < 3; ++i) {
    Message m;
    m.meta.timestamp = static_cast<int>(i);
    m.AddData(SArray<uint64_t>{i});
    ASSERT_TRUE(channel.HoldUnverified(m));
  }
  EXPECT_TRUE(channel.has_unverified());
  std::deque<Message> held = channel.TakeUnverified();
  ASSERT_EQ(held.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(held[i].meta.timestamp, i);
  EXPECT_FALSE(channel.has_unverified());
}

TEST(InboundChannel, WithoutResendThereIsNoSequencer) {
  InboundChannel channel;
  channel.Reset(/*resend=*/false, 16);
  std::lock_guard<std::mutex> lock(channel.mu());
  EXPECT_EQ(channel.sequencer(), nullptr);
  EXPECT_EQ(channel.held_out_of_order(), 0u);
}

}  // namespace
}  // namespace ps
