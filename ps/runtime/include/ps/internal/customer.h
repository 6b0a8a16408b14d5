// Customer: one app's (or one KVWorker's) endpoint in the runtime: it receives the
// messages addressed to its (app_id, customer_id) and tracks its requests.
//
// Delivery. kOwnThread (the default for a bare Customer, and SimpleApp's) runs the
// receive handle on the customer's own thread, fed in arrival order through a bounded
// queue (one hand-off between the network and app code); when the queue is full the
// channel's receive thread waits for room and stops reading (backpressure), while the
// node's control loop (heartbeats, timers) goes on. kReceiveThread runs the handle on
// the thread that receives the channel the message came on: KVServer and KVWorker use
// it on the data channel, whose receiving carries no control traffic, so a blocking
// handle delays data only. The data channel is received by its receive thread, or by
// a thread waiting in WaitRequest for a request made with NewDataRequest (a
// KVWorker's), which receives itself so that its answer wakes it directly
// (Van::ReceiveWhileWaiting; PS_RECEIVE_IN_WAIT=0 turns that off).
//
// Requests. Each request has a 64-bit id (1, 2, ... for this customer) and, for
// ps-lite's int API, a timestamp (the low 31 bits of id - 1, so 0, 1, ...; they wrap
// after 2^31 requests, and a timestamp then names the newest request with those bits). Every customer has a
// random incarnation that travels with its requests and comes back with the answers,
// so an answer meant for a destroyed customer never reaches a new one with the same
// ids. A request names the nodes it waits for: it ends with Unavailable when one of
// them dies or leaves, and with Timeout at the job's PS_REQUEST_TIMEOUT, driven by the
// node's timers (see AbortHandle).
//
// Tracking is bounded: a finished request is forgotten unless it failed, and only the
// newest kMaxRememberedFailures failures are remembered (waiting on an older failed
// request returns OK, so wait on a request before issuing thousands more if its
// outcome matters).
//
// Thread safety: all methods are thread-safe.
#ifndef PS_INTERNAL_CUSTOMER_H_
#define PS_INTERNAL_CUSTOMER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ps/internal/message.h"
#include "ps/internal/node_activity.h"
#include "ps/status.h"

namespace ps {

class CustomerExecutor;

class Customer {
 public:
  using Clock = std::chrono::steady_clock;
  using RecvHandle = std::function<void(Message& msg)>;
  // Ends an unfinished request early (its peer died, or its deadline passed). The
  // owner cleans up and must call FinishRequest(timestamp, status). Runs on the node's
  // control thread: it must not block or run app code (post that with RunOnOwnThread).
  using AbortHandle = std::function<void(int timestamp, uint64_t request_id, const Status&)>;
  // Says what request `request_id` waits for, for the stall report (NodeActivity):
  // fills `what` and the node ids not answered yet, or returns false to leave it to the
  // customer (the request's peers). Called on the control loop without the customer's
  // lock; it must not block on app code.
  using DescribeHandle = std::function<bool(uint64_t request_id, NodeActivity::WaitInfo*)>;
  enum class Delivery { kOwnThread, kReceiveThread };
  struct Options {
    Delivery delivery = Delivery::kOwnThread;
    size_t queue_capacity = 4096;  // messages waiting for the own thread
  };
  static constexpr size_t kMaxRememberedFailures = 4096;

  // Registers with the Postoffice unless `open_now` is false (then call Open() once
  // the handle is ready to run), also before ps::Start. Throws ps::Error if
  // (app_id, customer_id) is already taken on this node.
  Customer(int app_id, int customer_id, RecvHandle handle, bool open_now = true);
  Customer(int app_id, int customer_id, RecvHandle handle, bool open_now, Options options);
  // Registers with the Postoffice: from now on messages reach the handle, starting
  // with those that arrived before. Idempotent. Throws ps::Error, leaving the customer
  // closed, when the process already has a customer of this app and customer id.
  void Open();
  // Unregisters, then runs what is queued for the own thread and stops it; once it
  // returns, the handle is never called again. Idempotent; the owner calls it before
  // tearing down what the handle uses. Must not be called from the customer's own
  // thread (a handle or callback destroying its own app).
  void Close();
  // Closes.
  ~Customer();
  Customer(const Customer&) = delete;
  Customer& operator=(const Customer&) = delete;

  int app_id() const { return app_id_; }
  int customer_id() const { return customer_id_; }
  uint64_t incarnation() const { return incarnation_; }

  // A fresh request waiting for answers from the nodes `peers`, marked in flight.
  // Returns its timestamp; *request_id (if given) receives its 64-bit id.
  int NewRequest(const std::vector<int>& peers, uint64_t* request_id);
  int NewRequest() { return NewRequest({}, nullptr); }
  // As above, for a request whose answers come on the data channel and are delivered
  // where they are received (a KVWorker's): a thread that waits for it may receive the
  // data channel itself (Van::ReceiveWhileWaiting), so that the answer wakes it
  // directly. Other requests' waits (SimpleApp's, whose answers come on the control
  // channel) just sleep.
  int NewDataRequest(const std::vector<int>& peers, uint64_t* request_id);
  // The request id of an in-flight timestamp, or 0.
  uint64_t RequestIdOf(int timestamp);
  // Request `request_id` (in flight) now waits for `peers` too: their death ends it
  // as for its first peers (a part sent again to another node).
  void AddPeers(uint64_t request_id, const std::vector<int>& peers);
  // Marks `timestamp` finished with `status` and wakes its waiters. A second finish
  // of the same request is ignored.
  void FinishRequest(int timestamp, const Status& status);
  // Blocks until `timestamp` is finished; returns how it ended. Waiting on a
  // timestamp that was never issued returns InvalidArgument at once.
  Status WaitRequest(int timestamp);
  // As WaitRequest, but gives up after `timeout` with Timeout (the request goes on).
  Status WaitRequest(int timestamp, std::chrono::milliseconds timeout);
  // Requests issued and not finished yet.
  size_t NumInFlight();

  void set_abort_handle(AbortHandle handle);
  void set_describe_handle(DescribeHandle handle);
  // Runs fn on the customer's own thread, after what is queued before it (used for
  // callbacks of requests that end early: app code never runs on the control thread).
  // Blocks while the queue is full, except on the node's control loop, which never
  // waits for app code (what it posts is bounded by the requests in flight). Called on
  // the own thread itself, or after Close, runs fn at once on the caller's thread (a
  // push onto its own full queue would never return).
  void RunOnOwnThread(std::function<void()> fn);
  // Waits until what is queued for the own thread (and what it is running) is done;
  // false if that takes longer than `timeout`. At once without an own thread.
  bool DrainOwnThread(std::chrono::milliseconds timeout);

  // For the Postoffice: a message for this customer (on the receive thread).
  void Accept(Message& msg);
  // For the Postoffice's control thread: ends requests waiting for `node` (dead or
  // left), or every request (the scheduler is gone), or those past their deadline.
  // With `registered_before`, only requests whose id is below it: those registered
  // before that point (a node replaced by a new process ends what was meant for the
  // old one, not what this node sent the new one since it learned of it).
  void AbortRequestsWaitingFor(const Node& node, const Status& status,
                               uint64_t registered_before = UINT64_MAX);
  // The id the next request will get: a bound for AbortRequestsWaitingFor.
  uint64_t NextRequestId();
  void AbortAllRequests(const Status& status);
  void ExpireRequests(Clock::time_point now);

 private:
  // Runs what is queued for the own thread and stops it (Close's second half; Open's
  // cleanup when registering fails, with open_mu_ already held).
  void StopExecutor();
  struct InFlight {
    int timestamp;
    std::vector<int> peers;
    Clock::time_point deadline;  // Clock::time_point::max() when none
    bool receive_in_wait;        // NewDataRequest
  };
  int NewRequest(const std::vector<int>& peers, uint64_t* request_id, bool receive_in_wait);
  // WaitRequest once its wait is registered with NodeActivity.
  Status AwaitRequest(int timestamp, std::chrono::milliseconds timeout);
  // What a thread waiting for `timestamp` waits for (NodeActivity's describe).
  void DescribeWait(int timestamp, NodeActivity::WaitInfo* info);
  // The id of timestamp ts among those issued, or 0 if it was never issued.
  uint64_t IdOfLocked(int timestamp) const;
  void Abort(std::vector<std::pair<int, uint64_t>> victims, const Status& status);
  // The own thread, started on first use unless closed (then null).
  std::shared_ptr<CustomerExecutor> Executor(bool create);

  const int app_id_;
  const int customer_id_;
  const uint64_t incarnation_;
  RecvHandle handle_;
  Options options_;
  std::mutex open_mu_;  // serialises Open and Close; guards open_
  bool open_ = false;
  std::mutex executor_mu_;  // guards executor_ and closed_
  std::shared_ptr<CustomerExecutor> executor_;
  bool closed_ = false;

  std::mutex mu_;  // guards everything below
  // Shared, so that a wake-up deferred to the end of a batch (DeferWakeToBatchEnd) may
  // outlive the customer.
  std::shared_ptr<std::condition_variable> finished_cv_ =
      std::make_shared<std::condition_variable>();
  // The requests that threads blocked on finished_cv_ wait for, one entry per thread:
  // only the finish of one of these needs a notify (which wakes every sleeper; each
  // checks its own request). Notifying at every finish made a window of 64 requests
  // answered by two servers out of order wake the waiting thread up to 64 times, for one
  // request each. A handful of entries at most, so a vector.
  std::vector<uint64_t> sleeping_for_;
  // The requests that threads of this customer wait for in the van
  // (Van::ReceiveWhileWaiting): their finish must wake those threads through the van.
  // One entry per such thread; a handful at most, so a vector.
  std::vector<uint64_t> van_waiters_;
  AbortHandle abort_handle_;
  DescribeHandle describe_handle_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, InFlight> in_flight_;  // by id: id order is deadline order
  std::unordered_map<uint64_t, Status> failures_;
  std::deque<uint64_t> failure_order_;  // eviction order of failures_
};

}  // namespace ps

#endif  // PS_INTERNAL_CUSTOMER_H_
