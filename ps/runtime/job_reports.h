// JobReports: the scheduler's copy of what each node last reported (NodeReport, with
// every heartbeat and with its leave), with the node table and the scheduler's own
// counters, for the stall report and the metrics endpoint (docs/operability.md).
// Internal to the runtime.
//
// Thread safety: all methods are thread-safe (the control loop writes, the metrics
// endpoint's thread reads snapshots).
#ifndef HERDPS_PS_RUNTIME_JOB_REPORTS_H_
#define HERDPS_PS_RUNTIME_JOB_REPORTS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "node_report.pb.h"
#include "ps/internal/message.h"

namespace ps {

class JobReports {
 public:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    herdps::wire::NodeReport report;
    Clock::time_point at;
  };
  struct Snapshot {
    std::vector<Node> nodes;  // the membership's table, every state
    uint64_t membership_version = 0;
    std::map<int, Entry> reports;  // by node id: the last report of each
    uint64_t barrier_releases = 0;  // barriers the scheduler released
    bool stalled = false;           // a stall report stands (nothing has moved since)
  };

  // A report is a few hundred bytes; one beyond this is refused.
  static constexpr size_t kMaxReportBytes = 64 << 10;

  // Node `id` reported `body` (a serialized NodeReport). False, with nothing kept,
  // when it does not parse or is over kMaxReportBytes.
  bool Update(int id, const std::string& body, Clock::time_point now);
  void SetMembership(const std::vector<Node>& nodes, uint64_t version);
  void CountBarrierRelease();
  void SetStalled(bool stalled);
  Snapshot Get() const;

 private:
  mutable std::mutex mu_;  // guards snapshot_
  Snapshot snapshot_;
};

}  // namespace ps

#endif  // HERDPS_PS_RUNTIME_JOB_REPORTS_H_
