#include "idle_trimmer.h"

namespace ps {

void IdleTrimmer::Start(std::chrono::milliseconds idle, Clock::time_point now) {
  idle_ = idle;
  bytes_seen_ = 0;
  busy_at_ = now;
  trimmed_ = true;
  trimmed_at_ = now - idle;
}

void IdleTrimmer::Note(uint64_t traffic_bytes, Clock::time_point now) {
  // Traffic below this per tick (heartbeats, ACKs, small requests) neither needs the
  // large buffers malloc keeps nor counts as busy.
  constexpr uint64_t kBusyBytes = 1 << 20;
  if (traffic_bytes - bytes_seen_ >= kBusyBytes) {
    busy_at_ = now;
    trimmed_ = false;
  }
  bytes_seen_ = traffic_bytes;
}

bool IdleTrimmer::Tick(uint64_t traffic_bytes, Clock::time_point now) {
  Note(traffic_bytes, now);
  if (trimmed_ || now - busy_at_ < idle_) return false;
  trimmed_ = true;
  trimmed_at_ = now;
  return true;
}

bool IdleTrimmer::AtBarrier(uint64_t traffic_bytes, Clock::time_point now) {
  Note(traffic_bytes, now);
  if (trimmed_ || now - trimmed_at_ < idle_) return false;
  trimmed_ = true;
  trimmed_at_ = now;
  return true;
}

}  // namespace ps
