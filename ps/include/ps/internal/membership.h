// Membership: the job's node table as one immutable, versioned snapshot (nodes with
// their state, and the key ring over the servers). The scheduler owns the truth and
// broadcasts every change; each node swaps its snapshot atomically when a newer
// version arrives.
//
// Thread safety: a MembershipView never changes after it is published, so any number
// of threads may read one. MembershipHolder::Get is lock-free (one atomic load), for
// the data path; Publish is for one thread at a time (the node's control loop).
#ifndef PS_INTERNAL_MEMBERSHIP_H_
#define PS_INTERNAL_MEMBERSHIP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ps/internal/consistent_hash_ring.h"
#include "ps/internal/message.h"

namespace ps {

struct MembershipView {
  uint64_t version = 0;  // 0: not joined yet; grows by one per change
  std::vector<Node> nodes;  // sorted by id, the scheduler first
  // Over every server of the job, dead ones included: keys stay where they were placed,
  // and requests for a dead server's keys fail with Unavailable (no silent data loss).
  ConsistentHashRing ring;

  // The node with this id, or nullptr.
  const Node* Find(int id) const;
  bool IsAlive(int id) const {
    const Node* n = Find(id);
    return n && n->alive();
  }
  // Ids of the nodes in a group (a bit mask of kScheduler / kServerGroup /
  // kWorkerGroup, or a single node id); only the nodes still in the job when
  // `alive_only`.
  std::vector<int> Ids(int node_group, bool alive_only) const;
  int CountAlive(Node::Role role) const;
};

// Holds the current view. Every published view is kept until the holder dies, so a
// pointer from Get stays valid for the life of the process: membership changes are
// rare (at most one per node joining, leaving or dying), and this makes reads free
// of reference counting and locks.
class MembershipHolder {
 public:
  MembershipHolder();
  // The current view; never null (an empty version-0 view before the first Publish).
  const MembershipView* Get() const { return current_.load(std::memory_order_acquire); }
  // Makes `view` current. Returns it.
  const MembershipView* Publish(MembershipView view);
  // Back to an empty version-0 view (a new Start after Finalize).
  void Reset();

 private:
  std::mutex mu_;  // guards history_
  std::vector<std::unique_ptr<MembershipView>> history_;
  std::atomic<const MembershipView*> current_;
};

// Is `id` a server's / a worker's node id (servers are even ids >= 8, workers odd >= 9).
inline bool IsServerId(int id) { return id >= 8 && id % 2 == 0; }
inline bool IsWorkerId(int id) { return id >= 9 && id % 2 == 1; }

}  // namespace ps

#endif  // PS_INTERNAL_MEMBERSHIP_H_
