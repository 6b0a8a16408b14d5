// KeyListStore: the key lists a server keeps for key caching (docs/pipeline.md, "Keys
// on the wire"). A worker that sends a key list gives it an id; when it sends the same
// list to the same server again it sends only the id, and the server takes the list it
// kept. The store is bounded: the least recently used lists go first, and a request
// naming a list that is not (or no longer) kept is answered key_list_unknown, so the
// worker sends the keys again.
//
// Lists are kept per sending worker: node id, customer id and the customer's random
// incarnation (a new KVWorker, or a restarted process, never meets its predecessor's
// lists).
//
// Thread safety: all members take an internal lock; call from any thread.
#ifndef PS_INTERNAL_KEY_LIST_STORE_H_
#define PS_INTERNAL_KEY_LIST_STORE_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <list>
#include <mutex>
#include <unordered_map>

#include "ps/base.h"
#include "ps/sarray.h"

namespace ps {

class KeyListStore {
 public:
  struct ListId {
    int sender = 0;
    uint64_t incarnation = 0;  // the customer's (Meta::incarnation)
    int customer = 0;
    uint64_t id = 0;
    bool operator==(const ListId& o) const {
      return sender == o.sender && incarnation == o.incarnation &&
             customer == o.customer && id == o.id;
    }
  };

  // Workers name lists of at least this many keys; shorter ones are not kept (a
  // request may ask, but only a faulty or hostile sender would).
  static constexpr size_t kMinKeys = 3;
  // What each kept list costs besides its keys (its entries in the list and the map),
  // counted against the bound so that many tiny lists cannot outgrow it.
  static constexpr size_t kEntryBytes = 128;
  // Lists under this many bytes are copied when kept, so that a view does not pin the
  // larger receive buffer the keys arrived in.
  static constexpr size_t kCopyBelowBytes = size_t{64} << 10;

  // Keeps at most `max_bytes` in all (8 bytes a key plus kEntryBytes a list); 0 keeps
  // nothing.
  explicit KeyListStore(size_t max_bytes) : max_bytes_(max_bytes) {}

  // The list kept under `id` (a shared view, no copy), made the most recently used;
  // false when none is.
  bool Find(const ListId& id, SArray<Key>* keys);
  // Keeps `keys` under `id` (shared; copied under kCopyBelowBytes), replacing what was
  // there, dropping the least recently used lists until it fits; a list over the bound,
  // or of fewer than kMinKeys keys, is not kept.
  void Put(const ListId& id, const SArray<Key>& keys);

  size_t bytes() const;
  size_t lists() const;

 private:
  struct IdHash {
    size_t operator()(const ListId& id) const;
  };
  struct Entry {
    ListId id;
    SArray<Key> keys;
  };
  static size_t Cost(const SArray<Key>& keys);
  void EraseLocked(std::list<Entry>::iterator it);

  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<ListId, std::list<Entry>::iterator, IdHash> by_id_;
  size_t bytes_ = 0;
};

}  // namespace ps

#endif  // PS_INTERNAL_KEY_LIST_STORE_H_
