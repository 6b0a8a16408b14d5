// Consistency: how far apart the workers' clocks may drift. A worker's clock counts
// the KVWorker::Clock() calls it has made (it starts at 0); the job's model, chosen
// once on the scheduler (PS_CONSISTENCY) and handed to every node when it joins, says
// when a worker that ends a clock may begin the next (docs/consistency.md):
//
//   bsp      no worker begins clock c+1 before every live worker has finished clock c
//            (staleness 0); a pull in clock c+1 sees every push of clocks <= c.
//   ssp:S    the fastest worker is never more than S clocks ahead of the slowest live
//            worker; a pull at clock c sees every push of clocks <= c-S-1, and the
//            worker's own pushes.
//   asp      nobody waits (the default; apps that never call Clock() run as before).
//
// Thread safety: a plain value.
#ifndef PS_CONSISTENCY_H_
#define PS_CONSISTENCY_H_

#include <string>

#include "ps/status.h"

namespace ps {

struct ConsistencyModel {
  // Values travel on the wire (control.consistency): never renumber.
  enum Kind { kAsp = 0, kBsp = 1, kSsp = 2 };
  Kind kind = kAsp;
  int staleness = 0;  // kSsp only: the S of ssp:S (0 <= S <= kMaxStaleness)

  static constexpr int kMaxStaleness = 1000000;

  // Parses "bsp", "asp" or "ssp:S" (S a whole number; "ssp:0" gives bsp).
  // InvalidArgument saying what is accepted for anything else.
  static Status Parse(const std::string& text, ConsistencyModel* out);
  // Rebuilds a model from its wire fields; InvalidArgument if they are out of range.
  static Status FromWire(int kind, int staleness, ConsistencyModel* out);
  // "bsp", "ssp:3", "asp".
  std::string ToString() const;

  // Whether workers ever wait for each other (bsp and ssp).
  bool waits() const { return kind != kAsp; }
  // How many clocks a worker may be ahead of the slowest live worker: 0 for bsp.
  int bound() const { return kind == kSsp ? staleness : 0; }
  bool operator==(const ConsistencyModel& o) const {
    return kind == o.kind && bound() == o.bound();
  }
  bool operator!=(const ConsistencyModel& o) const { return !(*this == o); }
};

}  // namespace ps

#endif  // PS_CONSISTENCY_H_
