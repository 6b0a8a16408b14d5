#include "straggler.h"

#include <algorithm>
#include <thread>

namespace linear {
namespace {

// Seeded by seed and rank together, so each worker draws its own repeatable sequence
// and no two workers are slowed in lock-step.
std::mt19937_64 Generator(uint64_t seed, int rank) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(rank), 0x5eedu};
  return std::mt19937_64(seq);
}

}  // namespace

Straggler::Straggler(const StragglerOptions& options, int my_rank)
    : options_(options),
      always_(options.rank >= 0 && options.rank == my_rank),
      rng_(Generator(options.seed, my_rank)),
      draw_(std::clamp(options.prob, 0.0, 1.0)) {}

Straggler::Seconds Straggler::DelayFor(Seconds work) {
  bool slowed = always_;
  if (!slowed && options_.rank < 0 && options_.prob > 0) slowed = draw_(rng_);
  if (!slowed) return Seconds(0);
  Seconds delay =
      options_.factor > 0 ? work * (options_.factor - 1) : Seconds(options_.delay_ms / 1000.0);
  if (delay < Seconds(0)) delay = Seconds(0);
  ++slowed_clocks_;
  delayed_seconds_ += delay.count();
  return delay;
}

Straggler::Seconds Straggler::SlowDown(Seconds work) {
  Seconds delay = DelayFor(work);
  if (delay > Seconds(0)) std::this_thread::sleep_for(delay);
  return delay;
}

}  // namespace linear
