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

std::string ZmqError() { return zmq_strerror(zmq_errno()); }

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

bool ZmqVan::SetPath(const std::string& path, bool on) {
  if (path == "shm") {
    shm_on_ = on && options_.zmq.shm;
    return true;
  }
  if (path == "receive_in_wait") {
    receive_in_wait_ = on;
    return true;
  }
  if (path == "coalesce_first") {
    coalesce_first_ = on;
    return true;
  }
  return false;
}

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
  if (options_.zmq.shm) {
    local_hosts_ = LocalAddresses();
    local_hosts_.insert(options_.host);
    local_hosts_.insert("localhost");
  }
  shm_on_ = options_.zmq.shm;
  coalesce_on_ = options_.zmq.coalesce;
  coalesce_first_ = options_.zmq.coalesce_first;
  if (coalesce_on_) {
    lead_timer_ = std::make_unique<FlushTimer>(options_.zmq.coalesce_first_delay, [this] {
      uint64_t sent = 0;
      const bool left = Flush(SendMode::kNonBlocking, /*own_blocking=*/false, &sent);
      if (sent > 0) deadline_flushes_.fetch_add(1, std::memory_order_relaxed);
      return left;
    });
  }
  context_ = zmq_ctx_new();
  if (!context_) return Status::Internal("zmq_ctx_new failed: " + ZmqError());
  zmq_ctx_set(context_, ZMQ_MAX_SOCKETS, 65536);
  Status s;
  if (!options_.zmq.curve_secret_key.empty()) {
    // Before any socket exists: the gate's ZAP handler must answer the first handshake.
    gate_ = std::make_unique<CurveGate>();
    s = gate_->Start(context_, options_.zmq.curve_secret_key);
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
  if (lead_timer_) lead_timer_->Stop();
  // What app threads coalesced last goes out with the linger; a peer with no room left
  // in its queue does not hold Stop up.
  FlushCoalesced(SendMode::kNonBlocking);
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
  s.push_request_bytes = push_request_bytes_.load();
  s.push_requests = push_requests_.load();
  s.received_copied_bytes = received_copied_bytes_.load();
  s.shm_sent_frames = shm_sent_frames_.load();
  s.shm_lent_frames = shm_lent_frames_.load();
  s.shm_sent_bytes = shm_sent_bytes_.load();
  s.shm_received_frames = shm_received_frames_.load();
  s.shm_received_bytes = shm_received_bytes_.load();
  s.shm_fallback_frames = shm_fallback_frames_.load();
  s.shm_copied_bytes = shm_copied_bytes_.load();
  s.shm_accepted_rings = shm_accepted_rings_.load();
  s.shm_refused_rings = shm_refused_rings_.load();
  s.received_in_wait = received_in_wait_.load();
  s.coalesced_messages = coalesced_messages_.load();
  s.sent_batches = sent_batches_.load();
  s.deadline_flushes = deadline_flushes_.load();
  s.received_batches = received_batches_.load();
  s.refused_connections = guard_.refused_connections();
  if (gate_) {
    s.refused_handshakes = gate_->refused_handshakes();
    s.failed_handshakes = gate_->failed_handshakes();
  }
  return s;
}

}  // namespace ps
