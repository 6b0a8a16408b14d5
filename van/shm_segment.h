// The layout of a shared-memory ring segment, as both sides of the shared-memory path
// read it (docs/architecture.md, "Shared memory"). Internal to the van.
//
// A segment is a memfd named "herdps-ring", sealed against shrinking and growing:
//
//   [SegmentHeader, padded to kSegmentHeaderBytes] [block] [block] ... [free space]
//
// and a block is a BlockHeader padded to kBlockHeaderBytes, then the payload, padded
// to kBlockAlign. Blocks start at multiples of kBlockAlign, so every payload is
// 64-byte aligned (enough for every element type a frame can declare).
//
// Who writes what: the sender (the segment's creator) writes the segment header once
// and every block header; the receiver writes only a block's `state` word, with
// atomic operations. Neither side trusts what the other wrote beyond that word: the
// sender keeps its own record of where blocks are, and the receiver checks every
// descriptor against the mapping's bounds before it reads a byte.
#ifndef HERDPS_VAN_SHM_SEGMENT_H_
#define HERDPS_VAN_SHM_SEGMENT_H_

#include <cstdint>

#include "shm_wire.h"

namespace ps {
namespace shm {

constexpr uint64_t kSegmentMagic = 0x676e69722d535048ULL;  // "HPS-ring", little-endian
constexpr uint32_t kSegmentVersion = 1;
constexpr uint64_t kSegmentHeaderBytes = 4096;
constexpr uint32_t kBlockMagic = 0x6b6c4248;  // "HBlk"
constexpr uint64_t kBlockHeaderBytes = 64;
constexpr uint64_t kBlockAlign = 64;
// The largest ring a node makes (PS_SHM_BYTES's upper bound in ps/runtime/config.cc): offers of
// more are refused.
constexpr uint64_t kMaxRingBytes = uint64_t{1} << 36;
// The name memfd_create gives the segment; /proc/<pid>/fd/<fd> of it reads
// "/memfd:herdps-ring (deleted)". The receiver opens nothing else.
constexpr const char kSegmentName[] = "herdps-ring";

struct SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t reserved;
  uint64_t bytes;  // the whole segment
  uint64_t ring;   // the ring's id (ShmOffer.ring)
  char token[kShmTokenBytes];
};
static_assert(sizeof(SegmentHeader) <= kSegmentHeaderBytes, "segment header too large");

// A block's life: the sender takes a free extent (kWriting), copies the payload in and
// publishes it (kInFlight) before the descriptor leaves; the receiver claims it
// (kInFlight -> kHeld, compare-and-swap, so a descriptor is good once) and frees it
// (kFree) when the last view of it goes; the sender then reuses the extent.
enum BlockState : uint32_t { kFree = 0, kInFlight = 1, kHeld = 2, kWriting = 3 };

struct BlockHeader {
  uint32_t magic;
  uint32_t state;   // BlockState; the one word both sides write
  uint64_t serial;  // unique per block of a ring: a descriptor names it
  uint64_t length;  // payload bytes
};
static_assert(sizeof(BlockHeader) <= kBlockHeaderBytes, "block header too large");

inline uint64_t AlignUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// Bytes a block of `length` payload bytes takes in the ring.
inline uint64_t BlockBytes(uint64_t length) {
  return kBlockHeaderBytes + AlignUp(length, kBlockAlign);
}

inline uint32_t LoadState(const BlockHeader* h) {
  return __atomic_load_n(&h->state, __ATOMIC_ACQUIRE);
}
inline void StoreState(BlockHeader* h, uint32_t state) {
  __atomic_store_n(&h->state, state, __ATOMIC_RELEASE);
}
inline bool SwapState(BlockHeader* h, uint32_t from, uint32_t to) {
  return __atomic_compare_exchange_n(&h->state, &from, to, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE);
}

}  // namespace shm
}  // namespace ps

#endif  // HERDPS_VAN_SHM_SEGMENT_H_
