// ShmRing: the sending side of one shared-memory ring (shm_segment.h), which the
// sender creates per link to a peer on its host and fills with the payload of large
// frames; the receiver maps the same memory (ShmMapping) and frees each block when
// done. Thread-safe. Internal to the van.
//
// Despite the name, space is not handed out in ring order: an app may keep a view of a
// received frame as long as it likes (a server that stores pushed values by
// reference), so blocks come back in any order. The allocator takes the lowest free
// extent that fits (first fit, coalescing freed neighbours), which reuses the same,
// already-touched pages over and over, and a block held for long costs only its own
// extent rather than stopping the ring behind it.
//
// The sender never reads the receiver's writes other than a block's state word: where
// blocks are and how long they are lives in the sender's own memory.
#ifndef HERDPS_VAN_SHM_RING_H_
#define HERDPS_VAN_SHM_RING_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "ps/status.h"
#include "shm_segment.h"

namespace ps {

class ShmRing {
 public:
  // One allocation: the block at `offset` (of its header), `payload` to write into.
  struct Block {
    uint64_t offset = 0;
    uint64_t serial = 0;
    uint64_t length = 0;
    char* payload = nullptr;
  };

  // A ring of `bytes` (rounded up to whole pages, at least 1 MiB) in a new memfd named
  // shm::kSegmentName, sealed against shrinking and growing, mapped here. A block that
  // stays in flight (published, never claimed: its message was lost) for
  // `stale_after` is taken back when the ring is full. Returns Unavailable naming the
  // system call that failed.
  static Status Create(uint64_t bytes, std::unique_ptr<ShmRing>* out,
                       std::chrono::steady_clock::duration stale_after = std::chrono::minutes(5));
  ~ShmRing();
  ShmRing(const ShmRing&) = delete;
  ShmRing& operator=(const ShmRing&) = delete;

  uint64_t id() const { return id_; }
  const std::string& token() const { return token_; }
  uint64_t bytes() const { return bytes_; }
  // The memfd, until CloseFd (the peer opens it through /proc/<pid>/fd/<fd> while it
  // is open; the mapping alone keeps the memory afterwards). -1 once closed.
  int fd() const;
  void CloseFd();
  // The largest payload one block can hold.
  uint64_t max_payload() const;

  // Reserves a block for `length` (> 0) payload bytes, taking back first whatever the
  // receiver has freed. False when no free extent is large enough now: the caller
  // sends that frame another way. The block is kWriting until Publish or Cancel.
  bool Allocate(uint64_t length, Block* block);
  // The payload is written: the block may be claimed by the peer (kInFlight).
  void Publish(const Block& block);
  // A published block whose descriptor never left after all, back to kWriting: its
  // writer keeps it for a later message (a lent block, ShmLink::Lend).
  void Unpublish(const Block& block);
  // The block's descriptor never left (its message was not sent): free it again.
  void Cancel(const Block& block);

  // Whether any block is on its way to the peer (being written or in flight): space
  // that comes back once the peer has read its messages, unlike blocks it holds.
  bool HasInFlight() const;

  // Gives the memory of the free extents back to the system (their pages read as
  // zeros afterwards, in both processes' mappings): for an idle link, whose ring would
  // otherwise stay resident at its busiest. Returns the bytes released.
  uint64_t ReleaseFreePages();

  // Makes the `bytes` of the ring from `offset` resident now (the whole pages they
  // touch), ahead rather than a page fault per 4 KiB as frames are written in (a first
  // large message would take ~15000 faults per 64 MiB), split over a few threads
  // (PrefaultPages). Best effort: nothing happens where the kernel lacks the call.
  void Prefault(uint64_t offset, uint64_t bytes);

  // Bytes of blocks not yet back (written, in flight or held by the peer).
  uint64_t used_bytes() const;
  size_t used_blocks() const;

 private:
  struct Used {
    uint64_t bytes = 0;
    std::chrono::steady_clock::time_point published;
  };
  ShmRing() = default;
  shm::BlockHeader* HeaderAt(uint64_t offset) const;
  // Moves every block the peer has freed back to free_. Under mu_.
  void ReclaimLocked(bool take_stale_in_flight);
  void FreeExtentLocked(uint64_t offset, uint64_t bytes);
  bool TakeExtentLocked(uint64_t bytes, uint64_t* offset);

  char* base_ = nullptr;
  uint64_t bytes_ = 0;
  uint64_t id_ = 0;
  std::string token_;
  std::chrono::steady_clock::duration stale_after_{};

  mutable std::mutex mu_;  // guards everything below
  int fd_ = -1;
  std::map<uint64_t, uint64_t> free_;  // offset -> bytes, coalesced
  std::map<uint64_t, Used> used_;      // offset -> the block there
  uint64_t used_bytes_ = 0;
  uint64_t next_serial_ = 1;
};

// 16 random bytes and a random non-zero 64-bit id (from the system's generator).
std::string RandomShmToken();
uint64_t RandomShmRingId();

}  // namespace ps

#endif  // HERDPS_VAN_SHM_RING_H_
