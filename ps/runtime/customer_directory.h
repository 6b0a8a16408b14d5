// CustomerDirectory: the node's customers by (app id, customer id), and the data
// messages that arrived before their customer existed, delivered in arrival order when
// it appears. Part of the Postoffice (inbound dispatch); internal to the runtime.
//
// Thread safety: all methods are thread-safe. A message is handed to its customer under
// the directory's lock held shared, so Remove waits until no hand-off to that customer
// runs; customers' handles must not call Add or Remove of another customer while they
// run (they may of their own app's, as before).
#ifndef HERDPS_PS_RUNTIME_CUSTOMER_DIRECTORY_H_
#define HERDPS_PS_RUNTIME_CUSTOMER_DIRECTORY_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <utility>
#include <vector>

#include "ps/internal/customer.h"
#include "ps/internal/log_limiter.h"
#include "ps/internal/message.h"

namespace ps {

class CustomerDirectory {
 public:
  using Clock = std::chrono::steady_clock;

  // Registers `customer`. Throws ps::Error if its (app id, customer id) is taken. When
  // `deliver_held`, the messages held for it are run through it on the calling thread,
  // before any newer message for it (those queue behind them meanwhile).
  void Add(Customer* customer, bool deliver_held);
  // Unregisters `customer` (nothing if another has its ids); waits for a hand-off to it.
  void Remove(Customer* customer);

  enum class Dispatched {
    kAccepted,  // its customer took it (or it queues behind that customer's backlog)
    kHeld,      // a request for an app that is not here yet: held
    kStray,     // an answer for a customer that is not here: dropped (logged)
    kRefused,   // a request that cannot be held (too many wait): msg is untouched
  };
  // Hands a data message to its customer: requests to (app_id, app_id), answers to
  // (app_id, customer_id). `busy` is set while the customer's Accept runs (it may wait
  // for room), so that the liveness check does not take that for silence.
  Dispatched Dispatch(Message& msg, std::atomic<bool>* busy);

  // Whether messages are held (readable without the lock).
  bool has_held() const { return has_held_.load(std::memory_order_relaxed); }
  // Takes the held messages that arrived before `deadline`, oldest first.
  std::vector<Message> TakeHeldBefore(Clock::time_point deadline);
  // Drops every held message; returns how many.
  size_t DropHeld();

  // Calls `fn` for each customer, under the lock held shared, until it returns false.
  // `fn` must not Add or Remove customers.
  void ForEach(const std::function<bool(int app_id, int customer_id, Customer*)>& fn);

 private:
  struct HeldMessage {
    Message msg;
    Clock::time_point arrived;
  };
  // True (and msg taken) when `customer` still has held messages to run first.
  bool QueueBehindBacklog(Customer* customer, Message& msg);
  // Runs `held` and what queues behind it through `customer`, then ends its backlog.
  void DrainBacklog(Customer* customer, std::deque<Message> held);

  std::shared_mutex mu_;  // guards customers_, held_, held_bytes_
  std::map<std::pair<int, int>, Customer*> customers_;
  std::deque<HeldMessage> held_;
  size_t held_bytes_ = 0;  // payload bytes in held_
  std::atomic<bool> has_held_{false};  // !held_.empty()
  // Customers whose held messages Add is delivering, and what arrived for them
  // meanwhile (delivered after, in order). draining_ == backlogs_.size().
  std::mutex backlog_mu_;
  std::map<Customer*, std::deque<Message>> backlogs_;
  std::atomic<int> draining_{0};
  LogLimiter stray_log_;  // answers for customers that are not here
};

}  // namespace ps

#endif  // HERDPS_PS_RUNTIME_CUSTOMER_DIRECTORY_H_
