// ShmReceiver: the rings that peers on this host have offered this van and it has
// mapped, by the routing identity of the connection each offer came on (never by the
// node id a message claims). Used by the data channel's receive thread; Clear may run
// once that thread is gone. Internal to the van.
//
// Memory bound: at most kMaxRingsPerPeer rings per identity (a peer makes a new ring
// when its connection is replaced; the oldest is dropped) and kMaxRings in all (more
// offers are refused, so those peers use the socket). A ring whose sending process has
// ended is dropped kDeadSenderGrace after this van notices (Sweep), so a crashed peer
// leaves nothing mapped here; views the app still holds keep their ring mapped until
// they go.
#ifndef HERDPS_VAN_SHM_RECEIVER_H_
#define HERDPS_VAN_SHM_RECEIVER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>

#include "shm_mapping.h"
#include "shm_wire.h"

namespace ps {

class ShmReceiver {
 public:
  static constexpr size_t kMaxRingsPerPeer = 4;
  static constexpr size_t kMaxRings = 256;
  static constexpr std::chrono::seconds kDeadSenderGrace{5};

  ShmReceiver() = default;
  ~ShmReceiver();
  ShmReceiver(const ShmReceiver&) = delete;
  ShmReceiver& operator=(const ShmReceiver&) = delete;

  // Maps the ring `offer` names for the peer whose connection has `identity`, unless
  // already mapped; the answer to send back on that connection says whether it is.
  ShmAnswerFields HandleOffer(const std::string& identity, const ShmOfferFields& offer);
  // The ring `ring` of `identity`, or nullptr.
  std::shared_ptr<ShmMapping> Find(const std::string& identity, uint64_t ring) const;
  // Drops the rings of senders that ended over kDeadSenderGrace ago. Cheap when called
  // often: looks at most once a second.
  void Sweep();
  // Drops every ring (the van stops).
  void Clear();
  size_t rings() const { return count_; }

 private:
  struct Ring {
    std::shared_ptr<ShmMapping> mapping;
    int pidfd = -1;  // the sender's process, readable once it has ended; -1 if unknown
    std::chrono::steady_clock::time_point ended{};  // when first seen ended
  };
  void Drop(Ring* ring);

  std::unordered_map<std::string, std::deque<Ring>> by_identity_;
  size_t count_ = 0;
  std::chrono::steady_clock::time_point last_sweep_{};
};

}  // namespace ps

#endif  // HERDPS_VAN_SHM_RECEIVER_H_
