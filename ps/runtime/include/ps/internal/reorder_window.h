// InboundSequencer: the receiver side of reliable delivery (PS_RESEND=1), for all the
// senders of one node.
//
// Each sender numbers its messages to this node 1, 2, 3, ... per process incarnation and
// resends each until it is ACKed. The network may drop, duplicate and reorder them; the
// sequencer turns that back into each sender's messages exactly once and in sequence
// order, which is what keeps per-key FIFO intact when a resent message overtakes later
// ones. It only decides; sending the ACKs is the caller's job.
//
// Incarnations are opaque (random per process start, see Meta): any value other than the
// sender's current one is a restart, unless it is one of the sender's last
// kRetiredPerSender incarnations, whose stragglers are refused so that they can never
// reset the new stream and have it delivered twice.
//
// Memory bound: per tracked sender a fixed-size record plus at most `window` - 1 held
// messages (sequences in (next expected, next expected + window)), so HeldMessages() <=
// (window - 1) * TrackedSenders(). Per sender id that ever restarted or was forgotten,
// up to kRetiredPerSender retired incarnations (8 bytes each), however often it restarts.
//
// Thread safety: not thread-safe. Used by one thread at a time: whoever receives the
// channel (the node's receive thread, or a thread receiving in Wait).
#ifndef PS_INTERNAL_REORDER_WINDOW_H_
#define PS_INTERNAL_REORDER_WINDOW_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "ps/internal/message.h"

namespace ps {

class InboundSequencer {
 public:
  // `window`: how many messages past the next expected one a sender may be ahead; messages
  // further ahead are refused (not ACKed, so the sender resends them later). A window of 0
  // is taken as 1 (strict in-order acceptance).
  explicit InboundSequencer(size_t window);

  // How many past incarnations of one sender id stay refused. A straggler from further back
  // would need to survive that many restarts of its node.
  static constexpr size_t kRetiredPerSender = 8;

  InboundSequencer(const InboundSequencer&) = delete;
  InboundSequencer& operator=(const InboundSequencer&) = delete;

  enum class Verdict {
    kAccepted,   // new: ACK it. If it was next in order, `ready` got it and any held
                 // successors; otherwise it is held until the gap before it fills.
    kDuplicate,  // accepted before: ACK it again (the first ACK may have been lost) and
                 // deliver nothing.
    kRefused,    // beyond the window, sequence 0, or from a retired incarnation: do not
                 // ACK, deliver nothing.
  };

  // Takes `msg` from `sender` with sequence `seq` (valid ones are >= 1). A new incarnation
  // retires the current one and resets the sender's state, discarding its held messages,
  // which the dead process can never complete. Appends the messages now deliverable to
  // *ready (not cleared, must not be null), in sequence order. `msg` is moved from only
  // when the verdict is kAccepted.
  Verdict Accept(int sender, uint64_t incarnation, uint64_t seq, Message&& msg,
                 std::vector<Message>* ready);

  // The sender is dead or left: frees its state, held messages included. Its incarnation
  // is retired, so a late resend cannot be delivered a second time; another incarnation
  // (the restarted process) is accepted afresh.
  void Forget(int sender);

  // Out-of-order messages held across all senders; < window() * TrackedSenders().
  size_t HeldMessages() const { return held_; }
  size_t TrackedSenders() const { return senders_.size(); }
  size_t window() const { return window_; }

 private:
  struct SenderState {
    uint64_t incarnation = 0;
    uint64_t next_expected = 1;
    std::map<uint64_t, Message> held;  // keys in (next_expected, next_expected + window)
  };

  // Adds `incarnation` to the sender's retired ones, evicting the oldest beyond the cap.
  void Retire(int sender, uint64_t incarnation);

  const size_t window_;
  size_t held_ = 0;  // sum of held.size() over senders_
  std::unordered_map<int, SenderState> senders_;
  // Sender -> its retired incarnations, oldest first; outlives Forget on purpose.
  std::unordered_map<int, std::vector<uint64_t>> retired_;
};

}  // namespace ps

#endif  // PS_INTERNAL_REORDER_WINDOW_H_
