// Postoffice: the receive path, on the thread that receives the channel (the van's
// receive thread, or for the data channel a thread receiving in Wait; one at a time).
// Every message is checked against the connection it came on before anything else
// looks at it; control messages go to the control loop, data messages to their
// customer.
#include <glog/logging.h>

#include <chrono>

#include "customer_directory.h"
#include "drop_injector.h"
#include "inbound_channel.h"
#include "join_state.h"
#include "ps/internal/event_loop.h"
#include "ps/internal/node_activity.h"
#include "ps/internal/postoffice.h"
#include "ps/internal/reorder_window.h"
#include "ps/internal/resend_outbox.h"
#include "scheduler_role.h"
#include "scheduler_watch.h"

namespace ps {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void Postoffice::OnMessage(Message&& msg, Channel channel) {
  if (drops_->ShouldDrop()) return;
  LOG_IF(INFO, verbose() && !msg.meta.control.empty()) << "recv " << msg.DebugString();
  const Meta& meta = msg.meta;
  if (meta.control.cmd == Control::kAddNode && meta.request) {
    // Joins come from nodes nobody knows yet: the scheduler checks the token.
    if (scheduler_) {
      loop_->Post([this, m = std::move(msg)]() mutable { HandleControl(m); });
    }
    return;
  }
  InboundChannel& in = *inbound_[static_cast<int>(channel)];
  std::lock_guard<std::mutex> lock(in.mu());
  if (!join_->joined()) {
    if (meta.sender == kScheduler && !is_scheduler() && !meta.control.empty()) {
      Admit(msg, channel, /*prejoin=*/true);
    } else if (meta.control.empty() && !in.HoldUnverified(msg)) {
      LOG_IF(WARNING, stray_log_.ShouldLog())
          << "data before the node table, over the limit of what is held; dropped";
    }
    return;
  }
  if (in.has_unverified()) DrainUnverified(channel);
  Admit(msg, channel, /*prejoin=*/false);
}

void Postoffice::Admit(Message& msg, Channel channel, bool prejoin) {
  const int sender = msg.meta.sender;
  if (!prejoin) {
    const Node* node = membership_.Get()->Find(sender);
    if (!node && scheduler_ && msg.meta.request &&
        (msg.meta.control.cmd == Control::kHeartbeat ||
         msg.meta.control.cmd == Control::kWithdraw)) {
      // Out of the table: a server that left the job (Withdraw) and missed the answer
      // asks again; the scheduler tells it once more, and ignores anyone else.
      loop_->Post([this, sender, identity = msg.peer_identity] {
        scheduler_->AnswerIfWithdrawn(sender, identity);
      });
      return;
    }
    if (!node || node->identity != msg.peer_identity) {
      uint64_t n = forged_.fetch_add(1, std::memory_order_relaxed) + 1;
      LOG_IF(WARNING, forged_log_.ShouldLog())
          << "dropped a message that claims to come from node " << sender
          << " on a connection that is not that node's (" << n
          << " so far): " << msg.meta.DebugString();
      return;
    }
    if (!node->alive()) {
      // A node that left may still be resending its leave (our ACK was lost): ACK it
      // again so that it stops waiting.
      if (node->state == Node::kLeft && msg.meta.sequence && config_.resend) {
        SendAck(sender, msg.meta.sequence, channel);
      }
      // A dead node that runs again (it was stopped) asks the scheduler for news: it
      // learns that it is dead instead of taking the silence for the scheduler's.
      if (scheduler_ && node->state == Node::kDead &&
          msg.meta.control.cmd == Control::kHeartbeat && msg.meta.request) {
        loop_->Post([this, sender] { scheduler_->AnswerDeadNode(sender); });
      }
      from_gone_.fetch_add(1, std::memory_order_relaxed);
      LOG_IF(WARNING, stray_log_.ShouldLog())
          << "dropped a message from " << node->DebugString() << ", which is "
          << StateName(node->state);
      return;
    }
  }
  // Any message of a member is a sign of life, not only its heartbeats (which are
  // never resent, so a lossy network could otherwise lose enough of them in a row).
  if (sender == kScheduler) scheduler_watch_->Heard(NowNs());
  if (scheduler_ && !prejoin) scheduler_->Heard(sender);
  if (msg.meta.control.cmd == Control::kAck) {
    // The low bit says which channel's message is acknowledged.
    uint64_t sig = msg.meta.control.msg_sig;
    ResendOutbox* outbox = outbox_[sig & 1].get();
    if (outbox) outbox->Ack(sender, sig >> 1);
    return;
  }
  InboundChannel& in = *inbound_[static_cast<int>(channel)];
  InboundSequencer* sequencer = in.sequencer();
  const uint64_t seq = msg.meta.sequence;
  if (!sequencer || seq == 0) {
    Deliver(msg, channel);
    return;
  }
  std::vector<Message> ready;
  auto verdict =
      sequencer->Accept(sender, msg.meta.sender_incarnation, seq, std::move(msg), &ready);
  in.NoteHeld();
  if (verdict == InboundSequencer::Verdict::kRefused) return;
  // Before the join this node has no id the scheduler would accept an ACK from; the
  // control loop acknowledges the node table once it is installed.
  if (!prejoin) SendAck(sender, seq, channel);
  if (verdict == InboundSequencer::Verdict::kDuplicate) {
    duplicates_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  for (Message& m : ready) Deliver(m, channel);
}

void Postoffice::SendAck(int recipient, uint64_t sequence, Channel channel) {
  Message ack;
  ack.meta.control.cmd = Control::kAck;
  ack.meta.control.msg_sig = (sequence << 1) | static_cast<uint64_t>(channel);
  ack.meta.recipient = recipient;
  // An ACK that finds a full queue is not needed: the sender resends and gets another.
  Send(ack, SendMode::kNonBlocking);
}

void Postoffice::Deliver(Message& msg, Channel channel) {
  // A skip only held its sender's place in the sequence (ResendOutbox::Skip).
  if (msg.meta.control.cmd == Control::kSkip) return;
  if (msg.meta.control.empty()) {
    DispatchData(msg, channel);
  } else {
    loop_->Post([this, m = std::move(msg)]() mutable { HandleControl(m); });
  }
}

void Postoffice::DrainUnverified(Channel channel) {
  std::deque<Message> held = inbound_[static_cast<int>(channel)]->TakeUnverified();
  before_table_.fetch_add(held.size(), std::memory_order_relaxed);
  for (Message& m : held) Admit(m, channel, /*prejoin=*/false);
}

void Postoffice::DispatchData(Message& msg, Channel channel) {
  NodeActivity::Get()->CountReceivedData();
  // While the hand-off waits for room, this thread reads nothing: the liveness check
  // must not take that for a silent scheduler.
  std::atomic<bool>* busy = inbound_[static_cast<int>(channel)]->busy();
  if (directory_->Dispatch(msg, busy) != CustomerDirectory::Dispatched::kRefused) return;
  ReplyError(msg, Status::NotFound("app " + std::to_string(msg.meta.app_id) +
                                   " is not running on node " + std::to_string(my_id()) +
                                   " (and too many requests wait for it)"));
}

void Postoffice::ReplyError(const Message& request, const Status& status) {
  Message reply;
  reply.meta.app_id = request.meta.app_id;
  reply.meta.customer_id = request.meta.customer_id;
  reply.meta.timestamp = request.meta.timestamp;
  reply.meta.request_id = request.meta.request_id;
  reply.meta.incarnation = request.meta.incarnation;
  reply.meta.part = request.meta.part;  // a request of several parts matches its answers by it
  reply.meta.push = request.meta.push;
  reply.meta.pull = request.meta.pull;
  reply.meta.head = request.meta.head;
  reply.meta.simple_app = request.meta.simple_app;
  reply.meta.request = false;
  reply.meta.recipient = request.meta.sender;
  reply.meta.status_code = static_cast<int>(status.code());
  reply.meta.status_message = status.message();
  Status s = SendControl(reply);
  LOG_IF(WARNING, !s.ok()) << "cannot send error reply to node " << request.meta.sender << ": "
                           << s;
}

}  // namespace ps
