// AppliedCopies: the pushes a server took as a replica's copy or as a part sent again
// after a failover, by the worker request they belong to, and for which of their keys,
// so that a push a worker sends again to the replica that took over a dead server's
// keys is applied once (docs/fault-tolerance.md).
//
// A copy from the part's first server holds every key of the part this server holds:
// once taken, its id stands for every key ("whole"). A part a worker split after a
// failover, and the copies of its pieces, hold some of them: the keys taken are listed,
// and a later message under the same id applies the keys not listed yet (with
// PS_REPLICATION above 2 a piece's copy and another piece of the same part reach one
// server).
//
// Bounded: the newest kCapacity ids are kept (about 150 MiB at most, plus the keys
// listed); a push sent again after that many newer ones is not recognised and is
// applied a second time (counted in evicted_young(): ids dropped while younger than
// kYoung).
//
// Thread safety: all methods may be called from any thread.
#ifndef HERDPS_SERVER_APPLIED_COPIES_H_
#define HERDPS_SERVER_APPLIED_COPIES_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ps {

// What AppliedCopies knows of the takes of one push.
struct EarlierTakes {
  uint64_t last = 0;       // the AppliedCopies::Sequence() of the latest take; 0: none
  int from[2] = {-1, -1};  // the nodes the first two distinct takes came from
  bool from_more = false;  // and more than those
  bool CameFrom(int node) const { return from_more || from[0] == node || from[1] == node; }
};

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
  // An id and the keys taken under it: empty keys stand for every key (whole).
  struct Record {
    Id id;
    std::vector<uint64_t> keys;  // ascending, unique
  };
  // Records that keys[0, n) (ascending, unique) were taken under `id`, or (`whole`) every
  // key of its part. Returns how many of them had been taken under it before; when any
  // had, *before (resized to n) says which. *forgot_young (if given) is set when
  // recording forgot an id younger than kYoung; *known (if given), when `id` was kept
  // already; *earlier (if given) to what is known of its takes before this one. `from`:
  // the node the message came from (a copy's server, a part's worker).
  size_t Take(const Id& id, const uint64_t* keys, size_t n, bool whole,
              std::vector<uint8_t>* before, bool* forgot_young = nullptr,
              bool* known = nullptr, int from = -1, EarlierTakes* earlier = nullptr);
  // Counts the takes so far: a take that comes after a reading of it has a higher
  // sequence than the value read. (A server compares it with when a catch-up's record
  // of a key replaced what it took before for that key.)
  uint64_t Sequence() const;
  // Whether `id` is kept (for any of its keys).
  bool Knows(const Id& id) const;
  // As Take, recording nothing.
  size_t Covered(const Id& id, const uint64_t* keys, size_t n,
                 std::vector<uint8_t>* before) const;
  // Records `record` (a catch-up's), merged with what its id holds already.
  void Add(const Record& record);
  // Every record kept, oldest first (a new server catching up takes them over).
  std::vector<Record> Records() const;
  uint64_t evicted_young() const;

 private:
  struct Hash {
    size_t operator()(const Id& id) const;
  };
  struct Entry {
    Id id;
    std::chrono::steady_clock::time_point at;
  };
  struct Taken {
    std::vector<uint64_t> keys;  // empty: whole
    EarlierTakes takes;
  };
  // Merges `keys` into `listed` (empty: whole, which stays whole) and counts those it
  // held before, marking them in *before.
  static size_t Merge(std::vector<uint64_t>* listed, const uint64_t* keys, size_t n,
                      bool whole, std::vector<uint8_t>* before);
  static size_t Count(const std::vector<uint64_t>& listed, const uint64_t* keys, size_t n,
                      std::vector<uint8_t>* before);
  // Under mu_: a new entry for `id`, evicting the oldest beyond kCapacity.
  Taken* Insert(const Id& id, bool* forgot_young);
  mutable std::mutex mu_;
  std::unordered_map<Id, Taken, Hash> ids_;
  uint64_t takes_ = 0;  // Sequence()
  std::deque<Entry> order_;  // oldest first
  uint64_t evicted_young_ = 0;
};

}  // namespace ps

#endif  // HERDPS_SERVER_APPLIED_COPIES_H_
