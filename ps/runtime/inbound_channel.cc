#include "inbound_channel.h"

namespace ps {
namespace {

// Data that arrives before the node table is held, up to this many messages and bytes
// per channel (as much as CustomerDirectory holds for apps not started yet).
constexpr size_t kMaxUnverifiedMessages = 1 << 16;
constexpr size_t kMaxUnverifiedBytes = size_t{1} << 30;

}  // namespace

void InboundChannel::Reset(bool resend, size_t window) {
  std::lock_guard<std::mutex> lock(mu_);
  sequencer_ = resend ? std::make_unique<InboundSequencer>(window) : nullptr;
  held_ = 0;
  unverified_.clear();
  unverified_bytes_ = 0;
}

bool InboundChannel::HoldUnverified(Message& msg) {
  size_t bytes = msg.DataBytes();
  if (unverified_.size() >= kMaxUnverifiedMessages ||
      unverified_bytes_ + bytes > kMaxUnverifiedBytes) {
    return false;
  }
  unverified_bytes_ += bytes;
  unverified_.push_back(std::move(msg));
  return true;
}

std::deque<Message> InboundChannel::TakeUnverified() {
  std::deque<Message> held;
  held.swap(unverified_);
  unverified_bytes_ = 0;
  return held;
}

}  // namespace ps
