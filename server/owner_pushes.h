// OwnerPushes: the newest pushes a server took from workers as the keys' server (not as
// a copy, nor as a part sent again: AppliedCopies remembers those), so that a catch-up
// can name them too (docs/fault-tolerance.md).
//
// Why: a key sent in a catch-up holds every push its sender took before. A worker whose
// answer to such a push did not come (lost, or still on its way when the sender died or
// left) sends the part again to the key's new server, marked resent; named, it is
// answered there as taken, not applied a second time.
//
// Bounded: the newest kCapacity are kept (a push whose answer is still missing after that
// many newer ones is not named). Only the parts the worker sends again matter: those in
// flight, or whose answers went astray.
//
// Thread safety: none; the data receive thread (where pushes are taken and catch-ups
// list what they name) uses it alone.
#ifndef HERDPS_SERVER_OWNER_PUSHES_H_
#define HERDPS_SERVER_OWNER_PUSHES_H_

#include <cstddef>
#include <vector>

#include "applied_copies.h"

namespace ps {

class OwnerPushes {
 public:
  static constexpr size_t kCapacity = size_t{1} << 16;
  // Records a push taken: its worker, customer, request, chunk, this server's rank and
  // the part's index (as a part sent again names them).
  void Add(const AppliedCopies::Id& id);
  // The pushes kept, oldest first, each for every key of its part (whole records).
  std::vector<AppliedCopies::Record> Records() const;
  size_t size() const { return ring_.size(); }

 private:
  std::vector<AppliedCopies::Id> ring_;  // up to kCapacity; next_ is the oldest once full
  size_t next_ = 0;
};

}  // namespace ps

#endif  // HERDPS_SERVER_OWNER_PUSHES_H_
