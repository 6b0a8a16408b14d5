// SentKeyLists: the worker's side of key caching (docs/pipeline.md, "Keys on the
// wire"). Each key list sent to a server under an id is remembered (a copy: the
// caller's array may change after the call); a list sent again to the same server goes
// as its id alone. Bounded per server, least recently used first out; a server that
// no longer holds a list answers key_list_unknown, and Forget makes the next send of it
// carry the keys under a new id. Private to worker/.
//
// Thread safety: all members take an internal lock; call from any thread.
#ifndef HERDPS_WORKER_SENT_KEY_LISTS_H_
#define HERDPS_WORKER_SENT_KEY_LISTS_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ps/base.h"

namespace ps {

// A 64-bit hash of keys[0..n), for telling lists apart (two lists with one hash are
// told apart by comparing them where that matters).
uint64_t HashKeys(const Key* keys, size_t n);

class SentKeyLists {
 public:
  // Remembers at most `max_bytes_per_server` of keys (8 bytes a key) per server.
  explicit SentKeyLists(size_t max_bytes_per_server) : max_bytes_(max_bytes_per_server) {}
  // The bound: a longer list is never remembered.
  size_t max_bytes() const { return max_bytes_; }

  struct Use {
    uint64_t id = 0;     // 0: not cached (the list is over the bound): send it without id
    bool known = false;  // the server got the list under `id` before: send the id alone
  };
  // keys[0..n) for server `rank`: the id it already has them under, or a new id under
  // which they are remembered from now on (send the keys with it).
  Use Lookup(int rank, const Key* keys, size_t n);
  // Server `rank` does not hold list `id`: the next Lookup of its keys gives a new id.
  void Forget(int rank, uint64_t id);

 private:
  struct Entry {
    uint64_t hash = 0;
    uint64_t id = 0;
    std::vector<Key> keys;
  };
  struct Server {
    std::list<Entry> lru;  // most recent first
    std::unordered_map<uint64_t, std::list<Entry>::iterator> by_hash;
    std::unordered_map<uint64_t, std::list<Entry>::iterator> by_id;
    size_t bytes = 0;
  };
  void Erase(Server* server, std::list<Entry>::iterator it);

  const size_t max_bytes_;
  std::mutex mu_;
  std::unordered_map<int, Server> servers_;
  uint64_t next_id_ = 1;
};

}  // namespace ps

#endif  // HERDPS_WORKER_SENT_KEY_LISTS_H_
