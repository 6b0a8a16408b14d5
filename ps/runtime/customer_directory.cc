#include "customer_directory.h"

#include <glog/logging.h>

#include <string>

#include "ps/status.h"

namespace ps {
namespace {

// Data that arrives before its customer exists is held, up to this many messages and
// bytes; past that the sender is told the app is not running here.
constexpr size_t kMaxHeldMessages = 1 << 16;
constexpr size_t kMaxHeldBytes = size_t{1} << 30;

// Requests go to the app's request handler, registered as (app_id, app_id) as in
// ps-lite; answers go back to the customer that issued the request.
std::pair<int, int> AddresseeOf(const Message& msg) {
  return {msg.meta.app_id, msg.meta.request ? msg.meta.app_id : msg.meta.customer_id};
}

}  // namespace

void CustomerDirectory::Add(Customer* customer, bool deliver_held) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto key = std::make_pair(customer->app_id(), customer->customer_id());
  if (customers_.count(key)) {
    throw Error("app " + std::to_string(key.first) + " customer " + std::to_string(key.second) +
                " already exists on this node");
  }
  customers_[key] = customer;
  if (!deliver_held) return;
  // What arrived for it before it existed is delivered in arrival order, before any
  // newer message: those queue behind it (Dispatch) until the backlog is empty.
  std::deque<Message> mine;
  std::deque<HeldMessage> others;
  for (HeldMessage& held : held_) {
    if (AddresseeOf(held.msg) == key) {
      held_bytes_ -= held.msg.DataBytes();
      mine.push_back(std::move(held.msg));
    } else {
      others.push_back(std::move(held));
    }
  }
  held_.swap(others);
  has_held_ = !held_.empty();
  if (mine.empty()) return;
  {
    std::lock_guard<std::mutex> backlog_lock(backlog_mu_);
    backlogs_[customer];
    draining_.fetch_add(1, std::memory_order_release);
  }
  // The handles run here, on the caller's thread, without mu_: a handle that blocks
  // must not hold up the node's other apps nor its control loop.
  lock.unlock();
  DrainBacklog(customer, std::move(mine));
}

void CustomerDirectory::DrainBacklog(Customer* customer, std::deque<Message> held) {
  for (;;) {
    for (Message& m : held) customer->Accept(m);
    held.clear();
    std::lock_guard<std::mutex> backlog_lock(backlog_mu_);
    auto it = backlogs_.find(customer);
    if (it->second.empty()) {
      backlogs_.erase(it);
      draining_.fetch_sub(1, std::memory_order_release);
      return;
    }
    held.swap(it->second);
  }
}

bool CustomerDirectory::QueueBehindBacklog(Customer* customer, Message& msg) {
  if (draining_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(backlog_mu_);
  auto it = backlogs_.find(customer);
  if (it == backlogs_.end()) return false;
  it->second.push_back(std::move(msg));
  return true;
}

void CustomerDirectory::Remove(Customer* customer) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto it = customers_.find({customer->app_id(), customer->customer_id()});
  if (it != customers_.end() && it->second == customer) customers_.erase(it);
}

CustomerDirectory::Dispatched CustomerDirectory::Dispatch(Message& msg,
                                                          std::atomic<bool>* busy) {
  const std::pair<int, int> key = AddresseeOf(msg);
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = customers_.find(key);
  if (it != customers_.end()) {
    if (QueueBehindBacklog(it->second, msg)) return Dispatched::kAccepted;
    busy->store(true, std::memory_order_relaxed);
    it->second->Accept(msg);
    busy->store(false, std::memory_order_relaxed);
    return Dispatched::kAccepted;
  }
  if (!msg.meta.request) {
    LOG_IF(WARNING, stray_log_.ShouldLog())
        << "response for app " << key.first << " customer " << key.second
        << ", which does not exist on this node, dropped";
    return Dispatched::kStray;
  }
  lock.unlock();
  std::unique_lock<std::shared_mutex> write(mu_);
  // The customer may have registered (and taken the held messages) while no lock was
  // held: deliver now, or this message would wait behind newer ones.
  it = customers_.find(key);
  if (it != customers_.end()) {
    if (QueueBehindBacklog(it->second, msg)) return Dispatched::kAccepted;
    // Delivered under the shared lock only: a handle must not run under the exclusive one.
    Customer* customer = it->second;
    write.unlock();
    std::shared_lock<std::shared_mutex> read(mu_);
    it = customers_.find(key);
    if (it != customers_.end() && it->second == customer) {
      if (!QueueBehindBacklog(customer, msg)) customer->Accept(msg);
      return Dispatched::kAccepted;
    }
    read.unlock();
    return Dispatch(msg, busy);  // it went away meanwhile: hold or refuse as usual
  }
  size_t bytes = msg.DataBytes();
  if (held_.size() >= kMaxHeldMessages || held_bytes_ + bytes > kMaxHeldBytes) {
    return Dispatched::kRefused;
  }
  held_bytes_ += bytes;
  held_.push_back({std::move(msg), Clock::now()});
  has_held_ = true;
  return Dispatched::kHeld;
}

std::vector<Message> CustomerDirectory::TakeHeldBefore(Clock::time_point deadline) {
  std::vector<Message> expired;
  std::unique_lock<std::shared_mutex> lock(mu_);
  while (!held_.empty() && held_.front().arrived < deadline) {
    held_bytes_ -= held_.front().msg.DataBytes();
    expired.push_back(std::move(held_.front().msg));
    held_.pop_front();
  }
  has_held_ = !held_.empty();
  return expired;
}

size_t CustomerDirectory::DropHeld() {
  std::unique_lock<std::shared_mutex> lock(mu_);
  size_t dropped = held_.size();
  held_.clear();
  held_bytes_ = 0;
  has_held_ = false;
  return dropped;
}

void CustomerDirectory::ForEach(
    const std::function<bool(int app_id, int customer_id, Customer*)>& fn) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  for (auto& kv : customers_) {
    if (!fn(kv.first.first, kv.first.second, kv.second)) return;
  }
}

}  // namespace ps
