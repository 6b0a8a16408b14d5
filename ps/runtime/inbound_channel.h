// InboundChannel: what one channel's receiving owns: ordering and de-duplication
// (PS_RESEND), the data that came before the node table (held until the node has
// joined and can check its senders), and whether the receiver is busy handing a
// message to an app. Part of the Postoffice's receive path; internal to the runtime.
//
// Thread safety: mu() is held by whoever admits the channel's messages (the thread
// receiving it; the control loop when it admits what arrived before the table), so
// that one sender's messages are admitted in arrival order; it guards the sequencer
// and the held data. busy() and held_out_of_order() are readable by any thread.
// Reset only while the van is stopped.
#ifndef HERDPS_PS_RUNTIME_INBOUND_CHANNEL_H_
#define HERDPS_PS_RUNTIME_INBOUND_CHANNEL_H_

#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>

#include "ps/internal/message.h"
#include "ps/internal/reorder_window.h"

namespace ps {

class InboundChannel {
 public:
  // A new Start: with `resend`, a sequencer whose window is `window` messages; nothing
  // held.
  void Reset(bool resend, size_t window);

  std::mutex& mu() { return mu_; }
  // The channel's sequencer; null when PS_RESEND is off. mu() held.
  InboundSequencer* sequencer() { return sequencer_.get(); }
  // After the sequencer took or released messages: publishes how many it holds.
  void NoteHeld() { held_.store(sequencer_->HeldMessages(), std::memory_order_relaxed); }
  size_t held_out_of_order() const { return held_.load(std::memory_order_relaxed); }

  // Holds data that came before the node table: true, or false (msg untouched) when
  // the held data is at its bound (messages or bytes). mu() held.
  bool HoldUnverified(Message& msg);
  bool has_unverified() const { return !unverified_.empty(); }  // mu() held
  // Takes the held data, oldest first. mu() held.
  std::deque<Message> TakeUnverified();

  // Set while the receiver hands a message to an app (it reads nothing meanwhile).
  std::atomic<bool>* busy() { return &busy_; }

 private:
  std::mutex mu_;
  std::unique_ptr<InboundSequencer> sequencer_;
  std::deque<Message> unverified_;
  size_t unverified_bytes_ = 0;
  std::atomic<bool> busy_{false};
  std::atomic<size_t> held_{0};
};

}  // namespace ps

#endif  // HERDPS_PS_RUNTIME_INBOUND_CHANNEL_H_
