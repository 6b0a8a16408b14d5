#include "ps/internal/customer.h"

#include "ps/internal/postoffice.h"

namespace ps {

Customer::Customer(int app_id, int customer_id, RecvHandle handle, bool open_now)
    : app_id_(app_id), customer_id_(customer_id), handle_(std::move(handle)) {
  if (open_now) Open();
}

void Customer::Open() {
  if (open_) return;
  Postoffice::Get()->AddCustomer(this);
  open_ = true;
}

void Customer::Close() {
  if (!open_) return;
  Postoffice::Get()->RemoveCustomer(this);
  open_ = false;
}

Customer::~Customer() { Close(); }

int Customer::NewRequest() {
  std::lock_guard<std::mutex> lock(mu_);
  int ts = next_timestamp_++;
  in_flight_.insert(ts);
  return ts;
}

void Customer::FinishRequest(int timestamp, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!in_flight_.erase(timestamp)) return;
    if (!status.ok()) {
      failures_[timestamp] = status;
      failure_order_.push_back(timestamp);
      while (failure_order_.size() > kMaxRememberedFailures) {
        failures_.erase(failure_order_.front());
        failure_order_.pop_front();
      }
    }
  }
  finished_cv_.notify_all();
}

Status Customer::WaitRequest(int timestamp) {
  std::unique_lock<std::mutex> lock(mu_);
  if (timestamp < 0 || timestamp >= next_timestamp_) {
    return Status::InvalidArgument("Wait(" + std::to_string(timestamp) +
                                   "): no request has this timestamp");
  }
  finished_cv_.wait(lock, [&] { return in_flight_.count(timestamp) == 0; });
  auto it = failures_.find(timestamp);
  if (it == failures_.end()) return Status::OK();
  Status s = it->second;
  // Failures stay readable by later waits on the same timestamp until evicted.
  return s;
}

size_t Customer::NumInFlight() {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_.size();
}

}  // namespace ps
