// AppliedCopies: the pushes a server took as a replica's copy or as a part sent again
// after a failover, by the worker request they belong to, so that a push a worker
// sends again to the replica that took over a dead server's keys is applied once
// (docs/fault-tolerance.md).
//
// Bounded: the newest kCapacity ids are kept (about 90 MiB at most); a push sent again
// after that many newer ones is not recognised and is applied a second time (counted
// in evicted_young(): ids dropped while younger than kYoung).
//
// Thread safety: all methods may be called from any thread.
#ifndef HERDPS_SERVER_APPLIED_COPIES_H_
#define HERDPS_SERVER_APPLIED_COPIES_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace ps {

class AppliedCopies {
 public:
  static constexpr size_t kCapacity = size_t{1} << 20;
  static constexpr std::chrono::seconds kYoung{60};
  struct Id {
    int worker = 0;        // node id
    int customer = 0;      // the worker's customer id
    uint64_t request = 0;  // its request id
    int32_t chunk = -1;    // the chunk, -1: whole values
    int first_server = 0;  // the rank the worker first sent the part to
    int64_t first_part = 0;  // the part's index in the worker's request
    bool operator==(const Id& o) const {
      return worker == o.worker && customer == o.customer && request == o.request &&
             chunk == o.chunk && first_server == o.first_server && first_part == o.first_part;
    }
  };
  // Records `id`; false when it was recorded already. *forgot_young (if given) is set
  // when recording it forgot an id younger than kYoung.
  bool Insert(const Id& id, bool* forgot_young = nullptr);
  bool Contains(const Id& id) const;
  // Every id kept, oldest first (a new server catching up takes them over).
  std::vector<Id> Ids() const;
  uint64_t evicted_young() const;

 private:
  struct Hash {
    size_t operator()(const Id& id) const;
  };
  struct Entry {
    Id id;
    std::chrono::steady_clock::time_point at;
  };
  mutable std::mutex mu_;
  std::unordered_set<Id, Hash> ids_;
  std::deque<Entry> order_;  // oldest first
  uint64_t evicted_young_ = 0;
};

}  // namespace ps

#endif  // HERDPS_SERVER_APPLIED_COPIES_H_
