// RecordSenders: on a server catching up, which server sent it each key's record last, so
// that a push that reaches it again (a part a worker sends again, or a copy) is checked
// against the pushes that server named as held in its records (ImportedCopies), and no
// other's (docs/fault-tolerance.md, "A new server in a dead one's place").
//
// A sender's messages come in rounds: its records (keys ascending), then its end. A round
// that starts again replaces what the sender's round before sent, once it ends (until
// then a key of the round before not sent again yet still names the sender); of two
// senders that sent a key, the round that started later wins. Each key's record also
// keeps when it was taken (AppliedCopies::Sequence), so that a push taken before it for
// that key, which the record replaced, is not taken for held. 24 bytes a key.
//
// Thread safety: none; the caller serialises (OptimizerServer: catch_up_mu_).
#ifndef HERDPS_SERVER_RECORD_SENDERS_H_
#define HERDPS_SERVER_RECORD_SENDERS_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace ps {

class RecordSenders {
 public:
  // A catch-up message from `sender` (records, or its list of pushes): starts its next
  // round if its last one ended.
  void Message(int sender);
  // The keys of records `sender` sent in its current round (chunk -1: a whole value),
  // taken when the copies taken had the sequence `taken_at`.
  void Sent(int sender, uint64_t key, int32_t chunk, uint64_t taken_at = 0);
  // The end of `sender`'s round.
  void End(int sender);
  // The node id of the sender whose latest round sent (key, chunk), or -1 when none did;
  // *taken_at (if given, and one did) to its record's `taken_at`.
  int SenderOf(uint64_t key, int32_t chunk, uint64_t* taken_at = nullptr) const;
  // Forgets every round (a new catch-up begins, or the last one ended long ago).
  void Clear();
  bool empty() const { return rounds_.empty(); }

 private:
  struct Key {
    uint64_t key = 0;
    int32_t chunk = -1;
    uint64_t taken_at = 0;
    bool operator<(const Key& o) const {
      return key < o.key || (key == o.key && chunk < o.chunk);
    }
  };
  // The entry of (key, chunk) in `keys` (sorted), or null.
  static const Key* Find(const std::vector<Key>& keys, const Key& entry);
  struct Round {
    uint64_t order = 0;  // rounds start in this order
    bool open = false;
    // The round before, while this one is open.
    std::vector<Key> previous;
    uint64_t previous_order = 0;
    mutable std::vector<Key> keys;  // ascending once sorted
    mutable bool sorted = true;  // sorted on the first lookup after an out-of-order key
  };
  std::map<int, Round> rounds_;  // by sender
  uint64_t next_order_ = 0;
};

}  // namespace ps

#endif  // HERDPS_SERVER_RECORD_SENDERS_H_
