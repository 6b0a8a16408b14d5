// ConnectionGuard: bounds what peers that are not members of the job can make a node
// hold. ZeroMQ buffers a frame whole before anyone reads it (up to ZMQ_MAXMSGSIZE per
// frame) and a multipart message without limit, from any TCP peer that can reach a
// port. So the guard watches each ROUTER's connections (a socket monitor gives their
// file descriptors) until one presents the routing identity of a member of the job
// (every DEALER of a node sends an empty probe first, ZMQ_PROBE_ROUTER, so this happens
// before its first real message); until then a connection may receive at most
// kMaxStrangerBytes (the kernel's count of bytes received, TCP_INFO), all such
// connections together kMaxStrangerTotalBytes, and there may be at most
// max_strangers of them. A connection past a limit is shut down (the kernel socket,
// which ZeroMQ then drops with whatever it buffered), counted and logged.
//
// ipc connections are not watched: only processes of the same user can open a socket
// file the runtime makes, and they could read the node's memory anyway.
//
// Thread safety: Seen and Admit from any thread; Start and Stop from the van's owner.
#ifndef HERDPS_VAN_CONNECTION_GUARD_H_
#define HERDPS_VAN_CONNECTION_GUARD_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "ps/internal/log_limiter.h"
#include "ps/status.h"

namespace ps {

class ConnectionGuard {
 public:
  // Bytes one connection may receive before it presents a member's identity: far more
  // than a join or the largest node table (65,536 nodes) needs.
  static constexpr uint64_t kMaxStrangerBytes = uint64_t{16} << 20;
  // Bytes all such connections together may receive (the largest go first past it).
  static constexpr uint64_t kMaxStrangerTotalBytes = uint64_t{128} << 20;
  // How often the byte counts of connections that have not identified are read.
  static constexpr int kCheckMs = 5;

  ConnectionGuard() = default;
  ~ConnectionGuard();
  ConnectionGuard(const ConnectionGuard&) = delete;
  ConnectionGuard& operator=(const ConnectionGuard&) = delete;

  // Other monitor events of a socket, for whoever else needs them (a socket has one
  // monitor): called on the guard's thread.
  using EventListener = std::function<void(uint16_t event, uint32_t value)>;
  // Watches `router`'s connections from now on: call before it binds (connections
  // accepted earlier are not seen), and before Start. `extra_events` go to `listener`.
  Status Monitor(void* context, void* router, int extra_events = 0,
                 EventListener listener = nullptr);
  // Starts checking. At most `max_strangers` connections that have not identified at
  // once; more are shut down, newest first.
  Status Start(size_t max_strangers);
  void Stop();

  // Whether some connection has not identified yet: only then does a receiving thread
  // need to tell the guard where its messages came from.
  bool watching() const { return strangers_.load(std::memory_order_relaxed) > 0; }
  // A message (or a probe) arrived on connection `fd` with routing identity `identity`.
  void Seen(int fd, const std::string& identity);
  // `identity` is a member's (or a joining node's): connections presenting it are
  // admitted, now and later.
  void Admit(const std::string& identity);

  uint64_t refused_connections() const { return refused_.load(); }

 private:
  struct Connection {
    std::string peer;   // getpeername, as text: to check that an fd is still this one
    std::string local;  // getsockname, likewise
    uint64_t order = 0;   // accept order
    bool tcp = false;     // only TCP connections are watched
    bool admitted = false;
    bool refused = false;  // shut down; forgotten when ZeroMQ reports it gone
    std::string identity;  // presented, not (yet) a member's
  };
  void Run();
  // Reads monitor `i`'s events; under mu_.
  void OnEvents(size_t i);
  void Watch(int fd);
  void Forget(int fd);
  // Shuts down the connections past a limit; under mu_.
  void CheckLimits();
  // Shuts connection `fd` down (if it still is the one accepted); under mu_.
  void Refuse(int fd, const std::string& why);
  void AdmitLocked(int fd, Connection& c);

  void* context_ = nullptr;
  std::vector<void*> monitors_;  // PAIR sockets reading each ROUTER's monitor
  std::vector<EventListener> listeners_;  // by monitor
  void* wake_ = nullptr;         // PAIR: Stop's wake-up (the guard thread holds its peer)
  void* wake_receiver_ = nullptr;
  std::thread thread_;
  size_t max_strangers_ = 0;

  std::mutex mu_;  // guards everything below
  std::map<int, Connection> connections_;  // by file descriptor
  // Identities seen on connections before their accept event came, by descriptor.
  static constexpr size_t kMaxSeenEarly = 4096;
  std::map<int, std::string> seen_early_;
  std::unordered_set<std::string> members_;
  uint64_t accepted_ = 0;
  std::atomic<size_t> strangers_{0};  // connections that are TCP, not admitted, not refused
  std::atomic<uint64_t> refused_{0};
  LogLimiter log_;
};

}  // namespace ps

#endif  // HERDPS_VAN_CONNECTION_GUARD_H_
