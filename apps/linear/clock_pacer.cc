#include "clock_pacer.h"

#include <stdexcept>
#include <string>

namespace linear {

ClockPacer::ClockPacer(ps::KVWorker<float>* kv, ClockEvery every, const StragglerOptions& straggler,
                       int rank)
    : kv_(kv), every_(every), straggler_(straggler, rank), work_start_(SteadyClock::now()) {}

void ClockPacer::StartEpoch() { work_start_ = SteadyClock::now(); }

void ClockPacer::AfterStep() {
  if (every_ == ClockEvery::kBatch) EndClock();
}

void ClockPacer::AfterEpoch() {
  if (every_ == ClockEvery::kEpoch) EndClock();
}

void ClockPacer::Finish() {
  ps::Status s = kv_->FinishClocks();
  if (!s.ok()) throw std::runtime_error("finishing the clocks failed: " + s.ToString());
}

void ClockPacer::EndClock() {
  straggler_.SlowDown(SteadyClock::now() - work_start_);
  ps::Status s = kv_->Clock();
  if (!s.ok()) {
    throw std::runtime_error("ending clock " + std::to_string(clocks_) +
                             " failed: " + s.ToString());
  }
  ++clocks_;
  // The next clock's work starts once this one may begin; the wait is not work.
  work_start_ = SteadyClock::now();
}

}  // namespace linear
