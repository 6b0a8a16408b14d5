// RawTransport: the baseline the benchmark compares HerdPS with: the same payloads
// over a plain ZeroMQ DEALER/ROUTER pair between the same two processes, zero-copy on
// both sides, with no HerdPS code in the path.
#ifndef HERDPS_APPS_BENCH_RAW_TRANSPORT_H_
#define HERDPS_APPS_BENCH_RAW_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace bench {

enum class Op : char { kPush = 'p', kPull = 'l', kPushPull = 'b', kQuit = 'q' };

// The server side: answers push with a 1-byte ack, pull with `size` bytes, push-pull
// by echoing the payload. Runs on its own thread until a client sends kQuit or
// Stop() is called.
class RawServer {
 public:
  RawServer() = default;
  ~RawServer();
  // Binds tcp://host:* and starts serving; returns the port, or -1.
  int Start(const std::string& host);
  void Stop();

 private:
  void Serve();
  void* context_ = nullptr;
  void* socket_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::vector<char> payload_;  // what pulls return, grown on demand
};

// The client side. One request at a time or a window of them. A request or answer that
// cannot go through within `timeout_ms` (the server's node died) ends the process with
// status 1 and a message: a benchmark must not hang.
class RawClient {
 public:
  RawClient() = default;
  ~RawClient();
  bool Connect(const std::string& endpoint, int timeout_ms);
  // Sends one request of `size` payload bytes (zero-copy from `buffer`).
  void Send(Op op, const char* buffer, uint64_t size);
  // Receives the oldest outstanding answer; returns its payload size.
  uint64_t Receive();
  void Quit();

 private:
  [[noreturn]] void GiveUp(const char* what) const;
  void* context_ = nullptr;
  void* socket_ = nullptr;
  int timeout_ms_ = -1;
};

}  // namespace bench

#endif  // HERDPS_APPS_BENCH_RAW_TRANSPORT_H_
