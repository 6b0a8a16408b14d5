// ShmMapping: the receiving side of one shared-memory ring: the peer's segment mapped
// into this process, and the checks every descriptor passes before a byte of it is
// read. Thread-safe: claims happen on the receive thread, releases wherever the last
// view of a frame goes. Internal to the van.
//
// The peer may write into the segment at any time, also after a check, so the checks
// only make reads safe (inside the mapping, the block as described); whether the bytes
// mean anything is for whoever parses them, which is why the van hands out views only
// of frames whose bytes are values (float, double) and copies every other frame out
// before anyone parses it (docs/architecture.md, "Shared memory").
#ifndef HERDPS_VAN_SHM_MAPPING_H_
#define HERDPS_VAN_SHM_MAPPING_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "ps/status.h"
#include "shm_segment.h"
#include "shm_wire.h"

namespace ps {

class ShmMapping {
 public:
  // Maps the ring `offer` names: /proc/<pid>/fd/<fd> must be a memfd named
  // shm::kSegmentName, sealed against shrinking, of exactly offer.bytes, whose header
  // holds the segment magic, the offer's ring id and its token (so a recycled pid, a
  // process of another host or container, or a stale offer are refused). Returns
  // InvalidArgument or Unavailable saying which check failed.
  static Status Open(const ShmOfferFields& offer, std::shared_ptr<ShmMapping>* out);
  // The same checks on an open file descriptor (not taken over); for tests.
  static Status OpenFd(int fd, const ShmOfferFields& offer, std::shared_ptr<ShmMapping>* out);
  ~ShmMapping();
  ShmMapping(const ShmMapping&) = delete;
  ShmMapping& operator=(const ShmMapping&) = delete;

  uint64_t ring() const { return ring_; }
  uint64_t bytes() const { return bytes_; }

  // Claims the block `frame` names for a frame of `length` bytes: its offset must be a
  // block boundary inside the mapping with room for `length`, its header must carry
  // the block magic, the descriptor's serial and `length`, and its state must go from
  // in flight to held (so a descriptor is good once). On success `*payload` points at
  // the bytes, which stay valid while this mapping lives; the caller must Release the
  // block exactly once. InvalidArgument otherwise, and the block is left as it was.
  Status Claim(const ShmFrameRef& frame, uint64_t length, char** payload);
  // Frees a claimed block for the sender to reuse.
  void Release(uint64_t offset, uint64_t length);
  // Bytes of claimed blocks not yet released (views the app still holds).
  uint64_t held_bytes() const { return held_bytes_.load(std::memory_order_relaxed); }

 private:
  ShmMapping() = default;

  char* base_ = nullptr;
  uint64_t bytes_ = 0;
  uint64_t ring_ = 0;
  std::atomic<uint64_t> held_bytes_{0};
};

}  // namespace ps

#endif  // HERDPS_VAN_SHM_MAPPING_H_
