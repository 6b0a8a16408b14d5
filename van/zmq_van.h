// ZmqVan: the ZeroMQ transport (tcp and ipc).
//
// Sockets: per channel (data, control), one ROUTER bound to this node's endpoint
// receives, read by that channel's own receive thread; per peer and channel one
// DEALER sends. Each DEALER has its own mutex (ZeroMQ sockets are not thread-safe),
// so senders to different peers never wait for each other. Data frames are handed to
// ZeroMQ without copying: the frame's SArray is kept alive by ZeroMQ's free callback.
// With a CURVE key (VanOptions::curve_secret_key) a CurveGate secures every socket.
#ifndef HERDPS_VAN_ZMQ_VAN_H_
#define HERDPS_VAN_ZMQ_VAN_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "curve_gate.h"
#include "ps/internal/log_limiter.h"
#include "ps/internal/van.h"

namespace ps {

class ZmqVan : public Van {
 public:
  ZmqVan() = default;
  ~ZmqVan() override;

  Status Start(const VanOptions& options, Handler handler) override;
  const std::string& endpoint() const override { return receivers_[0].endpoint; }
  const std::string& control_endpoint() const override { return receivers_[1].endpoint; }
  int port() const override { return receivers_[0].port; }
  int control_port() const override { return receivers_[1].port; }
  Status Connect(int node_id, const std::string& endpoint,
                 const std::string& control_endpoint, bool with_identity) override;
  void Disconnect(int node_id) override;
  Status Send(const Message& msg, SendMode mode, Channel channel) override;
  void Stop() override;
  VanStats stats() const override;

 private:
  // One channel's connection to a peer.
  struct Link {
    // Set (before taking mu) by Disconnect and Stop: a sender waiting for room gives
    // up within one retry slice instead of holding mu for the whole send timeout.
    std::atomic<bool> closing{false};
    std::mutex mu;  // serialises use of `socket`
    void* socket = nullptr;
    std::string endpoint;
    bool with_identity = true;
  };
  struct Peer {
    Link links[2];  // by Channel
    // Whether this peer's connections go to these endpoints (both set).
    bool Reaches(const std::string& data, const std::string& control) {
      if (data.empty() || control.empty()) return false;
      std::lock_guard<std::mutex> data_lock(links[0].mu);
      std::lock_guard<std::mutex> control_lock(links[1].mu);
      return links[0].endpoint == data && links[1].endpoint == control;
    }
  };
  // One channel's receiving side.
  struct Receiver {
    void* socket = nullptr;  // owned by `thread` after Start
    std::string endpoint;
    std::string wake_endpoint;  // inproc: Stop sends one message here to end `thread`
    int port = 0;
    std::thread thread;
  };

  void ReceiveLoop(Channel channel);
  // Waits for one multipart message and hands it on. Returns false when the socket
  // failed for good or the van is stopping.
  bool ReceiveOne(Channel channel);
  Status Bind(Receiver* receiver, int port);
  // A DEALER connected to `endpoint` (with this node's identity if `with_identity`),
  // or nullptr.
  void* NewPeerSocket(const std::string& endpoint, bool with_identity, Status* error);
  static void CloseLink(Link* link, int linger_ms);
  std::shared_ptr<Peer> FindPeer(int node_id);
  void LogDropped(const std::string& reason);

  VanOptions options_;
  Handler handler_;
  void* context_ = nullptr;
  std::unique_ptr<CurveGate> gate_;  // set by Start when the van has a CURVE key
  Receiver receivers_[2];  // by Channel
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};

  std::shared_mutex peers_mu_;  // guards the map, not the peers' sockets
  std::unordered_map<int, std::shared_ptr<Peer>> peers_;

  LogLimiter drop_log_;
  std::atomic<uint64_t> sent_messages_{0}, sent_bytes_{0}, received_messages_{0},
      received_bytes_{0}, dropped_messages_{0}, received_copied_bytes_{0};
};

}  // namespace ps

#endif  // HERDPS_VAN_ZMQ_VAN_H_
