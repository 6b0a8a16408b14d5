// FlushTimer: a deadline for coalesced messages that nobody else would send. Internal
// to the van.
//
// A worker that issues a request with nothing else in flight, after earlier requests of
// its own came in windows, lets that request wait in its link's batch for the ones it
// issues next (docs/architecture.md, "Coalescing"). Usually the app then waits, and its
// wait sends the batches. An app that never waits would leave them there: the timer
// calls `flush` once `delay` has passed since Arm, unless Disarm came first.
//
// Cost: the thread starts at the first Arm. While Arms keep coming it sleeps `delay`
// at a time and looks, so an Arm is an atomic exchange with no system call; after
// kLinger without an Arm it sleeps until the next one, which then wakes it. Either way
// `flush` runs `delay` after the Arm (and the time the system takes to wake a thread).
// While a flush that left something backs off, the thread sleeps until the retry is
// due; an Arm that brings it forward wakes it.
//
// Thread safety: Arm and Disarm from any thread. `flush` runs on the timer's own thread
// and must not call back into the timer's Stop. Stop (or the destructor) ends the
// thread; it must not run on that thread.
#ifndef HERDPS_VAN_FLUSH_TIMER_H_
#define HERDPS_VAN_FLUSH_TIMER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "ps/internal/log_limiter.h"

namespace ps {

class FlushTimer {
 public:
  // How long the thread keeps looking every `delay` after the last Arm before it sleeps
  // until the next: one window of requests after another arms it every millisecond or
  // so, and an Arm that finds it looking costs no wake-up.
  static constexpr std::chrono::milliseconds kLinger{50};

  // A flush that leaves something behind is tried again after `delay`, then after twice
  // as long each time it leaves something again, up to `max_retry` (kMaxRetry).
  static constexpr std::chrono::milliseconds kMaxRetry{32};
  // A shorter `delay` is taken as this (the thread would look without pause).
  static constexpr std::chrono::microseconds kMinDelay{50};

  // `flush` returns true when something it should have sent is still there (a peer
  // with no room); what it throws counts as that, and is logged.
  FlushTimer(std::chrono::microseconds delay, std::function<bool()> flush,
             std::chrono::milliseconds max_retry = kMaxRetry);
  ~FlushTimer();
  FlushTimer(const FlushTimer&) = delete;
  FlushTimer& operator=(const FlushTimer&) = delete;

  // `flush` is to run `delay` from now unless Disarm comes first. An earlier deadline
  // still pending stays; a later one (a retry backing off) is brought forward. False
  // when nothing will flush (after Stop, or the thread could not be started): the
  // caller sends what it coalesced itself.
  bool Arm();
  // What Arm asked for is being done (a flush takes the batches). Returns the deadline
  // taken back, for Rearm (0: none was pending). An Arm after it counts again.
  int64_t Disarm();
  // A flush that called Disarm left something behind (a peer with no room): puts back
  // the deadline Disarm returned, so a retry that backs off keeps its pace, or arms one
  // `delay` from now if there was none. An earlier deadline pending meanwhile stays.
  void Rearm(int64_t taken);
  // Ends the thread (a pending deadline is dropped: the caller flushes what is left).
  void Stop();

  // How many times `flush` ran (for tests).
  uint64_t flushes() const { return flushes_.load(std::memory_order_relaxed); }
  // Whether the calling thread is a FlushTimer's (in its `flush`).
  static bool OnTimerThread();

 private:
  void Loop();
  // Makes `at` the time the pending deadline counts from, unless one as early is
  // pending (false). `replaced`: the one it replaced (0: none).
  bool ArmAt(int64_t at, int64_t* replaced);
  // Wakes the thread if it would sleep past the deadline just set: asleep, or waiting
  // for the `replaced` one (a retry backing off).
  void WakeFor(int64_t replaced);
  static int64_t NowNs();

  const std::chrono::microseconds delay_;
  const std::chrono::milliseconds max_retry_;
  const std::function<bool()> flush_;
  // When the pending deadline was armed (steady clock, ns; a retry that backs off is
  // armed in the future); 0: none. The deadline is `delay` after it.
  std::atomic<int64_t> armed_at_{0};
  // The last Arm, pending or not (ns): the thread keeps looking for kLinger after it.
  std::atomic<int64_t> last_arm_{0};
  // The thread sleeps until an Arm wakes it (read by Arm without the mutex).
  std::atomic<bool> sleeping_{false};
  std::atomic<uint64_t> flushes_{0};
  LogLimiter throw_log_;  // flushes that threw
  std::atomic<bool> running_{false};  // the thread runs and Stop has not come (set under mu_)
  std::mutex mu_;  // guards stopping_ and thread_; cv_ waits on it
  std::condition_variable cv_;
  bool stopping_ = false;
  // The thread could not be started (Arm then returns false).
  std::atomic<bool> no_thread_{false};
  std::thread thread_;
};

}  // namespace ps

#endif  // HERDPS_VAN_FLUSH_TIMER_H_
