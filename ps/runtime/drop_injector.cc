#include "drop_injector.h"

namespace ps {

void DropInjector::Reset(double rate, uint64_t seed) {
  std::lock_guard<std::mutex> lock(mu_);
  rate_ = rate;
  rng_.seed(seed);
}

bool DropInjector::ShouldDrop() {
  if (rate_ <= 0) return false;
  std::uniform_real_distribution<double> draw(0.0, 1.0);
  std::lock_guard<std::mutex> lock(mu_);
  if (draw(rng_) >= rate_) return false;
  drops_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace ps
