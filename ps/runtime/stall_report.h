// StallReport: who waits for whom in a job, from the nodes' reports (their waits in
// requests and in Clock()) and the scheduler's pending barriers; and whether a report
// is due: nothing has progressed for PS_STALL_REPORT seconds while nodes wait, once
// per stall (docs/operability.md). Internal to the runtime; the scheduler's.
//
// Thread safety: Describe is a pure function; Due keeps state for one caller (the
// scheduler's control loop).
#ifndef HERDPS_PS_RUNTIME_STALL_REPORT_H_
#define HERDPS_PS_RUNTIME_STALL_REPORT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "job_reports.h"

namespace ps {

class StallReport {
 public:
  using Clock = std::chrono::steady_clock;
  struct PendingBarrier {
    int group = 0;             // kScheduler + kServerGroup + kWorkerGroup bits
    std::set<int> arrived;     // node ids
    std::vector<int> members;  // its live members, by id
  };

  // The report's lines, one per wait (waiters with the same wait for the same nodes
  // share a line), then one per waited-for node that waits in nothing itself or has
  // been silent for more than `silent_after_s` (silent_s(id): seconds since the
  // scheduler last heard from node id). Empty when nobody waits.
  static std::vector<std::string> Describe(const JobReports::Snapshot& snapshot,
                                           const std::vector<PendingBarrier>& barriers,
                                           const std::function<double(int)>& silent_s,
                                           double silent_after_s);

  // Called on every check with the job's progress count (it grows with every data
  // message any node received and every barrier released): true when it has not
  // changed for `stall_s` seconds while `anyone_waits`, once until it changes again.
  bool Due(uint64_t progress, bool anyone_waits, Clock::time_point now, double stall_s);
  // Whether a stall was reported and nothing has moved since.
  bool reported() const { return reported_; }

 private:
  bool started_ = false;
  uint64_t last_progress_ = 0;
  Clock::time_point since_;
  bool reported_ = false;
};

}  // namespace ps

#endif  // HERDPS_PS_RUNTIME_STALL_REPORT_H_
