// SchedulerWatch: whether this node still hears its scheduler (PS_HEARTBEAT_INTERVAL,
// PS_HEARTBEAT_TIMEOUT), and whether this node itself ran meanwhile: a node that was
// stopped or starved of CPU must not take its own pause for the scheduler's silence.
// Part of the Postoffice (liveness); it decides, the Postoffice sends and gives up.
//
// Thread safety: Heard from any thread; Start and Check on the control loop only.
#ifndef HERDPS_PS_RUNTIME_SCHEDULER_WATCH_H_
#define HERDPS_PS_RUNTIME_SCHEDULER_WATCH_H_

#include <atomic>
#include <cstdint>

namespace ps {

class SchedulerWatch {
 public:
  // What a check found.
  enum class Verdict {
    kFine,      // heard from lately, or this node's receiver is busy (not reading)
    kAskAgain,  // an answer is overdue: send a heartbeat now
    kStalled,   // this node did not run for a while: ask whether the job still has it
    kGone,      // silent for longer than the timeout: the scheduler is gone
  };

  // Heartbeats begin now (monotonic ns); the watch forgets what it saw before.
  void Start(double interval_s, double timeout_s, int64_t now_ns);
  // A message came from the scheduler.
  void Heard(int64_t now_ns) { heard_ns_.store(now_ns, std::memory_order_relaxed); }
  // One check at `now_ns`. `receiver_busy`: the control channel's receive thread is
  // handing a message on and reads nothing meanwhile. *seconds is the silence (kGone)
  // or the stall (kStalled).
  Verdict Check(int64_t now_ns, bool receiver_busy, double* seconds);
  // How long this node last found it had not run (0: never), for the message should
  // the scheduler have declared it dead meanwhile. Control loop only.
  double stalled_for_s() const { return stalled_for_s_; }

 private:
  double interval_s_ = 0;
  double timeout_s_ = 0;
  std::atomic<int64_t> heard_ns_{0};  // steady clock, any message from the scheduler
  int64_t last_check_ns_ = 0;         // the previous Check
  double stalled_for_s_ = 0;
};

}  // namespace ps

#endif  // HERDPS_PS_RUNTIME_SCHEDULER_WATCH_H_
