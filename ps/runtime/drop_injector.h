// DropInjector: PS_DROP_RATE, received messages dropped at random (before anything
// looks at them) so that tests exercise the resend path. Part of the Postoffice's
// receive path; internal to the runtime.
//
// Thread safety: ShouldDrop from any thread (both receive threads share it); Reset
// before the van starts.
#ifndef HERDPS_PS_RUNTIME_DROP_INJECTOR_H_
#define HERDPS_PS_RUNTIME_DROP_INJECTOR_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>

namespace ps {

class DropInjector {
 public:
  // Drops a `rate` share of messages (0: none), drawing from `seed`.
  void Reset(double rate, uint64_t seed);
  // Whether to drop the message at hand; counts the drops.
  bool ShouldDrop();
  uint64_t drops() const { return drops_.load(std::memory_order_relaxed); }

 private:
  double rate_ = 0;
  std::mutex mu_;  // guards rng_
  std::mt19937_64 rng_;
  std::atomic<uint64_t> drops_{0};
};

}  // namespace ps

#endif  // HERDPS_PS_RUNTIME_DROP_INJECTOR_H_
