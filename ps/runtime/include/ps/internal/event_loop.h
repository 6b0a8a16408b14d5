// EventLoop: one thread that runs posted tasks and timers, one at a time, so that the
// state they touch needs no lock of its own. A node's control plane runs on one: every
// deadline is a timer here, so it fires when due even when no message arrives.
//
// Order: work runs in the order it became due: a posted task at the moment it was
// posted, a timer at its deadline (a posted task wins a tie). So posted tasks run FIFO,
// timers with equal deadlines run in the order they were armed, and neither kind can
// starve the other: a task that keeps re-posting itself still lets a due timer in.
//
// Thread safety: all methods are thread-safe and may be called from inside a task.
// The loop owns the tasks handed to it and destroys them on its own thread once they
// have run, or on the thread that discards them (Cancel, Stop), never under its lock,
// so a task's captures may call back into the loop when they are destroyed.
#ifndef PS_INTERNAL_EVENT_LOOP_H_
#define PS_INTERNAL_EVENT_LOOP_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "ps/internal/log_limiter.h"

namespace ps {

class EventLoop {
 public:
  using Clock = std::chrono::steady_clock;
  using Task = std::function<void()>;
  using TimerId = uint64_t;  // never 0, never reused by one loop

  // `name` names the thread (first 15 characters, on Linux) and its log lines. Does
  // not start the thread: work handed over before Start waits for it.
  explicit EventLoop(std::string name);
  // Stops. Must not run on the loop's own thread (e.g. by releasing the last owner of
  // the loop inside one of its tasks): a thread cannot join itself.
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Starts the thread. Idempotent; a stopped loop stays stopped.
  void Start();
  // Discards the tasks and timers that have not run, waits for a task in progress, and
  // joins the thread. Idempotent. On the loop's own thread (inside a task) it only
  // marks the loop stopping: the current task finishes, nothing runs after it, and the
  // join happens in the destructor or in a later Stop from another thread.
  void Stop();

  // Runs `task` on the loop thread, after every task posted before it. Ignored once
  // Stop has been called. A task that throws is logged (rate-limited) and forgotten.
  void Post(Task task);

  // Runs `task` once, at `when` or soon after (at once if `when` has passed). Returns
  // an id for Cancel. After Stop the timer is not armed and the id is unknown.
  TimerId RunAt(Clock::time_point when, Task task);
  TimerId RunAfter(Clock::duration delay, Task task);
  // Runs `task` every `period` (> 0) until cancelled; the first run is one period from
  // now. Runs keep to that grid (now + k * period, no drift): when a run finishes late,
  // the ticks that passed are skipped, not made up in a burst, and the next run is at
  // the first tick after the late run finished. A run that throws keeps the timer armed.
  TimerId RunEvery(Clock::duration period, Task task);
  // Disarms timer `id`. Called on the loop thread (from any task, including the
  // timer's own), the timer never runs again once Cancel returns. From another thread,
  // a run already in progress may finish, but the timer never runs after it. Unknown,
  // finished and cancelled ids are ignored.
  void Cancel(TimerId id);

  // True on the loop's own thread.
  bool InLoopThread() const;
  // The timers armed now, not counting one whose task is running (for tests).
  size_t NumTimers() const;

 private:
  // Timers are ordered by (deadline, arming sequence): equal deadlines run in the
  // order they were armed. A periodic timer gets a fresh sequence each time it re-arms.
  using TimerKey = std::pair<Clock::time_point, uint64_t>;
  struct Timer {
    TimerId id;
    Clock::duration period;  // zero for a one-shot timer
    Task task;
  };
  struct PostedTask {
    Clock::time_point posted;  // when it became due, to interleave it with timers
    Task task;
  };
  // One unit of work the loop thread has taken off the queues.
  struct Work {
    TimerId timer_id = 0;  // 0 for a posted task
    Clock::duration period{};
    Clock::time_point deadline;
    Task task;
  };

  void Run();
  // Waits until work is due and moves it into `*work`; false once the loop is stopping.
  // Requires `lock` to hold mu_.
  bool TakeNext(std::unique_lock<std::mutex>& lock, Work* work);
  TimerId Arm(Clock::time_point when, Clock::duration period, Task task);
  void ArmLocked(Clock::time_point when, Timer timer);  // requires mu_
  void RunGuarded(const Task& task);

  const std::string name_;
  std::atomic<std::thread::id> loop_thread_id_{};  // while Run runs; else no thread
  LogLimiter error_log_;

  // Guards the members from here to join_mu_.
  mutable std::mutex mu_;
  std::condition_variable wake_;  // work arrived, a timer was armed, or Stop
  bool started_ = false;
  bool stopping_ = false;
  std::deque<PostedTask> tasks_;
  std::map<TimerKey, Timer> timers_;
  std::unordered_map<TimerId, TimerKey> armed_;  // id -> its key in timers_, for Cancel
  TimerId running_timer_ = 0;                    // the timer whose task runs now, or 0
  bool running_cancelled_ = false;               // Cancel(running_timer_) came while it ran
  TimerId next_id_ = 1;
  uint64_t next_sequence_ = 0;

  std::mutex join_mu_;  // serializes joins of thread_, so two Stops cannot both join
  // Written once by Start under mu_ before stopping_ is set; read by Stop after it.
  std::thread thread_;
};

}  // namespace ps

#endif  // PS_INTERNAL_EVENT_LOOP_H_
