// CurveGate: ZeroMQ CURVE on every socket of a ZmqVan (PS_SECURE=1). Internal to the van.
//
// The job has one keypair, and every node holds its secret key (the public key is
// derived from it). Every ROUTER is a CURVE server with that keypair; every DEALER is a
// CURVE client that expects the job's public key from the server and presents the same
// keypair as its own. A CURVE client proves in the handshake that it holds the secret
// of the public key it presents, so the gate's ZAP handler, which admits exactly the
// clients that present the job's public key, admits exactly the holders of the job's
// secret. Every admitted connection is encrypted and authenticated with short-term keys
// of its own (forward secrecy), and a process without the secret gets no connection:
// nothing it sends reaches the van's receive threads. docs/security.md has the threat
// model.
//
// The gate's thread answers ZeroMQ's ZAP requests for the van's context and watches
// the handshakes of the van's sockets: an incoming connection that fails its handshake
// is counted and logged (rate-limited) on the node that refused it, and a connection of
// this node that a peer refuses is counted and logged with the likely cause (a peer
// without CURVE, or another key).
//
// Thread safety: Start and Stop from the van's owner; SecureServer and SecureClient
// from any thread, each on a socket that thread owns at the time; the counters from any
// thread.
#ifndef HERDPS_VAN_CURVE_GATE_H_
#define HERDPS_VAN_CURVE_GATE_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ps/internal/log_limiter.h"
#include "ps/status.h"

namespace ps {

class CurveGate {
 public:
  // Bytes CURVE adds to a frame on the wire (the MESSAGE command's name, nonce, flags
  // and MAC, rounded up): the socket's frame limit is raised by this much, so that the
  // largest message the van accepts still fits once encrypted.
  static constexpr int64_t kFrameOverheadBytes = 64;

  CurveGate() = default;
  ~CurveGate();
  CurveGate(const CurveGate&) = delete;
  CurveGate& operator=(const CurveGate&) = delete;

  // Derives the job's public key from `secret_key` (40 characters of Z85), binds the ZAP
  // handler in `context` and starts the gate's thread. Must come before any socket of
  // the context binds or connects over tcp or ipc: a CURVE handshake that finds no ZAP
  // handler is let through by ZeroMQ. Returns InvalidArgument for a malformed key (the
  // message never contains the key), Unavailable when this libzmq has no CURVE.
  Status Start(void* context, const std::string& secret_key);

  // Makes `router` a CURVE server under the job's keypair. Call before the socket binds.
  // Its handshakes are watched by whoever monitors it (a socket has one monitor: the
  // van's ConnectionGuard), which hands kHandshakeEvents to ServerEvent.
  Status SecureServer(void* router, const std::string& endpoint);
  // Monitor events of a CURVE server's failed handshakes.
  static const int kHandshakeEvents;
  // A monitor event of the server `endpoint`: a refused connection is counted and logged.
  void ServerEvent(const std::string& endpoint, uint16_t event, uint32_t value);

  // Makes `dealer` a CURVE client under the job's keypair and watches its handshakes
  // (`endpoint`: the peer it will connect to, for logs). Call before it connects.
  Status SecureClient(void* dealer, const std::string& endpoint);

  // Ends the thread and closes the gate's sockets. Call after the van's ROUTERs are
  // closed (so that no handshake can find the ZAP handler gone) and before the context
  // is terminated. Idempotent.
  void Stop();

  // Incoming connections refused here: no CURVE, another key, or a broken handshake.
  uint64_t refused_handshakes() const { return refused_.count(); }
  // Connections of this node that a peer refused.
  uint64_t failed_handshakes() const { return failed_.count(); }
  // The first 8 characters of the job's public key (Z85), to compare nodes' logs; the
  // whole public key is never logged.
  std::string fingerprint() const { return public_key_.substr(0, 8); }

 private:
  // A monitor of one socket: the PAIR this gate reads the socket's events from.
  struct Watch {
    void* pair = nullptr;
    bool server = false;
    std::string endpoint;
  };

  Status AddWatch(void* socket, bool server, const std::string& endpoint);
  void Run();
  // Answers one ZAP request (frames as the ZAP ROUTER received them).
  void Answer(const std::vector<std::string>& frames);
  // Reads the events waiting on `watch`; false once its socket is closed.
  bool Drain(const Watch& watch);
  void Report(const Watch& watch, uint16_t event, uint32_t value);

  void* context_ = nullptr;
  void* zap_ = nullptr;  // ROUTER on the ZAP endpoint; owned by thread_ after Start
  std::string wake_endpoint_;
  std::string secret_key_, public_key_;  // Z85
  std::string public_key_bytes_;         // what a ZAP request carries
  std::thread thread_;
  std::atomic<bool> stopping_{false};

  std::mutex pending_mu_;       // guards pending_ and next_watch_
  std::vector<Watch> pending_;  // new monitors, adopted by thread_
  uint64_t next_watch_ = 0;

  LogLimiter refused_, failed_;
};

}  // namespace ps

#endif  // HERDPS_VAN_CURVE_GATE_H_
