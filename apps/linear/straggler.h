// Straggler: slows this worker on chosen clocks, for experiments with the consistency
// models (a slow worker is what BSP waits for and SSP tolerates up to its bound).
//
// A worker is slowed on a clock when it is the chosen straggler (every clock), or with
// probability `prob` per clock (each worker draws for itself from a generator seeded by
// the seed and its rank, so a run repeats). A slowed clock sleeps `delay_ms`, or
// (factor - 1) times the clock's own work, so the clock takes `factor` times as long.
//
// Plain C++, no HerdPS dependency. Not thread-safe: one worker thread owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace linear {

struct StragglerOptions {
  int rank = -1;        // this rank is slowed on every clock; -1: none
  double prob = 0;      // else each worker is slowed with this probability per clock
  double factor = 0;    // a slowed clock takes factor x its work (>= 1); 0: use delay_ms
  double delay_ms = 0;  // a slowed clock sleeps this long (> 0) when factor is 0
  uint64_t seed = 1;    // with the worker's rank, seeds the draws of `prob`

  // Whether anybody is ever slowed.
  bool enabled() const { return rank >= 0 || prob > 0; }
};

class Straggler {
 public:
  using Seconds = std::chrono::duration<double>;

  // The straggler behaviour of worker `my_rank`. The options must be valid (see
  // ValidateTrainingFlags): this class does not check them.
  Straggler(const StragglerOptions& options, int my_rank);

  // Decides whether the clock whose work took `work` is slowed and returns how long to
  // sleep for it (zero when it is not). Draws one random number per call under `prob`.
  Seconds DelayFor(Seconds work);

  // DelayFor, then sleeps that long; returns the time asked for.
  Seconds SlowDown(Seconds work);

  int slowed_clocks() const { return slowed_clocks_; }
  double delayed_seconds() const { return delayed_seconds_; }

 private:
  StragglerOptions options_;
  bool always_ = false;  // this worker is the chosen straggler
  std::mt19937_64 rng_;
  std::bernoulli_distribution draw_;
  int slowed_clocks_ = 0;
  double delayed_seconds_ = 0;
};

}  // namespace linear
