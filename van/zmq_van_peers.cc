// ZmqVan, the sending side: each peer's connections (one DEALER per channel, shared
// by the node ids of one process), connecting and forgetting peers, and Send.
#include <glog/logging.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "meta_codec.h"
#include "zmq_van.h"

namespace ps {
namespace {

void ReleaseFrame(void* /*data*/, void* hint) { delete static_cast<SArray<char>*>(hint); }

}  // namespace

void* ZmqVan::NewPeerSocket(const std::string& endpoint, bool with_identity, Status* error) {
  void* socket = zmq_socket(context_, ZMQ_DEALER);
  if (!socket) {
    *error = Status::Internal("cannot create socket: " + ZmqError());
    return nullptr;
  }
  int linger = kLingerMs;
  zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof(linger));
  if (options_.zmq.send_high_water_mark > 0) {
    zmq_setsockopt(socket, ZMQ_SNDHWM, &options_.zmq.send_high_water_mark,
                   sizeof(options_.zmq.send_high_water_mark));
  }
  if (with_identity && !options_.identity.empty()) {
    zmq_setsockopt(socket, ZMQ_ROUTING_ID, options_.identity.data(), options_.identity.size());
  }
  // Every connection (and reconnection) starts with an empty probe message, so that the
  // peer's guard learns this connection's identity before its first real message.
  int probe = 1;
  zmq_setsockopt(socket, ZMQ_PROBE_ROUTER, &probe, sizeof(probe));
  if (gate_) {
    Status s = gate_->SecureClient(socket, endpoint);
    if (!s.ok()) {
      *error = s;
      zmq_close(socket);
      return nullptr;
    }
  }
  if (zmq_connect(socket, endpoint.c_str()) != 0) {
    *error = Status::InvalidArgument("cannot connect to '" + endpoint + "': " + ZmqError());
    zmq_close(socket);
    return nullptr;
  }
  return socket;
}

void ZmqVan::CloseLink(Link* link, int linger_ms) {
  link->closing = true;
  std::lock_guard<std::mutex> lock(link->mu);
  link->shm.reset();
  if (link->socket) {
    zmq_setsockopt(link->socket, ZMQ_LINGER, &linger_ms, sizeof(linger_ms));
    zmq_close(link->socket);
    link->socket = nullptr;
  }
}

Status ZmqVan::Connect(int node_id, const std::string& endpoint,
                       const std::string& control_endpoint, bool with_identity) {
  return ConnectLinks(node_id, endpoint, control_endpoint, with_identity, /*fresh=*/false);
}

Status ZmqVan::Reconnect(int node_id, const std::string& endpoint,
                         const std::string& control_endpoint) {
  return ConnectLinks(node_id, endpoint, control_endpoint, /*with_identity=*/true,
                      /*fresh=*/true);
}

Status ZmqVan::ConnectLinks(int node_id, const std::string& endpoint,
                            const std::string& control_endpoint, bool with_identity,
                            bool fresh) {
  if (!started_ || stopped_) return Status::Unavailable("van is not running");
  const std::string* wanted[2] = {&endpoint, &control_endpoint};
  std::shared_ptr<Peer> peer;
  {
    std::unique_lock<std::shared_mutex> lock(peers_mu_);
    auto& slot = peers_[node_id];
    if (!slot) {
      // Several workers of one process (node instances) share its endpoints: they share
      // one connection too (two with the same identity would take over each other's).
      for (auto& kv : peers_) {
        if (kv.first != node_id && kv.second && kv.second->Reaches(endpoint, control_endpoint)) {
          slot = kv.second;
          return Status::OK();
        }
      }
      slot = std::make_shared<Peer>();
    }
    peer = slot;
  }
  // A channel whose endpoint is unchanged keeps its connection, so messages already
  // queued on it keep their order with the ones that follow.
  for (int c = 0; c < 2; ++c) {
    Link& link = peer->links[c];
    void* old = nullptr;
    {
      std::lock_guard<std::mutex> lock(link.mu);
      if (!fresh && link.endpoint == *wanted[c] && link.with_identity == with_identity &&
          (link.socket || wanted[c]->empty())) {
        continue;
      }
      void* socket = nullptr;
      if (!wanted[c]->empty()) {
        Status error;
        socket = NewPeerSocket(*wanted[c], with_identity, &error);
        if (!socket) return error;
      }
      old = link.socket;
      link.socket = socket;
      link.endpoint = *wanted[c];
      link.with_identity = with_identity;
      // A new connection, a new ring (offered with its first large frame). What was
      // batched for a process that is gone goes with its queue.
      link.shm.reset();
      if (fresh) link.batch.Take(), link.batch_has_own = false;
      link.shm_possible = c == static_cast<int>(Channel::kData) && options_.zmq.shm &&
                          socket && OnThisHost(link.endpoint);
    }
    if (old && fresh) {
      // Queued for a process that is gone: at the same endpoint it would reach the new one.
      const int no_linger = 0;
      zmq_setsockopt(old, ZMQ_LINGER, &no_linger, sizeof(no_linger));
    }
    if (old) zmq_close(old);  // with the van's linger: what is queued may still go out
  }
  return Status::OK();
}

void ZmqVan::Disconnect(int node_id) {
  std::shared_ptr<Peer> old;
  {
    std::unique_lock<std::shared_mutex> lock(peers_mu_);
    auto it = peers_.find(node_id);
    if (it == peers_.end()) return;
    old = std::move(it->second);
    peers_.erase(it);
    // Still the connection of another node (an instance of the same process).
    for (auto& kv : peers_) {
      if (kv.second == old) return;
    }
  }
  // What was queued for a gone peer is of no use to anyone.
  for (Link& link : old->links) CloseLink(&link, 0);
}

std::shared_ptr<ZmqVan::Peer> ZmqVan::FindPeer(int node_id) {
  std::shared_lock<std::shared_mutex> lock(peers_mu_);
  auto it = peers_.find(node_id);
  return it == peers_.end() ? nullptr : it->second;
}

Status ZmqVan::Send(const Message& msg, SendMode mode, Channel channel) {
  const std::string to = "node " + std::to_string(msg.meta.recipient);
  std::string meta;
  Status s = EncodeMeta(msg, &meta);
  if (!s.ok()) return s;
  size_t total = meta.size() + msg.DataBytes();
  if (total > static_cast<uint64_t>(options_.max_message_bytes)) {
    return Status::InvalidArgument("message of " + std::to_string(total) + " bytes to " + to +
                                   " is over PS_MAX_MESSAGE_BYTES=" +
                                   std::to_string(options_.max_message_bytes) +
                                   "; send less per request or raise the limit on every node");
  }
  std::shared_ptr<Peer> peer = FindPeer(msg.meta.recipient);
  if (!peer) return Status::Unavailable("no connection to " + to);
  Link& link = peer->links[static_cast<int>(channel)];

  // Large frames to a peer on this host go through the link's ring: copied there now,
  // outside the link's lock, and described in the meta instead of sent. Whatever does
  // not go out undoes itself (ShmSend's destructor).
  ShmSend shm;
  if (channel == Channel::kData && shm_on_.load(std::memory_order_relaxed)) {
    PlanShm(&link, msg,
            total + kShmOfferBytes <= static_cast<uint64_t>(options_.max_message_bytes), &shm);
    if (!shm.empty() && !(s = EncodeMeta(msg, shm.fields(), &meta)).ok()) return s;
  }
  if (shm.empty() && channel == Channel::kData && msg.DataBytes() < kZeroCopyThreshold &&
      !meta.empty() && CoalescesOnThisThread() &&
      SendBatch::MaxAddedBytes(meta, msg.data) <= BatchLimit()) {
    return Coalesce(peer, msg, meta, mode);
  }

  // The link's mutex is only ever held for one attempt: a sender that finds no room
  // lets go of it while it waits, so that others' sends to this peer (the control
  // loop's resends, ACKs, heartbeats) never wait behind a blocked one.
  size_t frames = msg.data.size();
  zmq_msg_t part;
  zmq_msg_init_size(&part, meta.size());
  std::memcpy(zmq_msg_data(&part), meta.data(), meta.size());
  std::unique_lock<std::mutex> lock(link.mu, std::defer_lock);
  auto began = std::chrono::steady_clock::now();
  for (;;) {
    lock.lock();
    if (!link.socket) {
      zmq_msg_close(&part);
      return Status::Unavailable("connection to " + to + " is closed");
    }
    if (!shm.empty() && shm.link() != link.shm.get()) {
      // The connection was replaced since the plan: its ring may mean nothing to
      // whoever is at the other end now. The message goes on the socket whole.
      shm.Cancel();
      if (!(s = EncodeMeta(msg, &meta)).ok()) {
        zmq_msg_close(&part);
        return s;
      }
      zmq_msg_close(&part);
      zmq_msg_init_size(&part, meta.size());
      std::memcpy(zmq_msg_data(&part), meta.data(), meta.size());
    }
    // What the receive thread batched for this link goes first, so the link keeps its
    // order. Room is checked on the first frame only: once it is queued, ZeroMQ takes
    // the rest of the message.
    int err = link.batch.empty() ? 0 : SendBatchLocked(&link);
    if (err != EAGAIN) {
      if (zmq_msg_send(&part, link.socket, ZMQ_DONTWAIT | (frames ? ZMQ_SNDMORE : 0)) >= 0) break;
      err = zmq_errno();
    }
    lock.unlock();
    if (err == EINTR) continue;
    bool in_time = std::chrono::steady_clock::now() - began <
                   std::chrono::milliseconds(kSendTimeoutMs);
    if (err == EAGAIN && mode == SendMode::kBlocking && !link.closing && in_time) {
      std::this_thread::sleep_for(std::chrono::microseconds(kSendRetryMicros));
      continue;
    }
    // Nothing of this message left: the socket is as good as before.
    Status failed = Status::Unavailable(
        "send to " + to + " failed: " +
        (link.closing ? std::string("the connection is being closed")
                      : err == EAGAIN && mode == SendMode::kBlocking
                            ? "no room in its queue for " + std::to_string(kSendTimeoutMs / 1000) +
                                  " s"
                            : std::string(zmq_strerror(err))));
    zmq_msg_close(&part);
    return failed;
  }
  const int flags = ZMQ_DONTWAIT;
  size_t bytes = meta.size();
  for (size_t i = 0; i < frames; ++i) {
    const SArray<char>& frame = msg.data[i];
    if (shm.carries(i)) {
      zmq_msg_init(&part);  // the bytes are in the ring; the meta describes them
    } else if (frame.size() >= kZeroCopyThreshold) {
      auto* keep = new SArray<char>(frame);
      zmq_msg_init_data(&part, frame.data(), frame.size(), ReleaseFrame, keep);
    } else {
      zmq_msg_init_size(&part, frame.size());
      if (frame.size()) std::memcpy(zmq_msg_data(&part), frame.data(), frame.size());
    }
    if (zmq_msg_send(&part, link.socket, flags | (i + 1 < frames ? ZMQ_SNDMORE : 0)) < 0) {
      Status err = Status::Unavailable("send to " + to + " failed: " + ZmqError());
      zmq_msg_close(&part);
      // Part of a multipart message is queued: the socket would glue the next message
      // onto it. Replace the connection; the partial message is discarded with it, and
      // so is the ring (the peer never gets this message's descriptors).
      int linger = 0;
      zmq_setsockopt(link.socket, ZMQ_LINGER, &linger, sizeof(linger));
      zmq_close(link.socket);
      Status ignored;
      link.socket = NewPeerSocket(link.endpoint, link.with_identity, &ignored);
      link.shm.reset();
      return err;
    }
    bytes += frame.size();
  }
  if (!shm.empty()) {
    shm_sent_frames_.fetch_add(shm.frames(), std::memory_order_relaxed);
    shm_lent_frames_.fetch_add(shm.lent_frames(), std::memory_order_relaxed);
    shm_sent_bytes_.fetch_add(shm.bytes(), std::memory_order_relaxed);
    shm.Commit();
  }
  shm_fallback_frames_.fetch_add(shm.fallbacks(), std::memory_order_relaxed);
  CountSent(msg, bytes);
  return Status::OK();
}

void ZmqVan::CountSent(const Message& msg, uint64_t bytes) {
  sent_messages_.fetch_add(1, std::memory_order_relaxed);
  sent_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (msg.meta.request && msg.meta.push && msg.meta.control.empty()) {
    push_request_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    push_requests_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace ps
