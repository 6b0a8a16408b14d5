// ServerRestart: what a worker learns about a server that died and came back as a new
// process in its place (restarted from its checkpoint, or empty), as
// KVWorker::Restarts reports it. See docs/fault-tolerance.md.
//
// Counts are this worker's push requests to that server (the part of a push that went
// to it: one per push, or one per chunk of a chunked value), not keys or values. The
// server counts by worker node and app, so the counts are exact for one KVWorker per
// app in a worker node (several KVWorkers of one app in one node share the server's
// count).
#ifndef PS_SERVER_RESTART_H_
#define PS_SERVER_RESTART_H_

#include <cstdint>
#include <string>

#include "ps/status.h"

namespace ps {

struct ServerRestart {
  int server = -1;               // its rank
  // The new process's answer to the report's question; when it failed, the counts
  // below other than `acknowledged` are unknown (0): Unimplemented from a server app
  // that is not an OptimizerServer or resumed from a checkpoint older than format 3
  // (reported once); another failure (the server app not serving yet, the process
  // gone again) is reported and asked again at the next call.
  Status status;
  bool from_checkpoint = false;  // false: it started empty and holds nothing
  // Replication: it caught up from the live servers, so it holds every acknowledged push
  // (kept is set to acknowledged; nothing lost).
  bool from_replicas = false;
  std::string checkpoint;        // the file it resumed from
  uint64_t acknowledged = 0;     // this worker's pushes the dead process acknowledged
  uint64_t kept = 0;             // this worker's pushes the restored state holds

  // Acknowledged pushes the restart lost (those after the last checkpoint).
  uint64_t lost() const { return acknowledged > kept ? acknowledged - kept : 0; }
  // Pushes this worker saw fail that the restored state holds nevertheless: taken and
  // checkpointed, but their answers died with the process.
  uint64_t applied_unacknowledged() const { return kept > acknowledged ? kept - acknowledged : 0; }
  std::string DebugString() const;
};

}  // namespace ps

#endif  // PS_SERVER_RESTART_H_
