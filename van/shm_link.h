// ShmLink: the shared-memory path of one link (this process to one peer on the data
// channel) as its sender sees it: the ring, and where the negotiation with the peer
// stands. ShmSend: what of one message goes through that ring. Thread-safe (ShmLink);
// a ShmSend belongs to the thread sending its message. Internal to the van.
//
// Negotiation, lazily, with the first message that has a large frame: the offer goes
// alone just ahead of it (PlanOfferAlone), and that message waits briefly for the
// answer (ZmqVan::OfferRingAhead); a message larger than the size limit allows an
// offer beside carries it itself.
//
//   kUnoffered --(the offer is planned)--> kOffering --(it was sent)--> kOffered
//   kOffered --(the peer's answer: accept)--> kAccepted   (frames go through the ring)
//   kOffered --(the peer's answer: refuse)--> kRefused    (the socket, for good)
//
// The answer comes back on the link's own connection (the van reads it when it next
// sends a large frame there). Until kAccepted every frame travels on the socket, and so
// does any frame the ring has no room for (after a short wait for blocks in flight to
// come back, see AwaitRoom).
//
// Lent blocks (Lend): a sender that knows a message's frame sizes before it fills them
// (a push split by server) writes them straight into ring blocks, which Plan then
// publishes without the copy.
#ifndef HERDPS_VAN_SHM_LINK_H_
#define HERDPS_VAN_SHM_LINK_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ps/internal/message.h"
#include "shm_ring.h"
#include "shm_wire.h"

namespace ps {

class ShmLink;

class ShmSend {
 public:
  ShmSend() = default;
  ~ShmSend() { Cancel(); }
  ShmSend(const ShmSend&) = delete;
  ShmSend& operator=(const ShmSend&) = delete;

  // Nothing of the message goes through shared memory and it carries no offer.
  bool empty() const { return fields_.empty(); }
  const ShmFields& fields() const { return fields_; }
  // Whether data frame `index` travels in the ring (an empty frame goes on the wire).
  bool carries(size_t index) const { return index < in_ring_.size() && in_ring_[index]; }
  const ShmLink* link() const { return link_.get(); }
  uint64_t frames() const { return blocks_.size(); }
  // Of those, blocks the sender wrote in place (ShmLink::Lend).
  uint64_t lent_frames() const {
    return static_cast<uint64_t>(std::count(lent_.begin(), lent_.end(), true));
  }
  uint64_t bytes() const { return bytes_; }
  // Large frames that went on the socket although the ring was accepted (no room).
  uint64_t fallbacks() const { return fallbacks_; }

  // The message was sent: its blocks are the receiver's to claim, its offer is out.
  void Commit();
  // The message was not sent: its blocks are free again, its offer will be repeated.
  // What it carried is forgotten (empty() afterwards). Idempotent.
  void Cancel();

 private:
  friend class ShmLink;
  std::shared_ptr<ShmLink> link_;
  std::shared_ptr<ShmRing> ring_;
  std::vector<ShmRing::Block> blocks_;
  std::vector<bool> lent_;  // per block: a lent one (ShmLink::Lend), written by its caller
  std::vector<bool> in_ring_;
  ShmFields fields_;
  uint64_t bytes_ = 0;
  uint64_t fallbacks_ = 0;
};

class ShmLink : public std::enable_shared_from_this<ShmLink> {
 public:
  enum class Phase { kUnoffered, kOffering, kOffered, kAccepted, kRefused };

  // `ring_bytes`: the ring's size; frames of `min_frame_bytes` or more use it.
  ShmLink(uint64_t ring_bytes, uint64_t min_frame_bytes);

  Phase phase() const;

  // Decides how `msg` travels: with the offer (kUnoffered, when `room_for_offer`: the
  // message stays under the size limit with it), or with its large frames copied into
  // the ring (kAccepted). A ring that cannot be made ends in kRefused, with the reason
  // in `*error`. Called without the link's socket lock: the copies happen here.
  void Plan(const Message& msg, bool room_for_offer, ShmSend* send, std::string* error);
  // In kUnoffered: makes the ring and fills `send` with the offer alone (a message
  // without data frames carries it); false in any other phase, or when the ring cannot
  // be made (kRefused, the reason in `*error`).
  bool PlanOfferAlone(ShmSend* send, std::string* error);
  // ShmRing::Prefault of the ring, once made: for the first message's frames.
  void Prefault(uint64_t bytes);

  // In kAccepted: a block of `bytes` (at least the large-frame size) of the ring, its
  // pages made resident, lent to a caller that fills it and sends it to this peer as
  // one whole data frame, which Plan then publishes without a copy. Once a message
  // carrying it is sent the block is the receiver's, and its memory may be taken again
  // for later messages: the caller must neither read nor write the buffer after that
  // (nor send it again). A buffer dropped without being sent gives its block back.
  // Empty in any other phase or when the ring has no room now.
  SArray<char> Lend(uint64_t bytes);

  // The peer's answer to an offer. False when it answers no offer of this link (stale
  // or forged: ignored). On a refusal `*reason` says why.
  bool OnAnswer(const ShmAnswerFields& answer, std::string* reason);

  // The ring's free pages back to the system (ShmRing::ReleaseFreePages); bytes.
  uint64_t ReleaseFreePages();

 private:
  friend class ShmSend;
  // A full ring: how long a frame waits for room before it takes the socket. About as
  // long as the socket would take for it (2 GB/s, loopback tcp on a small machine), at
  // most 20 ms.
  static constexpr uint64_t kSocketBytesPerMicrosecond = 2000;
  static constexpr uint64_t kMaxWaitForRoomMicros = 20000;
  // Waits (bounded, as above) for room for `length` bytes; true with `*block` taken.
  static bool AwaitRoom(ShmRing* ring, uint64_t length, ShmRing::Block* block);
  void OfferSent();
  void OfferLost();
  // Under mu_, in kUnoffered: the ring (made if need be) and its offer into `send`
  // (kOffering); false with kRefused when the ring cannot be made.
  bool FillOffer(ShmSend* send, std::string* error);
  // The loan whose buffer `frame` is, whole, taken out of loans_ for a message. Under mu_.
  bool TakeLoanLocked(const SArray<char>& frame, ShmRing::Block* block);
  // A message carrying lent blocks was not sent: they are lent again (ShmSend::Cancel).
  void ReturnLoans(const std::vector<ShmRing::Block>& blocks);
  // A lent buffer's last reference was dropped: its block back to the ring unless a
  // message took it.
  void EndLoan(const char* payload);

  const uint64_t ring_bytes_;
  const uint64_t min_frame_bytes_;
  mutable std::mutex mu_;  // guards phase_ and ring_
  Phase phase_ = Phase::kUnoffered;
  std::shared_ptr<ShmRing> ring_;
  // Lent blocks no message has taken yet, by payload address. Under mu_.
  std::unordered_map<const char*, ShmRing::Block> loans_;
};

}  // namespace ps

#endif  // HERDPS_VAN_SHM_LINK_H_
