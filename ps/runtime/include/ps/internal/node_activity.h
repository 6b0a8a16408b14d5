// NodeActivity: what this process waits in and what it has done, for the report every
// node sends the scheduler with its heartbeats (proto/node_report.proto). The scheduler
// turns the reports into the stall report (PS_STALL_REPORT: who waits for whom when
// nothing moves) and the metrics endpoint (PS_METRICS_PORT). See docs/operability.md.
//
// One per process (Get). The runtime counts received data messages; the worker side
// counts the requests it issues and their latencies, the server side those it serves;
// Customer::WaitRequest and ClockClient::EndClock register their waits while they block.
//
// Thread safety: every method is thread-safe. Counting is a relaxed atomic add. A
// wait's describe function is called under this object's lock, on the control loop,
// while the wait lasts: it must not wait for locks that are held around EndWait.
#ifndef PS_INTERNAL_NODE_ACTIVITY_H_
#define PS_INTERNAL_NODE_ACTIVITY_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace herdps {
namespace wire {
class NodeReport;
}  // namespace wire
}  // namespace herdps

namespace ps {

class NodeActivity {
 public:
  // Upper bounds (seconds) of the request latency histogram's buckets; one more bucket
  // counts what is above the last.
  static constexpr std::array<double, 14> kLatencyBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
      0.025, 0.05, 0.1, 0.25, 0.5, 1, 10};

  // What a wait is, as its thread knows it when asked.
  struct WaitInfo {
    std::string what;              // "Push(timestamp 7)"
    std::vector<int> waiting_for;  // node ids, when known
    int64_t clock_minimum = 0;     // a Clock() wait: the job minimum it needs (>= 1)
  };
  using Describe = std::function<void(WaitInfo*)>;

  static NodeActivity* Get();

  // A thread begins to wait; `describe` says in what (see the thread-safety note).
  // Returns the token for EndWait.
  uint64_t BeginWait(Describe describe);
  void EndWait(uint64_t token);

  // Counters.
  void CountReceivedData() { progress_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t progress() const { return progress_.load(std::memory_order_relaxed); }
  void CountIssued(bool push, bool pull);
  void CountServed(bool push, bool pull);
  void CountLatency(std::chrono::steady_clock::duration latency);
  void SetClocks(int64_t ended, bool finished);

  // A server's shard queue depths, read when a report is made. Returns the id for
  // RemoveQueueDepths, which must be called before what `depths` reads goes away.
  int AddQueueDepths(std::function<std::vector<uint64_t>()> depths);
  void RemoveQueueDepths(int id);

  // Writes the waits and counters of this object into *report (the transport's and
  // delivery's counters are the Postoffice's to add).
  void Fill(herdps::wire::NodeReport* report);

 private:
  struct Wait {
    Describe describe;
    std::chrono::steady_clock::time_point since;
  };
  std::atomic<uint64_t> progress_{0};
  std::atomic<uint64_t> push_requests_{0}, pull_requests_{0};
  std::atomic<uint64_t> served_push_{0}, served_pull_{0};
  std::array<std::atomic<uint64_t>, kLatencyBounds.size() + 1> latency_buckets_{};
  std::atomic<uint64_t> latency_ns_sum_{0};
  std::atomic<int64_t> clocks_ended_{0};
  std::atomic<bool> clocks_finished_{false};

  std::mutex mu_;  // guards waits_, next_token_ and queue_depths_
  std::map<uint64_t, Wait> waits_;
  uint64_t next_token_ = 1;
  std::map<int, std::function<std::vector<uint64_t>()>> queue_depths_;
  int next_depths_id_ = 1;
};

// Registers a wait for the lifetime of the object.
class ActivityWait {
 public:
  explicit ActivityWait(NodeActivity::Describe describe)
      : token_(NodeActivity::Get()->BeginWait(std::move(describe))) {}
  ~ActivityWait() { NodeActivity::Get()->EndWait(token_); }
  ActivityWait(const ActivityWait&) = delete;
  ActivityWait& operator=(const ActivityWait&) = delete;

 private:
  uint64_t token_;
};

}  // namespace ps

#endif  // PS_INTERNAL_NODE_ACTIVITY_H_
