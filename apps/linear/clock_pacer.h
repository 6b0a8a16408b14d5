// ClockPacer: ends a linear worker's clocks (KVWorker::Clock) where --clock_every says,
// after slowing the worker first when it is a straggler on that clock. The job's model
// (bsp, ssp:S, asp) then decides whether Clock() waits for the other workers.
//
// The work of a clock (what a straggler factor multiplies) is the time from the start
// of the clock's first step to the end of its last: waits in Clock(), and the barriers
// and evaluation between epochs, are not work.
//
// AfterStep, AfterEpoch and Finish throw std::runtime_error when Clock() or
// FinishClocks() fails (the scheduler is lost). Not thread-safe: the worker's training
// thread owns it.
#pragma once

#include <chrono>
#include <cstdint>

#include "ps/kv_worker.h"
#include "straggler.h"
#include "training_options.h"

namespace linear {

class ClockPacer {
 public:
  // `kv` must outlive the pacer.
  ClockPacer(ps::KVWorker<float>* kv, ClockEvery every, const StragglerOptions& straggler,
             int rank);

  // An epoch's first step begins now.
  void StartEpoch();
  // A step (or, for a worker with fewer rows than others, a step slot it has no data
  // for) is over: under --clock_every batch the clock ends here.
  void AfterStep();
  // The epoch's steps are over: under --clock_every epoch the clock ends here.
  void AfterEpoch();
  // This worker ends no more clocks, so nobody waits for it (KVWorker::FinishClocks).
  void Finish();

  int64_t clocks() const { return clocks_; }
  const Straggler& straggler() const { return straggler_; }

 private:
  using SteadyClock = std::chrono::steady_clock;
  void EndClock();

  ps::KVWorker<float>* kv_;
  ClockEvery every_;
  Straggler straggler_;
  SteadyClock::time_point work_start_;
  int64_t clocks_ = 0;
};

}  // namespace linear
