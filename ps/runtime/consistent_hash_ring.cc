#include "ps/internal/consistent_hash_ring.h"

#include <algorithm>

#include "ps/internal/hash.h"

namespace ps {

uint64_t ConsistentHashRing::HashKey(Key key) { return Mix64(key); }

ConsistentHashRing::ConsistentHashRing(int num_servers, int virtual_nodes)
    : ConsistentHashRing(
          [num_servers] {
            std::vector<int> r(std::max(num_servers, 0));
            for (int i = 0; i < num_servers; ++i) r[i] = i;
            return r;
          }(),
          virtual_nodes) {}

ConsistentHashRing::ConsistentHashRing(const std::vector<int>& server_ranks, int virtual_nodes)
    : servers_(server_ranks), virtual_nodes_(std::max(virtual_nodes, 1)) {
  points_.reserve(servers_.size() * virtual_nodes_);
  for (int rank : servers_) {
    for (int v = 0; v < virtual_nodes_; ++v) {
      // The point depends on (rank, v) only, so a server keeps its points when
      // others join or leave. The distinct salt keeps point hashes unrelated to key
      // hashes.
      uint64_t seed = (static_cast<uint64_t>(rank) << 32) ^ static_cast<uint64_t>(v);
      points_.emplace_back(Mix64(Mix64(seed) ^ 0x485244505352494eULL), rank);
    }
  }
  std::sort(points_.begin(), points_.end());
}

ConsistentHashRing ConsistentHashRing::Ranges(int num_servers) {
  ConsistentHashRing ranges;
  ranges.placement_ = kRanges;
  for (int i = 0; i < num_servers; ++i) ranges.servers_.push_back(i);
  return ranges;
}

ConsistentHashRing ConsistentHashRing::Make(Placement placement,
                                            const std::vector<int>& server_ranks,
                                            int virtual_nodes) {
  if (placement != kRanges) return ConsistentHashRing(server_ranks, virtual_nodes);
  // Ranges cover ranks 0..max: every rank of the job owns its range.
  int count = 0;
  for (int rank : server_ranks) count = std::max(count, rank + 1);
  return Ranges(count);
}

int ConsistentHashRing::ServerOf(Key key) const {
  if (placement_ == kRanges) {
    Key width = kMaxKey / static_cast<Key>(servers_.size());
    return static_cast<int>(std::min<Key>(key / width, servers_.size() - 1));
  }
  uint64_t h = HashKey(key);
  auto it = std::lower_bound(points_.begin(), points_.end(), std::make_pair(h, -1));
  if (it == points_.end()) it = points_.begin();
  return it->second;
}

int ConsistentHashRing::ServerOfChunk(Key key, uint32_t chunk) const {
  int home = ServerOf(key);
  if (chunk == 0 || servers_.size() == 1) return home;
  // Ranks in ascending order, so that every node stripes the same way.
  std::vector<int> order = servers_;
  std::sort(order.begin(), order.end());
  size_t at = static_cast<size_t>(std::lower_bound(order.begin(), order.end(), home) - order.begin());
  return order[(at + chunk) % order.size()];
}

}  // namespace ps
