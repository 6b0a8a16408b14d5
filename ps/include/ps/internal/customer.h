// Customer: one app's (or one KVWorker's) endpoint in the runtime: it receives the
// messages addressed to its (app_id, customer_id) and tracks its requests.
//
// Request tracking is bounded: a finished request is forgotten unless it failed, and
// only the newest kMaxRememberedFailures failures are remembered (waiting on an older
// failed request returns OK, so wait on a request before issuing thousands more if
// its outcome matters).
//
// Thread safety: all methods are thread-safe. The receive handle runs on the van's
// receive thread (or, for messages that arrived before the customer existed, on the
// thread that constructed it), one message at a time.
#ifndef PS_INTERNAL_CUSTOMER_H_
#define PS_INTERNAL_CUSTOMER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "ps/internal/message.h"
#include "ps/status.h"

namespace ps {

class Customer {
 public:
  using RecvHandle = std::function<void(Message& msg)>;
  static constexpr size_t kMaxRememberedFailures = 4096;

  // Registers with the Postoffice unless `open_now` is false (then call Open() once
  // the handle is ready to run). Throws ps::Error if Start has not been called or
  // (app_id, customer_id) is already taken on this node.
  Customer(int app_id, int customer_id, RecvHandle handle, bool open_now = true);
  // Registers with the Postoffice: from now on messages reach the handle, starting
  // with those that arrived before. Idempotent.
  void Open();
  // Unregisters, waiting for a handle call in progress; once it returns, the handle is
  // never called again. Idempotent; the owner calls it before tearing down what the
  // handle uses.
  void Close();
  // Closes.
  ~Customer();
  Customer(const Customer&) = delete;
  Customer& operator=(const Customer&) = delete;

  int app_id() const { return app_id_; }
  int customer_id() const { return customer_id_; }

  // A fresh timestamp, marked in flight.
  int NewRequest();
  // Marks `timestamp` finished with `status` and wakes its waiters.
  void FinishRequest(int timestamp, const Status& status);
  // Blocks until `timestamp` is finished; returns how it ended. Waiting on a
  // timestamp that was never issued returns InvalidArgument at once.
  Status WaitRequest(int timestamp);
  // Requests issued and not finished yet.
  size_t NumInFlight();

  // Called by the Postoffice with each message for this customer.
  void Accept(Message& msg) { handle_(msg); }

 private:
  const int app_id_;
  const int customer_id_;
  RecvHandle handle_;
  bool open_ = false;

  std::mutex mu_;  // guards everything below
  std::condition_variable finished_cv_;
  int next_timestamp_ = 0;
  std::unordered_set<int> in_flight_;
  std::unordered_map<int, Status> failures_;
  std::deque<int> failure_order_;  // eviction order of failures_
};

}  // namespace ps

#endif  // PS_INTERNAL_CUSTOMER_H_
