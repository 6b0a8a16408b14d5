// ResendOutbox: the sender side of reliable delivery (PS_RESEND=1).
//
// Numbers the messages this process sends on each link (this incarnation -> one
// recipient) 1, 2, 3, ..., keeps a copy of each until the recipient ACKs it, and says
// which copies are due for a resend. The first resend comes `timeout` after the send and
// each later one waits twice as long as the one before, up to `max_backoff`, so a slow or
// dead peer costs a bounded trickle of traffic rather than a storm. It only decides; the
// caller sends, and calls DropPeer when the liveness layer declares a peer gone.
//
// Memory: one record per message awaiting ACK (a Message copy shares its payload, so no
// payload bytes are copied) plus one counter per recipient. Nothing bounds how many
// messages may await ACK; a sender that must bound it watches Size().
//
// Thread safety: thread-safe; every method takes one internal mutex (the outbox exists
// only when resend is on, so the lock costs nothing otherwise).
#ifndef PS_INTERNAL_RESEND_OUTBOX_H_
#define PS_INTERNAL_RESEND_OUTBOX_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ps/internal/message.h"

namespace ps {

class ResendOutbox {
 public:
  using Clock = std::chrono::steady_clock;

  // `timeout` below 1 ms is taken as 1 ms, so that a message never becomes due again at
  // the instant it is resent; `max_backoff` below `timeout` is taken as `timeout`.
  ResendOutbox(std::chrono::milliseconds timeout, std::chrono::milliseconds max_backoff);

  ResendOutbox(const ResendOutbox&) = delete;
  ResendOutbox& operator=(const ResendOutbox&) = delete;

  // A message tracked by TrackUnsent. `order` tells it from a later message with the
  // same recipient and sequence (the recipient died and its link restarted at 1).
  struct Unsent {
    int recipient = 0;
    uint64_t seq = 0;
    uint64_t order = 0;
  };

  // Assigns the next sequence on the link to msg->meta.recipient (1 for the first), writes
  // it into msg->meta.sequence and keeps a copy until Ack or DropPeer. Numbering and
  // copying happen under one lock, so the sequence order on a link is the order of the
  // TrackUnsent calls. The copy is not due for resend until Sent or Skip: a first send
  // may block, and no resend may go out while it runs (it may yet fail, which its
  // caller is told).
  Unsent TrackUnsent(Message* msg);

  // The first send of `unsent` left: due for resend at `now` + timeout. Nothing happens
  // if it is no longer tracked (already ACKed, or its recipient dropped).
  void Sent(const Unsent& unsent, Clock::time_point now);

  // Forgets the message `seq` sent to `recipient`. Returns false if it was not tracked (a
  // duplicate or stale ACK), which is normal and needs no action.
  bool Ack(int recipient, uint64_t seq);

  // The message `unsent` never left (its first send failed and its caller got the
  // error). Its sequence is taken, and the recipient delivers nothing after it until that
  // sequence arrives, so it stays tracked as a Control::kSkip: the same sender, recipient
  // and sequence, no content. The recipient's in-order delivery passes a skip and
  // delivers nothing for it. Writes the skip to *skip (the caller sends it at once; if
  // that fails too, it goes with the resends, due at `now` + timeout) and returns true;
  // returns false if the message is no longer tracked (its recipient dropped).
  bool Skip(const Unsent& unsent, Clock::time_point now, Message* skip);

  // Copies of the messages whose resend time is <= `now`, at most `limit` of them (the
  // earliest due), oldest TrackUnsent first (so that each link's resends go out in sequence
  // order). Each one's wait is doubled, up to the cap, and its next resend time becomes
  // `now` + that wait; the others stay due for the next call.
  std::vector<Message> DueForResend(Clock::time_point now, size_t limit = SIZE_MAX);

  // The recipient is dead or left: forgets every message tracked for it and returns how
  // many. The link's numbering restarts at 1, as a restarted recipient expects.
  size_t DropPeer(int recipient);

  // Messages awaiting ACK (scheduled for resend or not), over all recipients.
  size_t Size() const;

  // Whether message `seq` to `recipient` still awaits its ACK.
  bool Tracked(int recipient, uint64_t seq) const;

  // The earliest resend time; Clock::time_point::max() when nothing awaits ACK.
  Clock::time_point NextDue() const;

 private:
  // When a message is resent next, then its TrackUnsent count, which breaks ties, makes keys
  // unique and is the "oldest first" order.
  using DueKey = std::pair<Clock::time_point, uint64_t>;

  struct Pending {
    Message msg;
    DueKey due;
    Clock::duration wait;  // the wait that produced `due`
    bool scheduled;        // `due` is in schedule_ (false: TrackUnsent, not yet Sent)
  };

  void ScheduleLocked(int recipient, uint64_t seq, Pending* p, Clock::time_point now);
  // The entry of `unsent` in its first send, or null.
  Pending* FindUnsentLocked(const Unsent& unsent);
  struct Link {
    uint64_t last_seq = 0;
    std::map<uint64_t, Pending> pending;  // by sequence
  };

  const Clock::duration timeout_;
  const Clock::duration max_backoff_;

  mutable std::mutex mu_;
  // Guarded by mu_. Invariant: schedule_ has exactly one entry per scheduled Pending in
  // links_, mapping its `due` key to (recipient, seq); pending_ counts every Pending.
  std::unordered_map<int, Link> links_;
  std::map<DueKey, std::pair<int, uint64_t>> schedule_;
  size_t pending_ = 0;
  uint64_t tracked_ = 0;  // TrackUnsent calls so far; the source of DueKey::second
};

}  // namespace ps

#endif  // PS_INTERNAL_RESEND_OUTBOX_H_
