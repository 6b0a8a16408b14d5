#include "join_state.h"

namespace ps {

void JoinState::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  joined_ = false;
  error_ = Status::OK();
  gave_up_why_.clear();
  replaces_dead_node_ = false;
  gave_up_ = false;
}

void JoinState::MarkJoined() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    joined_ = true;
  }
  cv_.notify_all();
}

void JoinState::Fail(const Status& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.ok()) error_ = error;
  }
  cv_.notify_all();
}

bool JoinState::WaitFor(std::chrono::milliseconds timeout, Status* error) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return joined_ || !error_.ok(); })) return false;
  *error = error_;
  return true;
}

Status JoinState::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return joined_ || !error_.ok(); });
  return joined_ ? Status::OK() : error_;
}

bool JoinState::GiveUp(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!gave_up_why_.empty()) return false;
  gave_up_why_ = why;
  gave_up_.store(true, std::memory_order_release);
  return true;
}

std::string JoinState::why_gave_up() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gave_up_why_;
}

}  // namespace ps
