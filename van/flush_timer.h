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
// `flush` runs `delay` after the Arm (and the time the system takes to wake a thread;
// up to `delay` more when the Arm came while a retry backed off).
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
  // still pending stays; a later one (a retry backing off) is brought forward. After
  // Stop: does nothing.
  void Arm();
  // What Arm asked for is done (the batches went). An Arm after it counts again.
  void Disarm();
  // Ends the thread (a pending deadline is dropped: the caller flushes what is left).
  void Stop();

  // How many times `flush` ran (for tests).
  uint64_t flushes() const { return flushes_.load(std::memory_order_relaxed); }
  // Whether the calling thread is a FlushTimer's (in its `flush`).
  static bool OnTimerThread();

 private:
  void Loop();
  static int64_t NowNs();

  const std::chrono::microseconds delay_;
  const std::chrono::milliseconds max_retry_;
  const std::function<bool()> flush_;
  // When the pending deadline was armed (steady clock, ns); 0: none.
  std::atomic<int64_t> armed_at_{0};
  // The last Arm, pending or not (ns): the thread keeps looking for kLinger after it.
  std::atomic<int64_t> last_arm_{0};
  // The thread sleeps until an Arm wakes it (read by Arm without the mutex).
  std::atomic<bool> sleeping_{false};
  std::atomic<uint64_t> flushes_{0};
  LogLimiter throw_log_;  // flushes that threw
  std::atomic<bool> running_{false};  // the thread was started (set under mu_)
  std::mutex mu_;  // guards stopping_, no_thread_ and thread_; cv_ waits on it
  std::condition_variable cv_;
  bool stopping_ = false;
  bool no_thread_ = false;  // the thread could not be started (Arm then does nothing)
  std::thread thread_;
};

}  // namespace ps

#endif  // HERDPS_VAN_FLUSH_TIMER_H_
