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
  for (int rank : servers_) rank_bound_ = std::max(rank_bound_, rank + 1);
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
  IndexPoints();
}

void ConsistentHashRing::IndexPoints() {
  const size_t buckets = size_t{1} << kBucketBits;
  bucket_start_.assign(buckets + 1, static_cast<uint32_t>(points_.size()));
  size_t at = 0;
  for (size_t b = 0; b < buckets; ++b) {
    const uint64_t start = static_cast<uint64_t>(b) << (64 - kBucketBits);
    while (at < points_.size() && points_[at].first < start) ++at;
    bucket_start_[b] = static_cast<uint32_t>(at);
  }
  bucket_owner_.assign(buckets, -1);
  for (size_t b = 0; b < buckets && !points_.empty(); ++b) {
    const uint32_t first = bucket_start_[b];
    if (first != bucket_start_[b + 1]) continue;  // a point inside: owners differ
    bucket_owner_[b] = points_[first == points_.size() ? 0 : first].second;
  }
}

size_t ConsistentHashRing::PointAtOrAfter(uint64_t h) const {
  const size_t b = static_cast<size_t>(h >> (64 - kBucketBits));
  size_t at = bucket_start_[b];
  const size_t end = bucket_start_[b + 1];
  while (at < end && points_[at].first < h) ++at;
  return at == points_.size() ? 0 : at;
}

ConsistentHashRing ConsistentHashRing::Ranges(int num_servers) {
  ConsistentHashRing ranges;
  ranges.placement_ = kRanges;
  for (int i = 0; i < num_servers; ++i) ranges.servers_.push_back(i);
  ranges.rank_bound_ = std::max(num_servers, 0);
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

ConsistentHashRing ConsistentHashRing::WithFailover(int replication,
                                                    const std::vector<int>& dead_ranks) const {
  ConsistentHashRing ring = *this;
  ring.replication_ = std::max(replication, 1);
  ring.dead_.clear();
  if (ring.replication_ < 2 || dead_ranks.empty()) return ring;
  int max_rank = 0;
  for (int rank : servers_) max_rank = std::max(max_rank, rank);
  ring.dead_.assign(static_cast<size_t>(max_rank) + 1, false);
  for (int rank : dead_ranks) {
    if (rank >= 0 && rank <= max_rank) ring.dead_[static_cast<size_t>(rank)] = true;
  }
  return ring;
}

std::vector<int> ConsistentHashRing::FailedOverRanks() const {
  std::vector<int> ranks;
  for (size_t rank = 0; rank < dead_.size(); ++rank) {
    if (dead_[rank]) ranks.push_back(static_cast<int>(rank));
  }
  return ranks;
}

int ConsistentHashRing::FirstLive(const std::vector<int>& replicas) const {
  for (int rank : replicas) {
    if (static_cast<size_t>(rank) >= dead_.size() || !dead_[static_cast<size_t>(rank)]) return rank;
  }
  return replicas.front();
}

int ConsistentHashRing::ServerOf(Key key) const {
  if (dead_.empty()) return OwnerOf(key);
  // Per key of every request once a server died: no allocation per call.
  thread_local std::vector<int> replicas;
  ReplicasOf(key, replication_, &replicas);
  return FirstLive(replicas);
}

int ConsistentHashRing::ServerOfChunk(Key key, uint32_t chunk) const {
  if (dead_.empty()) return OwnerOfChunk(key, chunk);
  thread_local std::vector<int> replicas;
  ReplicasOfChunk(key, chunk, replication_, &replicas);
  return FirstLive(replicas);
}

void ConsistentHashRing::ServersOf(const Key* keys, size_t n, uint16_t* out) const {
  if (!dead_.empty()) {
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint16_t>(ServerOf(keys[i]));
    return;
  }
  if (placement_ == kRanges) {
    const Key width = kMaxKey / static_cast<Key>(servers_.size());
    const Key last = servers_.size() - 1;
    for (size_t i = 0; i < n; ++i) {
      out[i] = static_cast<uint16_t>(std::min<Key>(keys[i] / width, last));
    }
    return;
  }
  const std::pair<uint64_t, int>* points = points_.data();
  const uint32_t* starts = bucket_start_.data();
  const int32_t* owners = bucket_owner_.data();
  const size_t count = points_.size();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = Mix64(keys[i]);
    const size_t b = static_cast<size_t>(h >> (64 - kBucketBits));
    if (owners[b] >= 0) {
      out[i] = static_cast<uint16_t>(owners[b]);
      continue;
    }
    size_t at = starts[b];
    const size_t end = starts[b + 1];
    while (at < end && points[at].first < h) ++at;
    out[i] = static_cast<uint16_t>(points[at == count ? 0 : at].second);
  }
}

void ConsistentHashRing::ReplicasOf(Key key, int count, std::vector<int>* out) const {
  out->clear();
  const size_t want = std::min(static_cast<size_t>(std::max(count, 1)), servers_.size());
  if (placement_ == kRanges) {
    const int owner = OwnerOf(key);
    for (size_t i = 0; i < want; ++i) {
      out->push_back(static_cast<int>((static_cast<size_t>(owner) + i) % servers_.size()));
    }
    return;
  }
  DistinctServersFrom(HashKey(key), want, out);
}

uint64_t ConsistentHashRing::ChunkPosition(Key key, uint32_t chunk) {
  // Steps of 2^64 divided by the golden ratio: however many chunks a value has, its
  // chunks' points stay spread around the ring (chunk 0 at the key's own point).
  return HashKey(key) + static_cast<uint64_t>(chunk) * 0x9E3779B97F4A7C15ULL;
}

void ConsistentHashRing::DistinctServersFrom(uint64_t position, size_t want,
                                             std::vector<int>* out) const {
  size_t at = PointAtOrAfter(position);
  for (size_t step = 0; step < points_.size() && out->size() < want; ++step) {
    int rank = points_[(at + step) % points_.size()].second;
    if (std::find(out->begin(), out->end(), rank) == out->end()) out->push_back(rank);
  }
}

void ConsistentHashRing::ReplicasOfChunk(Key key, uint32_t chunk, int count,
                                         std::vector<int>* out) const {
  out->clear();
  const size_t want = std::min(static_cast<size_t>(std::max(count, 1)), servers_.size());
  if (placement_ == kRing) {
    DistinctServersFrom(ChunkPosition(key, chunk), want, out);
    return;
  }
  std::vector<int> order = servers_;
  std::sort(order.begin(), order.end());
  const int first = OwnerOfChunk(key, chunk);
  size_t at = static_cast<size_t>(std::lower_bound(order.begin(), order.end(), first) - order.begin());
  for (size_t i = 0; i < want; ++i) out->push_back(order[(at + i) % order.size()]);
}

int ConsistentHashRing::OwnerOf(Key key) const {
  if (placement_ == kRanges) {
    Key width = kMaxKey / static_cast<Key>(servers_.size());
    return static_cast<int>(std::min<Key>(key / width, servers_.size() - 1));
  }
  return points_[PointAtOrAfter(HashKey(key))].second;
}

int ConsistentHashRing::OwnerOfChunk(Key key, uint32_t chunk) const {
  if (placement_ == kRing) return points_[PointAtOrAfter(ChunkPosition(key, chunk))].second;
  int home = OwnerOf(key);
  if (chunk == 0 || servers_.size() == 1) return home;
  // Ranks in ascending order, so that every node stripes the same way.
  std::vector<int> order = servers_;
  std::sort(order.begin(), order.end());
  size_t at = static_cast<size_t>(std::lower_bound(order.begin(), order.end(), home) - order.begin());
  return order[(at + chunk) % order.size()];
}

}  // namespace ps
