// ClockClient: this node's side of the job's clocks (see ps/consistency.h). A worker
// ends its clocks through it (KVWorker::Clock) and waits as the job's model says; every
// worker and server learns the global minimum clock from the scheduler's clock
// coordinator, which pushes each new minimum (no polling).
//
// The clock belongs to the node (the process), not to one KVWorker.
//
// Thread safety: all methods are thread-safe. Listeners run on the client's own
// thread (its SimpleApp's), one at a time.
#ifndef PS_INTERNAL_CLOCK_CLIENT_H_
#define PS_INTERNAL_CLOCK_CLIENT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "ps/consistency.h"
#include "ps/status.h"

namespace ps {

class SimpleApp;

// The app id of the clock coordinator and its clients; reserved (no user plugin or
// SimpleApp may take it).
constexpr int kClockAppId = -7;

// The coordinator's commands (SimpleApp heads).
enum ClockCommand : int {
  kClockEnded = 1,     // worker -> scheduler, body: the clock it ended; answer: the minimum
  kClockFinished = 2,  // worker -> scheduler: it will end no more clocks; answer: the minimum
  kClockMinimum = 3,   // scheduler -> workers and servers, body: the new minimum
};

// "Every counted worker is finished": the minimum when no live worker counts.
constexpr int64_t kAllClocksEnded = std::numeric_limits<int64_t>::max();

// Minimums travel as decimal text; false if `text` is not one (network input).
bool ParseClockText(const std::string& text, int64_t* out);

class ClockClient {
 public:
  // Called with each new minimum, in non-decreasing order (the same value may come
  // twice around AddListener).
  using Listener = std::function<void(int64_t minimum)>;

  // `worker`: this node ends clocks (a worker); else it only follows the minimum (a
  // server). With a model that never waits (asp) no message is ever sent.
  ClockClient(const ConsistencyModel& model, bool worker);
  ~ClockClient();
  ClockClient(const ClockClient&) = delete;
  ClockClient& operator=(const ClockClient&) = delete;

  const ConsistencyModel& model() const { return model_; }
  // The clock this node is in: the number of clocks it has ended.
  int64_t current() const { return current_.load(std::memory_order_acquire); }
  // The smallest clock any counted live worker is in, as last pushed by the scheduler:
  // every clock below it has been ended by every counted worker.
  int64_t minimum() const { return minimum_.load(std::memory_order_acquire); }

  // Ends the current clock c and, under bsp / ssp:S, blocks until clock c+1 may begin
  // (minimum >= c+1-S). Unavailable if this worker finished its clocks (before or
  // while it waits), if the scheduler is lost, or on shutdown; the clock is ended all
  // the same. The client must outlive every call (Finalize destroys it: do not call
  // Finalize while another thread is in EndClock).
  Status EndClock();
  // This worker ends no more clocks: the others stop waiting for it. Later EndClock
  // calls fail. Idempotent.
  Status Finish();

  // Adds a listener of minimum changes (servers use it to close aggregation rounds);
  // it is called at once with the current minimum when that is above 0. Returns an id
  // for RemoveListener.
  int AddListener(Listener listener);
  // Removes a listener; once it returns, the listener is not running and never runs
  // again. Must not be called from a listener.
  void RemoveListener(int id);
  // Wakes every waiter with `why` (the node is shutting down or gave up).
  void Abort(const std::string& why);

 private:
  void OnMinimum(int64_t minimum);

  const ConsistencyModel model_;
  const bool worker_;
  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> minimum_{0};
  std::mutex mu_;  // guards finished_, aborted_; minimum_ changes under it
  std::condition_variable cv_;
  std::mutex listeners_mu_;  // guards listeners_; held while they run
  std::map<int, Listener> listeners_;
  bool finished_ = false;
  std::string aborted_;  // why waits end, once the node stops
  std::mutex end_mu_;    // serialises reporting ended clocks (not the waits)
  std::unique_ptr<SimpleApp> app_;  // last: destroyed first; null under asp
};

}  // namespace ps

#endif  // PS_INTERNAL_CLOCK_CLIENT_H_
