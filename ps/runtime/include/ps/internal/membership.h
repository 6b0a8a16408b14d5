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
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ps/internal/consistent_hash_ring.h"
#include "ps/internal/message.h"

namespace ps {

struct MembershipView {
  uint64_t version = 0;  // 0: not joined yet; grows by one per change
  // The version at which the server now leaving was marked leaving (0: none leaves):
  // it names the leave, so that what belongs to an earlier one is told apart.
  uint64_t leave_version = 0;
  // A dead server whose keys the live servers take over, re-replicating them (its node
  // id; 0: none): named by leave_version like a leave, and off next_ring.
  int retiring = 0;
  std::vector<Node> nodes;  // sorted by id, the scheduler first
  // Over every server of the job, dead ones included: keys stay where they were placed,
  // and requests for a dead server's keys fail with Unavailable (no silent data loss).
  // Servers that are entering (added, still catching up) are not on it yet; one that is
  // leaving still is.
  ConsistentHashRing ring;
  // While a server is entering or leaving (or a dead one retiring): the ring that
  // follows (without the leaving one, with the entering one), by which the servers send the keys it gives a server
  // that does not hold them yet, and the copies of their pushes. Empty otherwise.
  ConsistentHashRing next_ring;

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
  // Sets ring and next_ring from the servers' states (see above), as every node does
  // with every table it takes, so that all place keys alike.
  void PlaceKeys(ConsistentHashRing::Placement placement, int virtual_nodes);
  // The server that is leaving the job (or the dead one retiring), or nullptr.
  const Node* LeavingServer() const;
  // A server is entering or leaving: next_ring is set.
  bool ring_changing() const { return !next_ring.empty(); }
};

// Holds the current view. Readers get a plain pointer (one atomic load, no reference
// counting, for the data path), so a view that is replaced is not freed at once: it is
// kept until `keep_newest` newer views exist and `grace` has passed since it was
// replaced. A pointer from Get (or a reference from a plugin's context) is therefore good
// for the call it was taken for, however long that lasts within reason: do not keep one
// across calls. Memory stays bounded by the views of the last `grace` plus
// `keep_newest`, however many changes a long job sees.
class MembershipHolder {
 public:
  static constexpr size_t kKeepNewest = 16;
  static constexpr std::chrono::seconds kGrace{60};
  explicit MembershipHolder(size_t keep_newest = kKeepNewest,
                            std::chrono::steady_clock::duration grace = kGrace);
  // The current view; never null (an empty version-0 view before the first Publish).
  const MembershipView* Get() const { return current_.load(std::memory_order_acquire); }
  // Makes `view` current, and frees replaced views past both bounds. Returns it.
  const MembershipView* Publish(MembershipView view);
  // Back to an empty version-0 view (a new Start after Finalize).
  void Reset();
  // Views kept, the current one included (for tests).
  size_t kept() const;

 private:
  struct Kept {
    std::unique_ptr<MembershipView> view;
    std::chrono::steady_clock::time_point replaced;  // when a newer one was published
  };
  const size_t keep_newest_;
  const std::chrono::steady_clock::duration grace_;
  mutable std::mutex mu_;  // guards history_
  std::deque<Kept> history_;  // oldest first; the last one is current
  std::atomic<const MembershipView*> current_;
};

// Is `id` a server's / a worker's node id (servers are even ids >= 8, workers odd >= 9).
inline bool IsServerId(int id) { return id >= 8 && id % 2 == 0; }
inline bool IsWorkerId(int id) { return id >= 9 && id % 2 == 1; }

}  // namespace ps

#endif  // PS_INTERNAL_MEMBERSHIP_H_
