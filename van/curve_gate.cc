#include "curve_gate.h"

#include <glog/logging.h>
#include <zmq.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace ps {
namespace {

// The endpoint ZeroMQ sends a context's ZAP requests to (RFC 27).
constexpr char kZapEndpoint[] = "inproc://zeromq.zap.01";
constexpr char kZapDomain[] = "herdps";
// A draft option of libzmq 4.3 that Debian's build has: refuse a handshake when no ZAP
// handler answers, instead of letting it through. Where the option is missing, the
// gate's order of binding and closing (see Start and Stop) keeps the handler present.
#ifndef ZMQ_ZAP_ENFORCE_DOMAIN
#define ZMQ_ZAP_ENFORCE_DOMAIN 93
#endif

// How often the gate's thread looks for sockets to watch that were added meanwhile
// (their events wait in the monitor's queue until then).
constexpr long kAdoptIntervalMs = 200;

constexpr int kWatchedEvents = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_MONITOR_STOPPED;

std::string ZmqError() { return zmq_strerror(zmq_errno()); }

bool SetKey(void* socket, int option, const std::string& z85_key) {
  return zmq_setsockopt(socket, option, z85_key.data(), z85_key.size()) == 0;
}

// Receives one whole multipart message; false if the socket failed.
bool ReceiveFrames(void* socket, std::vector<std::string>* frames, int flags) {
  frames->clear();
  for (int more = 1; more;) {
    zmq_msg_t part;
    zmq_msg_init(&part);
    if (zmq_msg_recv(&part, socket, flags) < 0) {
      zmq_msg_close(&part);
      if (zmq_errno() == EINTR && frames->empty()) continue;
      return false;
    }
    frames->emplace_back(static_cast<const char*>(zmq_msg_data(&part)), zmq_msg_size(&part));
    more = zmq_msg_more(&part);
    zmq_msg_close(&part);
  }
  return true;
}

// Why an incoming connection was refused, from a monitor event of the ROUTER.
std::string RefusalReason(uint16_t event, uint32_t value) {
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
      value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
    return "the peer does not use CURVE (a node without PS_SECURE=1, or a process "
           "outside the job)";
  }
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
    return "the peer presented a key other than the job's";
  }
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
    return "the peer's CURVE handshake does not match the job's key (another key, or "
           "a malformed handshake)";
  }
  return "the handshake broke off";
}

// Why a peer refused this node's connection, from a monitor event of a DEALER.
std::string FailureReason(uint16_t event, uint32_t value) {
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
      value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
    return "the peer does not use CURVE: it runs without PS_SECURE=1 (every node of a "
           "job needs the same setting)";
  }
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
    return "the peer refused this node's key (status " + std::to_string(value) +
           "): PS_CURVE_SECRET_KEY is not the job's key";
  }
  return "the peer broke off the CURVE handshake: it holds another key than this node "
         "(PS_CURVE_SECRET_KEY must be the job's key on every node)";
}

}  // namespace

CurveGate::~CurveGate() { Stop(); }

Status CurveGate::Start(void* context, const std::string& secret_key) {
  if (!zmq_has("curve")) {
    return Status::Unavailable(
        "PS_SECURE=1 needs ZeroMQ's CURVE, and this libzmq was built without it (install "
        "a libzmq built with libsodium, e.g. Debian's libzmq5)");
  }
  char public_key[41];
  if (secret_key.size() != 40 || zmq_curve_public(public_key, secret_key.c_str()) != 0) {
    return Status::InvalidArgument(
        "the CURVE secret key is not 40 characters of Z85 encoding 32 bytes (tracker/launch "
        "--secure makes one)");
  }
  uint8_t public_bytes[32];
  if (!zmq_z85_decode(public_bytes, public_key)) {
    return Status::Internal("cannot decode the CURVE public key");
  }
  context_ = context;
  secret_key_ = secret_key;
  public_key_ = public_key;
  public_key_bytes_.assign(reinterpret_cast<const char*>(public_bytes), sizeof(public_bytes));
  zap_ = zmq_socket(context_, ZMQ_ROUTER);
  if (!zap_) return Status::Internal("cannot create the ZAP socket: " + ZmqError());
  int linger = 0;
  zmq_setsockopt(zap_, ZMQ_LINGER, &linger, sizeof(linger));
  // Stop wakes the thread through an endpoint of its own, as the van's receivers do.
  wake_endpoint_ =
      "inproc://herdps-curve-gate-stop-" + std::to_string(reinterpret_cast<uintptr_t>(this));
  if (zmq_bind(zap_, kZapEndpoint) != 0 || zmq_bind(zap_, wake_endpoint_.c_str()) != 0) {
    Status s = Status::Internal("cannot bind the ZAP handler: " + ZmqError());
    zmq_close(zap_);
    zap_ = nullptr;
    return s;
  }
  thread_ = std::thread([this] { Run(); });
  return Status::OK();
}

Status CurveGate::SecureServer(void* router, const std::string& endpoint) {
  int on = 1;
  if (zmq_setsockopt(router, ZMQ_CURVE_SERVER, &on, sizeof(on)) != 0 ||
      !SetKey(router, ZMQ_CURVE_SECRETKEY, secret_key_) ||
      zmq_setsockopt(router, ZMQ_ZAP_DOMAIN, kZapDomain, std::strlen(kZapDomain)) != 0) {
    return Status::Internal("cannot make " + endpoint + " a CURVE server: " + ZmqError());
  }
  // Best effort (a draft option; see above).
  zmq_setsockopt(router, ZMQ_ZAP_ENFORCE_DOMAIN, &on, sizeof(on));
  return Status::OK();
}

const int CurveGate::kHandshakeEvents = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                                        ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                        ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;

void CurveGate::ServerEvent(const std::string& endpoint, uint16_t event, uint32_t value) {
  Watch watch;
  watch.server = true;
  watch.endpoint = endpoint;
  Report(watch, event, value);
}

Status CurveGate::SecureClient(void* dealer, const std::string& endpoint) {
  if (!SetKey(dealer, ZMQ_CURVE_SERVERKEY, public_key_) ||
      !SetKey(dealer, ZMQ_CURVE_PUBLICKEY, public_key_) ||
      !SetKey(dealer, ZMQ_CURVE_SECRETKEY, secret_key_)) {
    return Status::Internal("cannot make the connection to " + endpoint +
                            " a CURVE client: " + ZmqError());
  }
  return AddWatch(dealer, false, endpoint);
}

Status CurveGate::AddWatch(void* socket, bool server, const std::string& endpoint) {
  std::string monitor;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    monitor = "inproc://herdps-curve-watch-" + std::to_string(reinterpret_cast<uintptr_t>(this)) +
              "-" + std::to_string(next_watch_++);
  }
  Watch watch;
  watch.server = server;
  watch.endpoint = endpoint;
  // The PAIR connects before the socket does anything, so no event is missed; events
  // wait in it until the gate's thread adopts it.
  if (zmq_socket_monitor(socket, monitor.c_str(), kWatchedEvents) != 0 ||
      !(watch.pair = zmq_socket(context_, ZMQ_PAIR))) {
    return Status::Internal("cannot watch the handshakes of " + endpoint + ": " + ZmqError());
  }
  int linger = 0;
  zmq_setsockopt(watch.pair, ZMQ_LINGER, &linger, sizeof(linger));
  if (zmq_connect(watch.pair, monitor.c_str()) != 0) {
    Status s = Status::Internal("cannot watch the handshakes of " + endpoint + ": " + ZmqError());
    zmq_close(watch.pair);
    zmq_socket_monitor(socket, nullptr, 0);
    return s;
  }
  std::lock_guard<std::mutex> lock(pending_mu_);
  pending_.push_back(std::move(watch));
  return Status::OK();
}

void CurveGate::Run() {
  std::vector<Watch> watches;  // this thread's
  std::vector<zmq_pollitem_t> items;
  std::vector<std::string> frames;
  while (!stopping_.load(std::memory_order_acquire)) {
    {
      std::lock_guard<std::mutex> lock(pending_mu_);
      for (Watch& w : pending_) watches.push_back(std::move(w));
      pending_.clear();
    }
    items.assign(1, zmq_pollitem_t{zap_, 0, ZMQ_POLLIN, 0});
    for (const Watch& w : watches) items.push_back(zmq_pollitem_t{w.pair, 0, ZMQ_POLLIN, 0});
    if (zmq_poll(items.data(), static_cast<int>(items.size()), kAdoptIntervalMs) < 0) {
      if (zmq_errno() == EINTR) continue;
      // The ZAP socket stays bound until Stop: handshakes then wait for an answer that
      // never comes and fail, rather than pass unchecked.
      LOG(ERROR) << "CURVE gate stops answering: " << ZmqError()
                 << "; no new connection will be admitted";
      break;
    }
    if (items[0].revents & ZMQ_POLLIN) {
      if (!ReceiveFrames(zap_, &frames, ZMQ_DONTWAIT)) continue;
      if (stopping_.load(std::memory_order_acquire)) break;
      Answer(frames);
    }
    for (size_t i = watches.size(); i-- > 0;) {
      if ((items[i + 1].revents & ZMQ_POLLIN) && !Drain(watches[i])) {
        zmq_close(watches[i].pair);
        watches.erase(watches.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
  }
  for (Watch& w : watches) zmq_close(w.pair);
}

void CurveGate::Answer(const std::vector<std::string>& frames) {
  // [routing id] [] "1.0" request-id domain address identity mechanism credentials...
  if (frames.size() < 8 || !frames[1].empty()) return;  // not a ZAP request
  const std::string& mechanism = frames[7];
  bool admitted = frames[2] == "1.0" && mechanism == "CURVE" && frames.size() == 9 &&
                  frames[8] == public_key_bytes_;
  // A refused key also fails the client's handshake, which the ROUTER's watch counts
  // and logs; nothing to count here.
  const std::string reply[] = {frames[0],
                               "",
                               "1.0",
                               frames[3],
                               admitted ? "200" : "400",
                               admitted ? "OK" : "not the job's key",
                               "",
                               ""};
  const size_t n = sizeof(reply) / sizeof(reply[0]);
  for (size_t i = 0; i < n; ++i) {
    zmq_send(zap_, reply[i].data(), reply[i].size(), i + 1 < n ? ZMQ_SNDMORE : 0);
  }
}

bool CurveGate::Drain(const Watch& watch) {
  std::vector<std::string> frames;
  while (ReceiveFrames(watch.pair, &frames, ZMQ_DONTWAIT)) {
    // Event: [16-bit event, 32-bit value] [endpoint] (ZeroMQ's first monitor format).
    if (frames.empty() || frames[0].size() < 6) continue;
    uint16_t event;
    uint32_t value;
    std::memcpy(&event, frames[0].data(), sizeof(event));
    std::memcpy(&value, frames[0].data() + sizeof(event), sizeof(value));
    if (event == ZMQ_EVENT_MONITOR_STOPPED) return false;
    Report(watch, event, value);
  }
  return true;
}

void CurveGate::Report(const Watch& watch, uint16_t event, uint32_t value) {
  if (watch.server) {
    if (refused_.ShouldLog()) {
      LOG(WARNING) << "refused a connection to " << watch.endpoint << " (" << refused_.count()
                   << " so far): " << RefusalReason(event, value);
    }
    return;
  }
  if (failed_.ShouldLog()) {
    LOG(ERROR) << "cannot connect to " << watch.endpoint << " (" << failed_.count()
               << " failed handshakes so far): " << FailureReason(event, value);
  }
}

void CurveGate::Stop() {
  if (!zap_) return;
  if (thread_.joinable()) {
    stopping_.store(true, std::memory_order_release);
    void* waker = zmq_socket(context_, ZMQ_DEALER);
    int linger = -1;  // an inproc message is handed over at once; never drop it
    if (waker) {
      zmq_setsockopt(waker, ZMQ_LINGER, &linger, sizeof(linger));
      if (zmq_connect(waker, wake_endpoint_.c_str()) == 0) zmq_send(waker, "", 0, 0);
      zmq_close(waker);
    }
    // Without the wake-up, the thread still sees stopping_ within kAdoptIntervalMs.
    thread_.join();
  }
  zmq_close(zap_);
  zap_ = nullptr;
  std::lock_guard<std::mutex> lock(pending_mu_);
  for (Watch& w : pending_) zmq_close(w.pair);
  pending_.clear();
}

}  // namespace ps
