// The van-private fields of the shared-memory path as the van sees them after
// decoding (proto/meta.proto: ShmOffer, ShmFrame, ShmAnswer). Internal to the van.
#ifndef HERDPS_VAN_SHM_WIRE_H_
#define HERDPS_VAN_SHM_WIRE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ps {

// A sender's offer of a ring: where the receiver finds it (/proc/<pid>/fd/<fd>), its
// size and the token its header must hold.
struct ShmOfferFields {
  uint64_t ring = 0;
  int pid = 0;
  int fd = -1;
  uint64_t bytes = 0;
  std::string token;  // kShmTokenBytes
};

// One data frame carried in the ring: `index` of the message's data frames, its block
// at `offset` with `serial`.
struct ShmFrameRef {
  uint32_t index = 0;
  uint64_t offset = 0;
  uint64_t serial = 0;
  uint64_t length = 0;  // not on the wire: the frame's declared size (set by DecodeMeta)
};

// What a message carries of the shared-memory path.
struct ShmFields {
  bool has_offer = false;
  ShmOfferFields offer;
  uint64_t ring = 0;                // the ring `frames` point into
  std::vector<ShmFrameRef> frames;  // ascending index
  bool empty() const { return !has_offer && frames.empty(); }
};

// A receiver's answer to an offer.
struct ShmAnswerFields {
  uint64_t ring = 0;
  std::string token;
  bool accepted = false;
  std::string reason;
};

constexpr size_t kShmTokenBytes = 16;

}  // namespace ps

#endif  // HERDPS_VAN_SHM_WIRE_H_
