#include "sent_key_lists.h"

#include <algorithm>
#include <iterator>

namespace ps {

// Four independent lanes, so that the multiplications overlap instead of waiting for
// each other.
uint64_t HashKeys(const Key* keys, size_t n) {
  constexpr uint64_t kMul = 0xFF51AFD7ED558CCDULL;
  uint64_t h[4] = {0x9E3779B97F4A7C15ULL ^ n, 0xC2B2AE3D27D4EB4FULL, 0x165667B19E3779F9ULL,
                   0x27D4EB2F165667C5ULL};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int j = 0; j < 4; ++j) {
      h[j] = (h[j] ^ keys[i + j]) * kMul;
      h[j] ^= h[j] >> 32;
    }
  }
  for (; i < n; ++i) {
    h[0] = (h[0] ^ keys[i]) * kMul;
    h[0] ^= h[0] >> 32;
  }
  uint64_t out = h[0];
  for (int j = 1; j < 4; ++j) out = (out ^ h[j]) * kMul;
  return out ^ (out >> 29);
}

SentKeyLists::Use SentKeyLists::Lookup(int rank, const Key* keys, size_t n) {
  const size_t bytes = n * sizeof(Key);
  if (bytes > max_bytes_) return Use{};  // never kept: no need to hash it
  const uint64_t hash = HashKeys(keys, n);
  std::lock_guard<std::mutex> lock(mu_);
  Server& server = servers_[rank];
  auto found = server.by_hash.find(hash);
  if (found != server.by_hash.end()) {
    auto it = found->second;
    if (it->keys.size() == n && std::equal(keys, keys + n, it->keys.begin())) {
      server.lru.splice(server.lru.begin(), server.lru, it);
      return Use{it->id, true};
    }
    Erase(&server, it);  // another list with the same hash: the newer one stays
  }
  while (server.bytes + bytes > max_bytes_ && !server.lru.empty()) {
    Erase(&server, std::prev(server.lru.end()));
  }
  server.lru.push_front(Entry{hash, next_id_++, std::vector<Key>(keys, keys + n)});
  server.by_hash[hash] = server.lru.begin();
  server.by_id[server.lru.front().id] = server.lru.begin();
  server.bytes += bytes;
  return Use{server.lru.front().id, false};
}

void SentKeyLists::Forget(int rank, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto s = servers_.find(rank);
  if (s == servers_.end()) return;
  auto it = s->second.by_id.find(id);
  if (it != s->second.by_id.end()) Erase(&s->second, it->second);
}

void SentKeyLists::Erase(Server* server, std::list<Entry>::iterator it) {
  server->bytes -= it->keys.size() * sizeof(Key);
  server->by_hash.erase(it->hash);
  server->by_id.erase(it->id);
  server->lru.erase(it);
}

}  // namespace ps
