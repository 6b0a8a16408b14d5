#include "ps/internal/customer.h"

#include <glog/logging.h>
#include <tbb/concurrent_queue.h>

#include <algorithm>
#include <future>
#include <random>
#include <thread>

#include "ps/internal/event_loop.h"
#include "ps/internal/log_limiter.h"
#include "ps/internal/postoffice.h"

namespace ps {

// The customer's own thread and its FIFO. An empty function is the stop marker.
// Messages take a slot of `slots_` (at most `capacity` queued at once: the channel's
// receive thread waits for room, which pushes back on senders); tasks the control loop
// posts take none, so the loop never waits for app code (they are few: one per
// request that ends early). Shared with the thread, so a thread detached by a
// misbehaving Close still has a live queue.
class CustomerExecutor {
 public:
  explicit CustomerExecutor(size_t capacity) {
    slots_.set_capacity(static_cast<std::ptrdiff_t>(capacity));
  }
  static void Run(const std::shared_ptr<CustomerExecutor>& self) {
    self->thread_ = std::thread([self] {
      for (;;) {
        Item item;
        self->queue_.pop(item);
        if (!item.task) return;
        if (item.holds_slot) {
          char slot;
          self->slots_.pop(slot);
        }
        try {
          item.task();
        } catch (const std::exception& e) {
          LOG_IF(ERROR, self->throw_log_.ShouldLog())
              << "app handle or callback threw: " << e.what();
        } catch (...) {
          LOG_IF(ERROR, self->throw_log_.ShouldLog())
              << "app handle or callback threw something that is not a std::exception";
        }
      }
    });
  }
  // Blocks while `capacity` messages are queued.
  void PushMessage(std::function<void()> task) {
    if (!slots_.try_push(0)) {
      // The receive thread is about to wait for room: what it coalesced goes first, so
      // that no answer waits behind a slow handle, and the waiters it woke wake now (this
      // customer's thread may be one of them).
      NotifyDeferredWakes();
      if (Van* van = Postoffice::Get()->running_van()) {
        van->FlushCoalesced(SendMode::kNonBlocking);
      }
      slots_.push(0);
    }
    queue_.push(Item{std::move(task), true});
  }
  // Never blocks.
  void Post(std::function<void()> task) { queue_.push(Item{std::move(task), false}); }
  void Stop() {
    queue_.push(Item{});
    if (thread_.get_id() == std::this_thread::get_id()) {
      LOG(ERROR) << "a customer was closed from its own handle or callback; its thread "
                    "ends after this call returns";
      thread_.detach();
    } else if (thread_.joinable()) {
      thread_.join();
    }
  }
  bool OnThisThread() const { return thread_.get_id() == std::this_thread::get_id(); }

 private:
  struct Item {
    std::function<void()> task;
    bool holds_slot = false;
  };
  tbb::concurrent_bounded_queue<Item> queue_;  // unbounded; slots_ bounds the messages
  tbb::concurrent_bounded_queue<char> slots_;
  std::thread thread_;
  LogLimiter throw_log_;
};

namespace {

uint64_t RandomIncarnation() {
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return v ? v : 1;
}

constexpr uint64_t kTimestampMask = 0x7fffffffULL;

}  // namespace

Customer::Customer(int app_id, int customer_id, RecvHandle handle, bool open_now)
    : Customer(app_id, customer_id, std::move(handle), open_now, Options()) {}

Customer::Customer(int app_id, int customer_id, RecvHandle handle, bool open_now,
                   Options options)
    : app_id_(app_id),
      customer_id_(customer_id),
      incarnation_(RandomIncarnation()),
      handle_(std::move(handle)),
      options_(options) {
  if (open_now) Open();
}

std::shared_ptr<CustomerExecutor> Customer::Executor(bool create) {
  std::lock_guard<std::mutex> lock(executor_mu_);
  if (!executor_ && create && !closed_) {
    executor_ = std::make_shared<CustomerExecutor>(std::max<size_t>(options_.queue_capacity, 1));
    CustomerExecutor::Run(executor_);
  }
  return executor_;
}

void Customer::Open() {
  std::lock_guard<std::mutex> open_lock(open_mu_);
  if (open_) return;
  // Before ps::Start too (MXNet and BytePS make their apps first): the registration
  // outlives Start, and messages find the customer once the node has joined.
  {
    std::lock_guard<std::mutex> lock(executor_mu_);
    closed_ = false;
  }
  if (options_.delivery == Delivery::kOwnThread) Executor(true);
  try {
    Postoffice::Get()->AddCustomer(this);
  } catch (...) {
    StopExecutor();  // not Close(): it would take open_mu_ again
    throw;
  }
  open_ = true;
}

void Customer::Close() {
  std::lock_guard<std::mutex> open_lock(open_mu_);
  if (open_) {
    Postoffice::Get()->RemoveCustomer(this);
    open_ = false;
  }
  StopExecutor();
}

void Customer::StopExecutor() {
  std::shared_ptr<CustomerExecutor> executor;
  {
    std::lock_guard<std::mutex> lock(executor_mu_);
    closed_ = true;
    executor.swap(executor_);
  }
  if (executor) executor->Stop();
}

Customer::~Customer() { Close(); }

void Customer::Accept(Message& msg) {
  if (options_.delivery == Delivery::kReceiveThread) {
    handle_(msg);
    return;
  }
  std::shared_ptr<CustomerExecutor> executor = Executor(false);
  if (!executor) return;  // closed
  executor->PushMessage([this, m = std::move(msg)]() mutable { handle_(m); });
}

void Customer::RunOnOwnThread(std::function<void()> fn) {
  std::shared_ptr<CustomerExecutor> executor = Executor(true);
  if (!executor || executor->OnThisThread()) {
    fn();
    return;
  }
  EventLoop* loop = Postoffice::Get()->control_loop();
  if (loop && loop->InLoopThread()) {
    executor->Post(std::move(fn));  // the control loop never waits for app code
  } else {
    executor->PushMessage(std::move(fn));
  }
}

bool Customer::DrainOwnThread(std::chrono::milliseconds timeout) {
  std::shared_ptr<CustomerExecutor> executor = Executor(false);
  if (!executor || executor->OnThisThread()) return true;
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> ran = done->get_future();
  executor->Post([done] { done->set_value(); });
  return ran.wait_for(timeout) == std::future_status::ready;
}

void Customer::set_abort_handle(AbortHandle handle) {
  std::lock_guard<std::mutex> lock(mu_);
  abort_handle_ = std::move(handle);
}

void Customer::set_describe_handle(DescribeHandle handle) {
  std::lock_guard<std::mutex> lock(mu_);
  describe_handle_ = std::move(handle);
}

int Customer::NewRequest(const std::vector<int>& peers, uint64_t* request_id) {
  return NewRequest(peers, request_id, false);
}

int Customer::NewDataRequest(const std::vector<int>& peers, uint64_t* request_id) {
  return NewRequest(peers, request_id, true);
}

int Customer::NewRequest(const std::vector<int>& peers, uint64_t* request_id,
                         bool receive_in_wait) {
  int timeout_s = Postoffice::Get()->config().request_timeout_s;
  Clock::time_point deadline = timeout_s > 0
                                   ? Clock::now() + std::chrono::seconds(timeout_s)
                                   : Clock::time_point::max();
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  int ts = static_cast<int>((id - 1) & kTimestampMask);
  in_flight_.emplace(id, InFlight{ts, peers, deadline, receive_in_wait});
  if (request_id) *request_id = id;
  return ts;
}

uint64_t Customer::IdOfLocked(int timestamp) const {
  if (timestamp < 0 || next_id_ == 1) return 0;
  // Timestamps wrap every 2^31 requests; the newest issued id with these low bits is
  // the one meant (in-flight requests are far fewer than 2^31).
  uint64_t last = next_id_ - 2;  // the newest issued id, minus one
  uint64_t n = (last & ~kTimestampMask) | static_cast<uint64_t>(timestamp);
  if (n > last) {
    if (n < kTimestampMask + 1) return 0;
    n -= kTimestampMask + 1;
  }
  return n + 1;
}

void Customer::AddPeers(uint64_t request_id, const std::vector<int>& peers) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_flight_.find(request_id);
  if (it == in_flight_.end()) return;
  for (int peer : peers) {
    std::vector<int>& known = it->second.peers;
    if (std::find(known.begin(), known.end(), peer) == known.end()) known.push_back(peer);
  }
}

uint64_t Customer::RequestIdOf(int timestamp) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = IdOfLocked(timestamp);
  return in_flight_.count(id) ? id : 0;
}

void Customer::FinishRequest(int timestamp, const Status& status) {
  bool wake = false;
  bool wake_receiver = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t id = IdOfLocked(timestamp);
    if (!in_flight_.erase(id)) return;
    // A finish nobody waits for (a later request of a window, a callback) needs no
    // notify: waiters look at in_flight_ under this lock before they sleep.
    wake = std::find(sleeping_for_.begin(), sleeping_for_.end(), id) != sleeping_for_.end();
    wake_receiver = std::find(van_waiters_.begin(), van_waiters_.end(), id) != van_waiters_.end();
    if (!status.ok()) {
      failures_[id] = status;
      failure_order_.push_back(id);
      while (failure_order_.size() > kMaxRememberedFailures) {
        failures_.erase(failure_order_.front());
        failure_order_.pop_front();
      }
    }
  }
  // Within a batch of answers the waiter wakes once the batch is handled, not to
  // contend with the rest of it for mu_.
  if (wake && !DeferWakeToBatchEnd(finished_cv_)) finished_cv_->notify_all();
  if (wake_receiver) {
    if (Van* van = Postoffice::Get()->running_van()) van->WakeReceivingWaiter();
  }
}

Status Customer::WaitRequest(int timestamp) {
  return WaitRequest(timestamp, std::chrono::milliseconds::max());
}

Status Customer::WaitRequest(int timestamp, std::chrono::milliseconds timeout) {
  // Registered outside mu_: a report describes the wait under NodeActivity's lock, and
  // the description takes mu_.
  ActivityWait wait([this, timestamp](NodeActivity::WaitInfo* info) {
    DescribeWait(timestamp, info);
  });
  return AwaitRequest(timestamp, timeout);
}

void Customer::DescribeWait(int timestamp, NodeActivity::WaitInfo* info) {
  DescribeHandle handle;
  std::vector<int> peers;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = IdOfLocked(timestamp);
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) {
      info->what = "request " + std::to_string(timestamp) + " of app " +
                   std::to_string(app_id_) + " (finishing)";
      return;
    }
    peers = it->second.peers;
    handle = describe_handle_;
  }
  if (handle && handle(id, info)) return;
  info->what = "a request (timestamp " + std::to_string(timestamp) + ") of app " +
               std::to_string(app_id_);
  info->waiting_for = std::move(peers);
}

Status Customer::AwaitRequest(int timestamp, std::chrono::milliseconds timeout) {
  // Requests this thread coalesced go now: it may be waiting for their answers.
  if (Van* van = Postoffice::Get()->running_van()) van->FlushCoalesced();
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t id = IdOfLocked(timestamp);
  if (id == 0) {
    return Status::InvalidArgument("Wait(" + std::to_string(timestamp) +
                                   "): no request has this timestamp");
  }
  auto done = [&] { return in_flight_.count(id) == 0; };
  // A timeout beyond a century is "forever": a deadline that far would overflow the
  // clock's arithmetic and come back at once.
  constexpr auto kForever = std::chrono::hours(24 * 365 * 100);
  const bool forever = timeout >= kForever;
  const Clock::time_point deadline = forever ? Clock::time_point::max() : Clock::now() + timeout;
  // The answers of a data request, delivered where they are received, can be received
  // by this thread itself while it waits: the answer then wakes it directly
  // (Van::ReceiveWhileWaiting). Several threads may wait so at once; the van lets one
  // receive at a time and hands the channel on. Only for the customer's one request in
  // flight: with several (a window of requests) the receive thread is busy with their
  // answers anyway, and taking the channel at every Wait and handing it back cost more
  // than the hop it saves (64-byte requests at window 64 ran at 0.57-0.80 of their
  // speed with receive-in-wait off; at window 1 the hop is most of the round trip).
  auto request = in_flight_.find(id);
  if (request != in_flight_.end() && request->second.receive_in_wait &&
      in_flight_.size() == 1 && options_.delivery == Delivery::kReceiveThread) {
    if (Van* van = Postoffice::Get()->running_van()) {
      van_waiters_.push_back(id);
      lock.unlock();
      struct Unregister {
        Customer* customer;
        uint64_t id;
        std::unique_lock<std::mutex>& lock;
        ~Unregister() {
          lock.lock();
          auto& waiters = customer->van_waiters_;
          waiters.erase(std::find(waiters.begin(), waiters.end(), id));
        }
      } unregister{this, id, lock};
      van->ReceiveWhileWaiting(
          [this, id] {
            std::lock_guard<std::mutex> done_lock(mu_);
            return in_flight_.count(id) == 0;
          },
          deadline);
    }
  }
  bool finished = true;
  if (!done()) {
    sleeping_for_.push_back(id);
    if (forever) {
      finished_cv_->wait(lock, done);
    } else {
      finished = finished_cv_->wait_until(lock, deadline, done);
    }
    sleeping_for_.erase(std::find(sleeping_for_.begin(), sleeping_for_.end(), id));
  }
  if (!finished) {
    return Status::Timeout("request " + std::to_string(timestamp) + " not finished after " +
                           std::to_string(timeout.count()) + " ms (it goes on)");
  }
  auto it = failures_.find(id);
  // Failures stay readable by later waits on the same timestamp until evicted.
  return it == failures_.end() ? Status::OK() : it->second;
}

size_t Customer::NumInFlight() {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_.size();
}

void Customer::Abort(std::vector<std::pair<int, uint64_t>> victims, const Status& status) {
  AbortHandle handle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    handle = abort_handle_;
  }
  for (const auto& v : victims) {
    if (handle) {
      handle(v.first, v.second, status);
    } else {
      FinishRequest(v.first, status);
    }
  }
}

void Customer::AbortRequestsWaitingFor(const Node& node, const Status& status,
                                       uint64_t registered_before) {
  std::vector<std::pair<int, uint64_t>> victims;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& kv : in_flight_) {
      if (kv.first >= registered_before) break;  // ids ascend
      for (int peer : kv.second.peers) {
        if (peer == node.id) {
          victims.emplace_back(kv.second.timestamp, kv.first);
          break;
        }
      }
    }
  }
  Abort(std::move(victims), status);
}

uint64_t Customer::NextRequestId() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_id_;
}

void Customer::AbortAllRequests(const Status& status) {
  std::vector<std::pair<int, uint64_t>> victims;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& kv : in_flight_) victims.emplace_back(kv.second.timestamp, kv.first);
  }
  Abort(std::move(victims), status);
}

void Customer::ExpireRequests(Clock::time_point now) {
  std::vector<std::pair<int, uint64_t>> victims;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Ids grow with issue time and every request has the same timeout, so the
    // expired ones are a prefix (two requests issued at once may be out of order by
    // microseconds: the later one then expires one sweep later).
    for (const auto& kv : in_flight_) {
      if (kv.second.deadline > now) break;
      victims.emplace_back(kv.second.timestamp, kv.first);
    }
  }
  if (victims.empty()) return;
  int timeout_s = Postoffice::Get()->config().request_timeout_s;
  Abort(std::move(victims),
        Status::Timeout("no answer within PS_REQUEST_TIMEOUT=" + std::to_string(timeout_s) +
                        " s"));
}

}  // namespace ps
