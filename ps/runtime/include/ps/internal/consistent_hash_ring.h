// ConsistentHashRing: places keys on servers.
//
// Each server owns `virtual_nodes` points on a 64-bit ring; a key belongs to the
// server owning the first point at or after the key's hash (wrapping around). With
// many points per server the load is even, and adding or removing one server moves
// only about 1/N of the keys. The placement depends only on the server ranks and the
// number of points, so every worker computes the same ring without talking.
//
// Thread safety: immutable after construction; safe to share across threads.
#ifndef PS_INTERNAL_CONSISTENT_HASH_RING_H_
#define PS_INTERNAL_CONSISTENT_HASH_RING_H_

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

  // The rank of the server that owns `key`.
  int ServerOf(Key key) const;
  // The rank of the server that owns chunk `chunk` of a value stored in chunks
  // (docs/pipeline.md): chunk 0 on the key's own server, chunk c on the c-th server
  // after it in rank order (wrapping around), so a large value's chunks spread evenly
  // over the servers, whatever the placement.
  int ServerOfChunk(Key key, uint32_t chunk) const;

  Placement placement() const { return placement_; }
  bool empty() const { return servers_.empty(); }
  const std::vector<int>& servers() const { return servers_; }
  int virtual_nodes() const { return virtual_nodes_; }

  // The 64-bit hash keys are placed by (a bijective mixer, so distinct keys never
  // collide on the ring's input).
  static uint64_t HashKey(Key key);

 private:
  std::vector<std::pair<uint64_t, int>> points_;  // sorted by position (kRing)
  std::vector<int> servers_;
  int virtual_nodes_ = 0;
  Placement placement_ = kRing;
};

}  // namespace ps

#endif  // PS_INTERNAL_CONSISTENT_HASH_RING_H_
