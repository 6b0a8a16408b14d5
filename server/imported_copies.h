// ImportedCopies: the push ids other servers sent this one with their keys (a new
// server catching up, or a live one taking a leaving server's keys over), kept apart
// by the sender (docs/fault-tolerance.md, "Catch-up").
//
// A sender's ids name the pushes it took before its cut: their updates are in the keys
// it sent, not in those another server sent. So a push that comes again is a duplicate
// for a key when the ids of the server that sent that key name it, never because
// another sender's do (a push a replica took as a copy before its cut may reach this
// server from its owner after the owner's cut: it is not in the owner's keys, and
// dropping it would lose it). OptimizerServer::HeldFromCatchUps asks key by key.
//
// Each sender's ids are bounded like AppliedCopies'. A new process at a sender's node
// (a dead one's place) starts afresh: Add with another identity forgets the old ids.
//
// Thread safety: all methods may be called from any thread.
#ifndef HERDPS_SERVER_IMPORTED_COPIES_H_
#define HERDPS_SERVER_IMPORTED_COPIES_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "applied_copies.h"

namespace ps {

class ImportedCopies {
 public:
  // Records what node `sender` (process `identity`) sent.
  void Add(int sender, const std::string& identity,
           const std::vector<AppliedCopies::Record>& records);
  // Which of keys[0, n) node `sender` sent as taken under `id`: as AppliedCopies::Covered.
  size_t Covered(int sender, const AppliedCopies::Id& id, const uint64_t* keys, size_t n,
                 std::vector<uint8_t>* before) const;
  // Whether any sender's ids name `id` (for any of its keys).
  bool Knows(const AppliedCopies::Id& id) const;
  // Every record kept, of every sender (sent on when this server is a sender in turn:
  // its keys hold those updates).
  std::vector<AppliedCopies::Record> Records() const;
  // Forgets node `node`'s ids unless they came from process `identity`.
  void KeepOnly(int node, const std::string& identity);

 private:
  struct Sender {
    std::string identity;
    std::unique_ptr<AppliedCopies> ids;
  };
  mutable std::mutex mu_;
  std::map<int, Sender> senders_;  // by node id
};

}  // namespace ps

#endif  // HERDPS_SERVER_IMPORTED_COPIES_H_
