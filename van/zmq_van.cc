#include "zmq_van.h"

#include <glog/logging.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "ipc_files.h"
#include "meta_codec.h"

namespace ps {
namespace {

// Frames smaller than this are copied into ZeroMQ's own buffer: for them a copy is
// cheaper than the allocation that keeps a zero-copy reference alive.
constexpr size_t kZeroCopyThreshold = 4096;

// How long Stop waits for queued outgoing messages to leave.
constexpr int kLingerMs = 2000;

// How long a send may wait for room in a peer's queue, and how long it sleeps between
// attempts (without holding the link, and checking whether the peer is being
// disconnected).
constexpr int kSendTimeoutMs = 60000;
constexpr int kSendRetryMicros = 500;

std::string ZmqError() { return zmq_strerror(zmq_errno()); }

void ReleaseFrame(void* /*data*/, void* hint) { delete static_cast<SArray<char>*>(hint); }

// Received frames become SArrays that own the zmq_msg_t, so the payload is handed to
// the app without a copy. ZeroMQ places large payloads 8 bytes into their allocation,
// so 8 is the alignment to ask for (enough for every element type a frame can hold);
// a frame that is not aligned so (tiny frames live inside the message struct) is
// copied so that typed views of it stay legal.
constexpr uintptr_t kFrameAlignment = 8;
SArray<char> AdoptFrame(zmq_msg_t* msg, std::atomic<uint64_t>* copied_bytes) {
  char* data = static_cast<char*>(zmq_msg_data(msg));
  size_t size = zmq_msg_size(msg);
  if (size == 0 || reinterpret_cast<uintptr_t>(data) % kFrameAlignment != 0) {
    copied_bytes->fetch_add(size, std::memory_order_relaxed);
    SArray<char> copy;
    copy.CopyFrom(data, size);
    zmq_msg_close(msg);
    delete msg;
    return copy;
  }
  return SArray<char>(data, size, [msg](char*) {
    zmq_msg_close(msg);
    delete msg;
  });
}

}  // namespace

std::unique_ptr<Van> Van::Create(const std::string& type) {
  if (type == "zmq") return std::make_unique<ZmqVan>();
  return nullptr;
}

std::string EndpointFor(const std::string& transport, const std::string& host, int port) {
  if (transport == "ipc") {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = tmp && *tmp ? tmp : "/tmp";
    return "ipc://" + dir + "/herdps-" + std::to_string(port) + ".ipc";
  }
  return "tcp://" + host + ":" + std::to_string(port);
}

ZmqVan::~ZmqVan() { Stop(); }

Status ZmqVan::Bind(Receiver* receiver, int wanted_port) {
  if (options_.transport == "tcp") {
    const std::string& host = options_.bind_host.empty() ? options_.host : options_.bind_host;
    std::string addr = "tcp://" + host + ":" +
                       (wanted_port ? std::to_string(wanted_port) : std::string("*"));
    if (zmq_bind(receiver->socket, addr.c_str()) != 0) {
      return Status::Unavailable("cannot bind " + addr + ": " + ZmqError());
    }
    char last[256];
    size_t len = sizeof(last);
    zmq_getsockopt(receiver->socket, ZMQ_LAST_ENDPOINT, last, &len);
    std::string bound = last;
    receiver->port = std::atoi(bound.substr(bound.rfind(':') + 1).c_str());
    // Peers reach it at the advertised host, also when it is bound to another one.
    receiver->endpoint = EndpointFor("tcp", options_.host, receiver->port);
    return Status::OK();
  }
  if (options_.transport == "ipc") {
    // Files of nodes that were killed outright (they could not remove them) go first.
    static std::once_flag swept;
    std::call_once(swept, [] {
      const std::string path = EndpointFor("ipc", "", 0).substr(6);
      const std::string dir = path.substr(0, path.rfind('/'));
      if (int n = RemoveStaleIpcFiles(dir)) {
        LOG(INFO) << "removed " << n << " socket files of ended nodes from " << dir;
      }
    });
    // ZeroMQ replaces an existing ipc socket file on bind, so a random name picked
    // here must not already exist: that would steal another node's endpoint.
    std::mt19937 rng(std::random_device{}());
    for (int attempt = 0; attempt < 100; ++attempt) {
      int port = wanted_port ? wanted_port : 20000 + static_cast<int>(rng() % 40000000);
      std::string addr = EndpointFor("ipc", options_.host, port);
      std::string path = addr.substr(6);
      if (!wanted_port && access(path.c_str(), F_OK) == 0) continue;
      if (zmq_bind(receiver->socket, addr.c_str()) != 0) {
        if (wanted_port) return Status::Unavailable("cannot bind " + addr + ": " + ZmqError());
        continue;
      }
      receiver->endpoint = addr;
      receiver->port = port;
      return Status::OK();
    }
    return Status::Unavailable("cannot find a free ipc endpoint");
  }
  return Status::InvalidArgument("unknown transport '" + options_.transport +
                                 "' (expected tcp or ipc)");
}

Status ZmqVan::Start(const VanOptions& options, Handler handler) {
  if (started_) return Status::Internal("van started twice");
  if (options.identity.size() > 255) {
    return Status::InvalidArgument("van identity longer than 255 bytes");
  }
  options_ = options;
  handler_ = std::move(handler);
  if (options_.shm) {
    local_hosts_ = LocalAddresses();
    local_hosts_.insert(options_.host);
    local_hosts_.insert("localhost");
  }
  shm_on_ = options_.shm;
  context_ = zmq_ctx_new();
  if (!context_) return Status::Internal("zmq_ctx_new failed: " + ZmqError());
  zmq_ctx_set(context_, ZMQ_MAX_SOCKETS, 65536);
  Status s;
  if (!options_.curve_secret_key.empty()) {
    // Before any socket exists: the gate's ZAP handler must answer the first handshake.
    gate_ = std::make_unique<CurveGate>();
    s = gate_->Start(context_, options_.curve_secret_key);
  }
  for (int c = 0; c < 2 && s.ok(); ++c) {
    Receiver& r = receivers_[c];
    r.socket = zmq_socket(context_, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(r.socket, ZMQ_LINGER, &linger, sizeof(linger));
    int64_t max_size = options_.max_message_bytes;
    if (gate_) {
      max_size += CurveGate::kFrameOverheadBytes;
      s = gate_->SecureServer(r.socket, c == 0 ? "this node's data channel"
                                               : "this node's control channel");
      if (!s.ok()) break;
    }
    zmq_setsockopt(r.socket, ZMQ_MAXMSGSIZE, &max_size, sizeof(max_size));
    // A second connection that presents the routing identity of a connected peer does
    // not take it over (ZeroMQ then names it otherwise): a stranger who learned a
    // member's identity cannot cut the member's connection and take its messages.
    int handover = 0;
    zmq_setsockopt(r.socket, ZMQ_ROUTER_HANDOVER, &handover, sizeof(handover));
    // Before Bind: from the first connection. The gate's handshake events come along.
    const std::string name = c == 0 ? "this node's data channel" : "this node's control channel";
    CurveGate* gate = gate_.get();
    s = gate ? guard_.Monitor(context_, r.socket, CurveGate::kHandshakeEvents,
                              [gate, name](uint16_t event, uint32_t value) {
                                gate->ServerEvent(name, event, value);
                              })
             : guard_.Monitor(context_, r.socket);
    if (!s.ok()) break;
    s = Bind(&r, c == 0 ? options_.port : options_.control_port);
    // The receive thread blocks in zmq_msg_recv (a poll over the socket and a wake-up
    // file descriptor costs a measurable part of a small request's latency), so Stop
    // wakes it with a message of its own through an endpoint no other process can reach.
    if (s.ok()) {
      r.wake_endpoint = "inproc://herdps-van-stop-" +
                        std::to_string(reinterpret_cast<uintptr_t>(this)) + "-" +
                        std::to_string(c);
      if (zmq_bind(r.socket, r.wake_endpoint.c_str()) != 0) {
        s = Status::Internal("cannot bind " + r.wake_endpoint + ": " + ZmqError());
      }
    }
  }
  if (s.ok()) s = guard_.Start(options_.max_strangers);
  if (!s.ok()) {
    guard_.Stop();
    for (Receiver& r : receivers_) {
      if (r.socket) zmq_close(r.socket);
      r.socket = nullptr;
    }
    if (gate_) gate_->Stop();
    gate_.reset();
    zmq_ctx_term(context_);
    context_ = nullptr;
    return s;
  }
  if (gate_) {
    LOG(INFO) << "CURVE on: every connection is encrypted, and only nodes holding the job's "
                 "key are admitted (public key "
              << gate_->fingerprint() << "...)";
  }
  // The nudge sockets and event descriptor serve every wait and RunOnReceiver; without
  // them waiters sleep.
  if (!StartReceiveInWait()) {
    LOG(WARNING) << "threads waiting for answers will sleep instead of receiving "
                    "themselves (PS_RECEIVE_IN_WAIT): "
                 << ZmqError() << " / " << std::strerror(errno);
  }
  receive_in_wait_ = options_.receive_in_wait;
  started_ = true;
  receivers_[0].thread = std::thread([this] { DataReceiveLoop(); });
  receivers_[1].thread = std::thread([this] { ReceiveLoop(Channel::kControl); });
  return Status::OK();
}

void* ZmqVan::NewPeerSocket(const std::string& endpoint, bool with_identity, Status* error) {
  void* socket = zmq_socket(context_, ZMQ_DEALER);
  if (!socket) {
    *error = Status::Internal("cannot create socket: " + ZmqError());
    return nullptr;
  }
  int linger = kLingerMs;
  zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof(linger));
  if (options_.send_high_water_mark > 0) {
    zmq_setsockopt(socket, ZMQ_SNDHWM, &options_.send_high_water_mark,
                   sizeof(options_.send_high_water_mark));
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
      if (link.endpoint == *wanted[c] && link.with_identity == with_identity &&
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
      // A new connection, a new ring (offered with its first large frame).
      link.shm.reset();
      link.shm_possible = c == static_cast<int>(Channel::kData) && options_.shm &&
                          socket && OnThisHost(link.endpoint);
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
    // Room is checked on the first frame only: once it is queued, ZeroMQ takes the
    // rest of the message.
    if (zmq_msg_send(&part, link.socket, ZMQ_DONTWAIT | (frames ? ZMQ_SNDMORE : 0)) >= 0) break;
    int err = zmq_errno();
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
    shm_sent_bytes_.fetch_add(shm.bytes(), std::memory_order_relaxed);
    shm.Commit();
  }
  shm_fallback_frames_.fetch_add(shm.fallbacks(), std::memory_order_relaxed);
  sent_messages_.fetch_add(1, std::memory_order_relaxed);
  sent_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return Status::OK();
}

void ZmqVan::LogDropped(const std::string& reason) {
  dropped_messages_.fetch_add(1, std::memory_order_relaxed);
  if (drop_log_.ShouldLog()) {
    LOG(WARNING) << "dropped malformed message (" << drop_log_.count() << " so far): " << reason;
  }
}

void ZmqVan::ReceiveLoop(Channel channel) {
  while (ReceiveOneGuarded(channel, Wait::kBlock) != Received::kDone) {
  }
}

ZmqVan::Received ZmqVan::ReceiveOneGuarded(Channel channel, Wait wait) {
  try {
    return ReceiveOne(channel, wait);
  } catch (const std::exception& e) {
    // Out of memory while taking a message apart: that message is lost, the node goes
    // on (and a waiter holding the data ROUTER hands it on as usual).
    LOG(ERROR) << "receiving a message failed, the message is lost: " << e.what();
  } catch (...) {
    LOG(ERROR) << "receiving a message failed, the message is lost";
  }
  return Received::kMessage;
}

ZmqVan::Received ZmqVan::ReceiveOne(Channel channel, Wait wait) {
  void* socket = receivers_[static_cast<int>(channel)].socket;
  std::vector<zmq_msg_t*> frames;
  auto release_all = [&frames]() {
    for (auto* f : frames) zmq_msg_close(f), delete f;
    frames.clear();
  };
  // One multipart message: identity frame (added by ROUTER), meta, data frames.
  // ZeroMQ delivers multipart messages whole, so this loop never blocks mid-message.
  for (int more = 1; more;) {
    auto* part = new zmq_msg_t;
    zmq_msg_init(part);
    int flags = frames.empty() && wait == Wait::kNoWait ? ZMQ_DONTWAIT : 0;
    if (zmq_msg_recv(part, socket, flags) < 0) {
      zmq_msg_close(part);
      delete part;
      if (zmq_errno() == EINTR) continue;
      // Nothing there (kNoWait), or ZMQ_RCVTIMEO (set by a waiter) ran out, before a
      // message began.
      if (zmq_errno() == EAGAIN && frames.empty()) return Received::kTimedOut;
      LOG(ERROR) << "receive failed, van stops receiving: " << ZmqError();
      release_all();
      return Received::kDone;
    }
    frames.push_back(part);
    more = zmq_msg_more(part);
  }
  // Stop's wake-up, or anything that arrived after it: the van is done.
  if (stopped_.load(std::memory_order_acquire)) {
    release_all();
    return Received::kDone;
  }
  const bool empty_meta = frames.size() == 2 && zmq_msg_size(frames[1]) == 0;
  const bool nudge = empty_meta && IsNudge(static_cast<const char*>(zmq_msg_data(frames[0])),
                                           zmq_msg_size(frames[0]));
  // The guard learns which connection presents which identity: from every probe (a
  // connection's first message; the guard may not have seen it accepted yet), and from
  // any message while some connection has not shown a member's identity.
  if (!nudge && frames.size() >= 2 && (empty_meta || guard_.watching())) {
    int fd = zmq_msg_get(frames[1], ZMQ_SRCFD);
    if (fd >= 0) {
      guard_.Seen(fd, std::string(static_cast<const char*>(zmq_msg_data(frames[0])),
                                  zmq_msg_size(frames[0])));
    }
  }
  if (empty_meta) {
    release_all();
    if (!nudge) return Received::kMessage;  // a peer's probe (ZMQ_PROBE_ROUTER)
    RunReceiverTasks(channel);
    return Received::kNudge;
  }
  size_t total = 0;
  for (size_t i = 1; i < frames.size(); ++i) total += zmq_msg_size(frames[i]);
  if (frames.size() < 2) {
    LogDropped("no meta frame");
    release_all();
    return Received::kMessage;
  }
  if (total > static_cast<uint64_t>(options_.max_message_bytes)) {
    LogDropped("message of " + std::to_string(total) + " bytes is over PS_MAX_MESSAGE_BYTES=" +
               std::to_string(options_.max_message_bytes));
    release_all();
    return Received::kMessage;
  }
  if (frames.size() - 2 > static_cast<size_t>(options_.max_frames)) {
    LogDropped(std::to_string(frames.size() - 2) + " data frames, more than the limit of " +
               std::to_string(options_.max_frames));
    release_all();
    return Received::kMessage;
  }
  std::vector<size_t> sizes;
  for (size_t i = 2; i < frames.size(); ++i) sizes.push_back(zmq_msg_size(frames[i]));
  Message msg;
  ShmFields shm;
  Status s =
      DecodeMeta(zmq_msg_data(frames[1]), zmq_msg_size(frames[1]), sizes, &msg.meta, &shm);
  if (!s.ok()) {
    LogDropped(s.message());
    release_all();
    return Received::kMessage;
  }
  msg.peer_identity.assign(static_cast<const char*>(zmq_msg_data(frames[0])),
                           zmq_msg_size(frames[0]));
  if (!shm.empty()) {
    if (channel != Channel::kData) {
      LogDropped("shared-memory fields on the control channel");
      release_all();
      return Received::kMessage;
    }
    if (shm.has_offer) AnswerShmOffer(socket, msg.peer_identity, shm.offer);
    // The frames' real sizes, which the check above could not see.
    for (const ShmFrameRef& f : shm.frames) {
      total = f.length > SIZE_MAX - total ? SIZE_MAX : total + f.length;  // a peer's number
    }
    const uint64_t slack = kShmOfferBytes + kShmDescriptorBytes * shm.frames.size();
    if (total > static_cast<uint64_t>(options_.max_message_bytes) + slack) {
      LogDropped("message of " + std::to_string(total) +
                 " bytes is over PS_MAX_MESSAGE_BYTES=" +
                 std::to_string(options_.max_message_bytes));
      DiscardShmFrames(msg.peer_identity, shm);
      release_all();
      return Received::kMessage;
    }
  }
  if (channel == Channel::kData) shm_receiver_.Sweep();
  zmq_msg_close(frames[0]), delete frames[0];
  zmq_msg_close(frames[1]), delete frames[1];
  for (size_t i = 2; i < frames.size(); ++i) {
    msg.data.push_back(AdoptFrame(frames[i], &received_copied_bytes_));
  }
  frames.clear();
  if (!shm.frames.empty()) {
    s = AdoptShmFrames(msg.peer_identity, shm, &msg.data, msg.meta);
    if (!s.ok()) {
      LogDropped(s.message());
      return Received::kMessage;
    }
  }
  received_messages_.fetch_add(1, std::memory_order_relaxed);
  received_bytes_.fetch_add(total, std::memory_order_relaxed);
  if (channel == Channel::kData) CountDelivery();
  try {
    handler_(std::move(msg), channel);
  } catch (const std::exception& e) {
    // Whatever a handler throws, the node keeps serving (on the receive thread, or on a
    // waiter that must hand the ROUTER back).
    LOG(ERROR) << "message handler threw: " << e.what();
  } catch (...) {
    LOG(ERROR) << "message handler threw something that is not a std::exception";
  }
  return Received::kMessage;
}

void ZmqVan::Stop() {
  if (!started_ || stopped_.exchange(true)) return;
  for (Receiver& r : receivers_) {
    void* waker = zmq_socket(context_, ZMQ_DEALER);
    int linger = -1;  // an inproc message is handed over at once; never drop it
    if (!waker || zmq_setsockopt(waker, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
        zmq_connect(waker, r.wake_endpoint.c_str()) != 0 || zmq_send(waker, "", 0, 0) != 0) {
      // Ending every blocking call in the context wakes the thread too, at the cost of
      // what is still queued to go out.
      LOG(ERROR) << "cannot wake the van's receive thread (" << ZmqError()
                 << "); shutting its context down";
      zmq_ctx_shutdown(context_);
    }
    if (waker) zmq_close(waker);
  }
  WakeRoleThreadsForStop();
  for (Receiver& r : receivers_) {
    CHECK(r.thread.get_id() != std::this_thread::get_id())
        << "Van::Stop called from the van's own receive thread";
    r.thread.join();
  }
  ReleaseWaiters();
  // The ROUTERs' monitors go first (their sockets are this thread's now), so that no
  // event is on its way to the guard when it closes.
  for (Receiver& r : receivers_) zmq_socket_monitor(r.socket, nullptr, 0);
  guard_.Stop();
  for (Receiver& r : receivers_) {
    zmq_close(r.socket);
    r.socket = nullptr;
  }
  shm_receiver_.Clear();  // the app's views keep their rings until they go
  {
    std::unique_lock<std::shared_mutex> lock(peers_mu_);
    for (auto& kv : peers_) {
      for (Link& link : kv.second->links) link.closing = true;
    }
    for (auto& kv : peers_) {
      for (Link& link : kv.second->links) CloseLink(&link, kLingerMs);
    }
    peers_.clear();
  }
  // After the ROUTERs are closed: no handshake may find the ZAP handler gone.
  if (gate_) gate_->Stop();
  zmq_ctx_term(context_);
  context_ = nullptr;
  RemoveEndpointFiles();
}

void ZmqVan::RemoveEndpointFiles() {
  if (options_.transport != "ipc") return;
  for (Receiver& r : receivers_) {
    if (r.endpoint.size() > 6) unlink(r.endpoint.substr(6).c_str());
  }
}

VanStats ZmqVan::stats() const {
  VanStats s;
  s.sent_messages = sent_messages_.load();
  s.sent_bytes = sent_bytes_.load();
  s.received_messages = received_messages_.load();
  s.received_bytes = received_bytes_.load();
  s.dropped_messages = dropped_messages_.load();
  s.received_copied_bytes = received_copied_bytes_.load();
  s.shm_sent_frames = shm_sent_frames_.load();
  s.shm_sent_bytes = shm_sent_bytes_.load();
  s.shm_received_frames = shm_received_frames_.load();
  s.shm_received_bytes = shm_received_bytes_.load();
  s.shm_fallback_frames = shm_fallback_frames_.load();
  s.shm_copied_bytes = shm_copied_bytes_.load();
  s.shm_accepted_rings = shm_accepted_rings_.load();
  s.shm_refused_rings = shm_refused_rings_.load();
  s.received_in_wait = received_in_wait_.load();
  s.refused_connections = guard_.refused_connections();
  if (gate_) {
    s.refused_handshakes = gate_->refused_handshakes();
    s.failed_handshakes = gate_->failed_handshakes();
  }
  return s;
}

}  // namespace ps
