// ConsistentHashRing: places keys on servers.
//
// Each server owns `virtual_nodes` points on a 64-bit ring; a key belongs to the
// server owning the first point at or after the key's hash (wrapping around). With
// many points per server the load is even, and adding or removing one server moves
// only about 1/N of the keys. The placement depends only on the server ranks and the
// number of points, so every worker computes the same ring without talking.
//
// A value stored in chunks (PS_CHUNK_BYTES, docs/pipeline.md) places each chunk as a
// key of its own: chunk c at its own point of the ring (ChunkPosition), so that its
// chunks spread over the servers and a server added or removed moves about 1/N of
// them, as of keys. With ranges, chunk c is on the c-th rank after the key's own.
//
// Replication (PS_REPLICATION=R, docs/fault-tolerance.md): a key's replicas, and a
// chunk's, are its owner and the next R-1 distinct servers clockwise from its point
// (ranges: the next ranks). They are fixed by the whole ring, dead servers
// included: the servers that hold a key's history. Once servers are dead
// (WithFailover), a key belongs to its first live replica, so that the server that
// takes over a dead one's keys is the one that holds them.
//
// Thread safety: immutable after construction; safe to share across threads.
#ifndef PS_INTERNAL_CONSISTENT_HASH_RING_H_
#define PS_INTERNAL_CONSISTENT_HASH_RING_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "ps/base.h"

namespace ps {

class ConsistentHashRing {
 public:
  // How keys map to servers (PS_KEY_PLACEMENT): the ring, or ps-lite's equal split of
  // [0, kMaxKey) into one contiguous range per server rank (Ranges()). Values travel
  // on the wire (control.key_placement).
  enum Placement { kRing = 0, kRanges = 1 };

  ConsistentHashRing() = default;
  // A ring over `server_ranks` (distinct, any order). An empty list makes an empty
  // ring, on which ServerOf must not be called.
  ConsistentHashRing(const std::vector<int>& server_ranks, int virtual_nodes);
  // A ring over ranks 0..num_servers-1.
  ConsistentHashRing(int num_servers, int virtual_nodes);

  // ps-lite's placement over ranks 0..num_servers-1: server i owns
  // [kMaxKey / num_servers * i, kMaxKey / num_servers * (i + 1)), the last one up to
  // kMaxKey (ps::Postoffice::GetServerKeyRanges lists them).
  static ConsistentHashRing Ranges(int num_servers);
  // A ring or ranges (see Placement) over `server_ranks`.
  static ConsistentHashRing Make(Placement placement, const std::vector<int>& server_ranks,
                                 int virtual_nodes);

  // This ring with `dead_ranks` failed over (replication >= 2): ServerOf and
  // ServerOfChunk name a key's first live replica (its owner while that lives; the
  // owner, dead, when no replica lives, so that requests fail rather than reach a
  // server without its history). With replication 1 or no dead rank, the ring as is.
  ConsistentHashRing WithFailover(int replication, const std::vector<int>& dead_ranks) const;

  // The rank of the server that owns `key`.
  int ServerOf(Key key) const;
  // ServerOf of keys[0..n) into out[0..n): one call for a whole request, whose loop
  // inlines the hash and the point lookup (a call per key costs as much as the lookup
  // itself at 10 million keys). Every rank must be below 65536.
  void ServersOf(const Key* keys, size_t n, uint16_t* out) const;
  // The rank of the server that owns chunk `chunk` of a value stored in chunks
  // (docs/pipeline.md): on the ring, the owner of the chunk's point (chunk 0's is the
  // key's own); with ranges, chunk c on the c-th rank after the key's own (wrapping).
  int ServerOfChunk(Key key, uint32_t chunk) const;
  // The `count` replicas of `key` (its owner first; at most every server), whatever is
  // dead, into *out (cleared).
  void ReplicasOf(Key key, int count, std::vector<int>* out) const;
  // The same for chunk `chunk` of key: ServerOfChunk's rank, then the next distinct
  // servers clockwise from the chunk's point (ranges: the next ranks).
  void ReplicasOfChunk(Key key, uint32_t chunk, int count, std::vector<int>* out) const;
  int replication() const { return replication_; }
  // Whether some server is dead and its keys fail over (WithFailover).
  bool failed_over() const { return !dead_.empty(); }
  // The ranks failed over (WithFailover), ascending; empty when none is.
  std::vector<int> FailedOverRanks() const;
  // The owner of `key` (of chunk `chunk` of it) by the whole ring, as if no server
  // were dead: the replica that holds its history first.
  int OwnerOf(Key key) const;
  int OwnerOfChunk(Key key, uint32_t chunk) const;

  Placement placement() const { return placement_; }
  bool empty() const { return servers_.empty(); }
  const std::vector<int>& servers() const { return servers_; }
  // One more than the highest rank on the ring (0 when empty): what arrays indexed by
  // the ranks this ring names need, however servers were added.
  int rank_bound() const { return rank_bound_; }
  int virtual_nodes() const { return virtual_nodes_; }

  // The 64-bit hash keys are placed by (a bijective mixer, so distinct keys never
  // collide on the ring's input).
  static uint64_t HashKey(Key key);
  // The ring position of chunk `chunk` of key (chunk 0: HashKey(key)).
  static uint64_t ChunkPosition(Key key, uint32_t chunk);

 private:
  // The index in points_ of the first point at or after ring position h (wrapping to
  // 0): a table lookup and a short scan instead of a binary search, because every key
  // of every request comes here (ps-lite's benchmark sends 10 million at once).
  size_t PointAtOrAfter(uint64_t h) const;
  // Appends to *out the first `want` distinct servers clockwise from `position`.
  void DistinctServersFrom(uint64_t position, size_t want, std::vector<int>* out) const;
  void IndexPoints();

  static constexpr int kBucketBits = 12;
  std::vector<std::pair<uint64_t, int>> points_;  // sorted by position (kRing)
  // bucket_start_[b]: the index of the first point at or after the start of bucket b
  // (the ring's positions split into 2^kBucketBits equal buckets); one more entry,
  // points_.size(), closes the last bucket.
  std::vector<uint32_t> bucket_start_;
  // bucket_owner_[b]: the rank that owns every position of bucket b when no point lies
  // inside it (most buckets: a ring has a few hundred points), else -1. ServersOf then
  // takes one load per key instead of the scan.
  std::vector<int32_t> bucket_owner_;
  // The first live one of `replicas`, or the first when none lives.
  int FirstLive(const std::vector<int>& replicas) const;

  std::vector<int> servers_;
  int rank_bound_ = 0;
  int virtual_nodes_ = 0;
  Placement placement_ = kRing;
  int replication_ = 1;
  std::vector<bool> dead_;  // by rank; empty while no server is dead
};

}  // namespace ps

#endif  // PS_INTERNAL_CONSISTENT_HASH_RING_H_
