// The restore report: what a server that took a dead server's place tells a worker
// about the state it resumed from, so that the worker can count the pushes it saw
// acknowledged and the restart lost (KVWorker::Restarts, docs/fault-tolerance.md).
//
// It travels as a SimpleApp request of head kRestoreReportHead from the worker's
// KVWorker to the server's KVServer (both SimpleApps of the app), answered with the
// body FormatRestoreReport writes: "checkpoint=<0|1|2> pushes=<n> file=<path>", n being
// the push requests of the asking worker that the restored state holds; checkpoint=2
// says the server caught up from its replicas (replication) and holds every
// acknowledged push (n is then 0 and means nothing).
#ifndef PS_INTERNAL_RESTORE_REPORT_H_
#define PS_INTERNAL_RESTORE_REPORT_H_

#include <cstdint>
#include <string>

namespace ps {

// "RSTR" in ASCII, clear of the small heads apps use.
constexpr int kRestoreReportHead = 0x52535452;

struct RestoreReport {
  bool from_checkpoint = false;  // false: the server started empty
  uint64_t pushes = 0;           // the asking worker's push requests it holds
  std::string file;              // the checkpoint it resumed from
  bool from_replicas = false;    // it caught up from its replicas: nothing was lost
};

std::string FormatRestoreReport(const RestoreReport& report);
// False for a body that is not a restore report (an app's own answer to the head).
bool ParseRestoreReport(const std::string& body, RestoreReport* report);

}  // namespace ps

#endif  // PS_INTERNAL_RESTORE_REPORT_H_
