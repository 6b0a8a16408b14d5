// ZmqVan, coalescing: small data messages that a thread sends while more are coming
// wait in their link's batch (send_batch.h) and go together. The data receive thread
// coalesces what it sends while input waits for it and flushes every batch when it runs
// out (a server answering a window of requests makes one send for the burst); a thread
// in a CoalesceHint (a worker issuing requests while others are in flight) coalesces
// until it waits for an answer or the receive thread runs out of input
// (Van::FlushCoalesced). docs/architecture.md, "Coalescing".
#include <glog/logging.h>
#include <zmq.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "zmq_van.h"

namespace ps {
namespace {

thread_local bool t_coalesce_hint = false;
thread_local bool t_coalesce_deadline = false;

}  // namespace

CoalesceHint::CoalesceHint(bool on, bool deadline)
    : outer_(t_coalesce_hint), outer_deadline_(t_coalesce_deadline) {
  t_coalesce_hint = on;
  t_coalesce_deadline = on && deadline;
}
CoalesceHint::~CoalesceHint() {
  t_coalesce_hint = outer_;
  t_coalesce_deadline = outer_deadline_;
}
bool CoalesceHint::active() { return t_coalesce_hint; }
bool CoalesceHint::deadline() { return t_coalesce_deadline; }

uint64_t ZmqVan::BatchLimit() const {
  return std::min<uint64_t>(kBatchFlushBytes, static_cast<uint64_t>(options_.max_message_bytes));
}

Status ZmqVan::Coalesce(const std::shared_ptr<Peer>& peer, const Message& msg,
                        const std::string& meta, SendMode mode) {
  Link& link = peer->links[static_cast<int>(Channel::kData)];
  const uint64_t bytes = meta.size() + msg.DataBytes();
  const uint64_t added = SendBatch::MaxAddedBytes(meta, msg.data);
  // Named only when a send fails: no string is built per coalesced message.
  auto to = [&msg] { return "node " + std::to_string(msg.meta.recipient); };
  auto began = std::chrono::steady_clock::now();
  for (;;) {
    std::unique_lock<std::mutex> lock(link.mu);
    if (!link.socket) return Status::Unavailable("connection to " + to() + " is closed");
    // A full batch goes first. One that finds no room holds this message back, as a
    // blocking send waits: a sender never piles up more than a batch per link.
    if (!link.batch.empty() && link.batch.bytes() + added > BatchLimit() &&
        SendBatchLocked(&link) == EAGAIN) {
      lock.unlock();
      bool in_time = std::chrono::steady_clock::now() - began <
                     std::chrono::milliseconds(kSendTimeoutMs);
      if (mode == SendMode::kBlocking && !link.closing && in_time) {
        std::this_thread::sleep_for(std::chrono::microseconds(kSendRetryMicros));
        continue;
      }
      return Status::Unavailable("send to " + to() + " failed: " +
                                 (link.closing ? std::string("the connection is being closed")
                                               : "no room in its queue"));
    }
    const bool first = link.batch.empty();
    link.batch.Append(meta, msg.data);
    if (OnReceiveThread()) link.batch_has_own = true;
    if (first) {
      // Under the link's mutex: a flush that takes the list after this finds the batch.
      std::lock_guard<std::mutex> pending_lock(pending_mu_);
      pending_peers_.push_back(peer);
      pending_any_.store(true);  // sequentially consistent: see Flush
    }
    break;
  }
  coalesced_messages_.fetch_add(1, std::memory_order_relaxed);
  CountSent(msg, bytes);
  // After the append: a flush that disarms the timer before taking the batch sends it.
  // A timer that cannot keep the deadline (its thread could not be started) leaves the
  // sending to this thread, at once.
  if (lead_timer_ && CoalesceHint::deadline() && !OnReceiveThread() && !lead_timer_->Arm()) {
    Flush(SendMode::kNonBlocking, /*own_blocking=*/false);
  }
  return Status::OK();
}

int ZmqVan::SendBatchLocked(Link* link) {
  if (link->batch.empty()) return 0;
  if (!link->socket) {
    link->batch.Take();  // for a peer that is gone (Disconnect)
    link->batch_has_own = false;
    return ENOTCONN;
  }
  const uint32_t messages = link->batch.messages();
  std::string bytes = link->batch.Take();
  zmq_msg_t part;
  zmq_msg_init_size(&part, bytes.size());
  std::memcpy(zmq_msg_data(&part), bytes.data(), bytes.size());
  int err = 0;
  do {
    if (zmq_msg_send(&part, link->socket, ZMQ_DONTWAIT) >= 0) {
      sent_batches_.fetch_add(1, std::memory_order_relaxed);
      link->batch_has_own = false;
      return 0;
    }
    err = zmq_errno();
  } while (err == EINTR);
  zmq_msg_close(&part);
  if (err == EAGAIN) {
    link->batch.Restore(std::move(bytes), messages);
    return EAGAIN;
  }
  link->batch_has_own = false;
  // The senders were told these messages went: with PS_RESEND their sequence numbers
  // bring them back, without it they are lost like any message a connection drops.
  LOG(WARNING) << "a batch of " << messages << " messages to " << link->endpoint
               << " could not be sent, they are lost: " << zmq_strerror(err);
  return err;
}

void ZmqVan::FlushCoalesced(SendMode mode) { Flush(mode, /*own_blocking=*/false); }

void ZmqVan::FlushFromReceiveThread() {
  const auto now = std::chrono::steady_clock::now();
  batches_since_ = {};
  if (Flush(SendMode::kNonBlocking, /*own_blocking=*/true)) flush_retry_at_ = now + kFlushRetry;
}

bool ZmqVan::Flush(SendMode mode, bool own_blocking, uint64_t* sent) {
  // Before the batches are taken: one coalesced after this arms the timer again.
  // Sequentially consistent with Coalesce's store of pending_any_ before its Arm: this
  // either sees that batch or leaves that Arm standing.
  const int64_t taken = lead_timer_ ? lead_timer_->Disarm() : 0;
  if (!pending_any_.load()) return false;
  std::vector<std::shared_ptr<Peer>> peers;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    // Room for the batches that find none, made before anything is taken, so that
    // putting one back rarely needs memory (others may list peers meanwhile).
    std::vector<std::shared_ptr<Peer>> room;
    room.reserve(pending_peers_.size());
    peers.swap(pending_peers_);
    pending_peers_.swap(room);
    pending_any_.store(false);
  }
  // Sends the link's batch (under link.mu), counting it in `sent` if it went.
  auto send_counted = [sent, this](Link* link) {
    const bool had_batch = !link->batch.empty();
    const int err = SendBatchLocked(link);
    if (err == 0 && had_batch && sent) ++*sent;
    return err;
  };
  // First every batch that finds room, so that a peer with a full queue holds up no
  // other; then those that wait for room, one after the other.
  std::vector<std::shared_ptr<Peer>> waiting;
  bool left = false;
  for (const std::shared_ptr<Peer>& peer : peers) {
    Link& link = peer->links[static_cast<int>(Channel::kData)];
    std::lock_guard<std::mutex> lock(link.mu);
    if (send_counted(&link) != EAGAIN) continue;
    if (mode == SendMode::kBlocking || (own_blocking && link.batch_has_own)) {
      waiting.push_back(peer);
    } else if (!link.closing) {
      // No room: the batch stays for a later flush.
      std::lock_guard<std::mutex> pending_lock(pending_mu_);
      pending_peers_.push_back(peer);
      pending_any_.store(true);
      left = true;
    } else {
      DropBatchLocked(&link, "its connection is being closed");
    }
  }
  for (const std::shared_ptr<Peer>& peer : waiting) {
    Link& link = peer->links[static_cast<int>(Channel::kData)];
    auto began = std::chrono::steady_clock::now();
    for (;;) {
      // Without the link's mutex, as a blocking send waits.
      std::this_thread::sleep_for(std::chrono::microseconds(kSendRetryMicros));
      std::lock_guard<std::mutex> lock(link.mu);
      if (send_counted(&link) != EAGAIN) break;
      if (link.closing || stopped_.load(std::memory_order_acquire)) {
        DropBatchLocked(&link, "the van is stopping or its connection closing");
        break;
      }
      if (std::chrono::steady_clock::now() - began >= std::chrono::milliseconds(kSendTimeoutMs)) {
        DropBatchLocked(&link, "its peer's queue had no room for " +
                                   std::to_string(kSendTimeoutMs / 1000) + " s");
        break;
      }
    }
  }
  // What stays may be a first request nobody else will flush (no answer is coming that
  // would make the receive thread flush): the timer tries again, at the pace of the
  // retry it was backing off to if it was (Rearm). Its own flush backs off instead.
  if (left && lead_timer_ && !FlushTimer::OnTimerThread()) lead_timer_->Rearm(taken);
  return left;
}

void ZmqVan::DropBatchLocked(Link* link, const std::string& why) {
  LOG(WARNING) << "a batch of " << link->batch.messages() << " messages to " << link->endpoint
               << " is lost: " << why;
  link->batch.Take();
  link->batch_has_own = false;
}

}  // namespace ps
