// Straggler (apps/linear): who is slowed on which clock, by how much, and that the
// random choice repeats with the seed.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "straggler.h"

namespace linear {
namespace {

using Seconds = Straggler::Seconds;

// Which of `clocks` clocks worker `rank` is slowed on.
std::vector<bool> SlowedClocks(const StragglerOptions& o, int rank, int clocks) {
  Straggler s(o, rank);
  std::vector<bool> slowed;
  for (int c = 0; c < clocks; ++c) slowed.push_back(s.DelayFor(Seconds(0.001)) > Seconds(0));
  return slowed;
}

TEST(LinearStraggler, TheChosenRankIsSlowedOnEveryClockAndNobodyElse) {
  StragglerOptions o;
  o.rank = 2;
  o.delay_ms = 5;
  Straggler chosen(o, 2), other(o, 1);
  for (int c = 0; c < 100; ++c) {
    EXPECT_DOUBLE_EQ(chosen.DelayFor(Seconds(0.001)).count(), 0.005);
    EXPECT_EQ(other.DelayFor(Seconds(0.001)), Seconds(0));
  }
  EXPECT_EQ(chosen.slowed_clocks(), 100);
  EXPECT_NEAR(chosen.delayed_seconds(), 0.5, 1e-9);
  EXPECT_EQ(other.slowed_clocks(), 0);
}

TEST(LinearStraggler, AFactorSleepsFactorMinusOneTimesTheClocksWork) {
  StragglerOptions o;
  o.rank = 0;
  o.factor = 5;
  Straggler s(o, 0);
  EXPECT_DOUBLE_EQ(s.DelayFor(Seconds(0.002)).count(), 0.008);
  EXPECT_DOUBLE_EQ(s.DelayFor(Seconds(0.010)).count(), 0.040);
  o.factor = 1;  // as slow as it is: a slowed clock that sleeps nothing
  Straggler same(o, 0);
  EXPECT_EQ(same.DelayFor(Seconds(0.002)), Seconds(0));
}

TEST(LinearStraggler, RandomSlowdownsFollowTheProbabilityAndRepeatWithTheSeed) {
  StragglerOptions o;
  o.prob = 0.05;
  o.factor = 5;
  o.seed = 7;
  const int clocks = 20000;
  std::vector<bool> a = SlowedClocks(o, 1, clocks);
  EXPECT_EQ(a, SlowedClocks(o, 1, clocks)) << "same seed and rank, same clocks";
  EXPECT_NE(a, SlowedClocks(o, 2, clocks)) << "another rank draws its own clocks";
  o.seed = 8;
  EXPECT_NE(a, SlowedClocks(o, 1, clocks)) << "another seed, other clocks";
  int slowed = 0;
  for (bool s : a) slowed += s;
  EXPECT_NEAR(slowed / static_cast<double>(clocks), 0.05, 0.01);
}

TEST(LinearStraggler, WithoutAStragglerNobodyIsEverSlowed) {
  StragglerOptions o;
  EXPECT_FALSE(o.enabled());
  for (bool s : SlowedClocks(o, 0, 1000)) EXPECT_FALSE(s);
  o.prob = 1;
  o.delay_ms = 1;
  EXPECT_TRUE(o.enabled());
  for (bool s : SlowedClocks(o, 3, 1000)) EXPECT_TRUE(s);
}

TEST(LinearStraggler, SlowDownSleepsTheDelay) {
  StragglerOptions o;
  o.rank = 0;
  o.delay_ms = 20;
  Straggler s(o, 0);
  auto start = std::chrono::steady_clock::now();
  EXPECT_DOUBLE_EQ(s.SlowDown(Seconds(0)).count(), 0.020);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
}

}  // namespace
}  // namespace linear
