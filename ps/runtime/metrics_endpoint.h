// MetricsEndpoint: a minimal HTTP server on its own thread that answers every GET with
// a text page made on demand (the scheduler's /metrics, in the Prometheus text
// format; docs/operability.md). One connection at a time, each bounded in size and
// time, so a stuck or hostile client costs at most a short delay.
//
// Thread safety: Start and Stop from one thread; `page` runs on the endpoint's thread.
#ifndef HERDPS_PS_RUNTIME_METRICS_ENDPOINT_H_
#define HERDPS_PS_RUNTIME_METRICS_ENDPOINT_H_

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "ps/status.h"

namespace ps {

class MetricsEndpoint {
 public:
  using Page = std::function<std::string()>;
  ~MetricsEndpoint() { Stop(); }

  // Listens on host:port (an IPv4 address or a name) and serves `page` at /metrics
  // (and /). Unavailable naming the address when it cannot listen.
  Status Start(const std::string& host, int port, Page page);
  void Stop();

 private:
  void Serve();
  void Answer(int fd);

  Page page_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ps

#endif  // HERDPS_PS_RUNTIME_METRICS_ENDPOINT_H_
