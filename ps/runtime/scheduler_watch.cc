#include "scheduler_watch.h"

#include "ps/internal/config.h"

namespace ps {

void SchedulerWatch::Start(double interval_s, double timeout_s, int64_t now_ns) {
  interval_s_ = interval_s;
  timeout_s_ = timeout_s;
  heard_ns_.store(now_ns);
  last_check_ns_ = now_ns;
  stalled_for_s_ = 0;
}

SchedulerWatch::Verdict SchedulerWatch::Check(int64_t now_ns, bool receiver_busy,
                                              double* seconds) {
  const double gap = (now_ns - last_check_ns_) / 1e9;
  last_check_ns_ = now_ns;
  if (gap > LivenessStallSeconds(timeout_s_)) {
    // This node itself did not run: the silence it would see is its own. The
    // scheduler gets a new timeout to answer, and says whether it declared this node
    // dead meanwhile.
    stalled_for_s_ = gap;
    heard_ns_.store(now_ns);
    *seconds = gap;
    return Verdict::kStalled;
  }
  if (receiver_busy) {
    heard_ns_.store(now_ns);  // not silent: this node is not reading
    return Verdict::kFine;
  }
  const double silent = (now_ns - heard_ns_.load()) / 1e9;
  *seconds = silent;
  if (silent > timeout_s_) return Verdict::kGone;
  // The heartbeat or its answer may have been lost (they are never resent), so ask
  // again at every check rather than once an interval.
  if (silent > interval_s_ * 1.5) return Verdict::kAskAgain;
  return Verdict::kFine;
}

}  // namespace ps
