#include "idle_trimmer.h"

#include <algorithm>

namespace ps {

void IdleTrimmer::Start(std::chrono::milliseconds idle, Clock::time_point now) {
  idle_ = idle;
  bytes_seen_ = 0;
  bytes_at_trim_ = 0;
  busy_at_ = now;
  trimmed_ = true;
  trimmed_at_ = now - idle;
}

void IdleTrimmer::Note(uint64_t traffic_bytes, Clock::time_point now) {
  if (traffic_bytes < bytes_seen_ || traffic_bytes < bytes_at_trim_) {
    // A new van counts from zero: this is its first look.
    bytes_seen_ = bytes_at_trim_ = traffic_bytes;
    return;
  }
  // What moved before a barrier's trim was given back already.
  const uint64_t since = traffic_bytes - std::max(bytes_seen_, bytes_at_trim_);
  if (since >= kBusyBytes) {
    busy_at_ = now;
    trimmed_ = false;
  }
  bytes_seen_ = traffic_bytes;
}

void IdleTrimmer::Trimmed(uint64_t traffic_bytes, Clock::time_point now) {
  trimmed_ = true;
  trimmed_at_ = now;
  bytes_at_trim_ = traffic_bytes;
}

bool IdleTrimmer::Tick(uint64_t traffic_bytes, Clock::time_point now) {
  Note(traffic_bytes, now);
  if (trimmed_ || now - busy_at_ < idle_) return false;
  Trimmed(traffic_bytes, now);
  return true;
}

bool IdleTrimmer::AtBarrier(uint64_t traffic_bytes, Clock::time_point now) {
  if (traffic_bytes < bytes_seen_ || traffic_bytes < bytes_at_trim_) {
    Note(traffic_bytes, now);
    return false;
  }
  // The barrier's own baseline: all traffic since the last trim counts, however the
  // ticks (whose baseline this leaves alone) cut it up.
  const bool moved = !trimmed_ || traffic_bytes - bytes_at_trim_ >= kBusyBytes;
  if (!moved || now - trimmed_at_ < idle_) return false;
  Trimmed(traffic_bytes, now);
  return true;
}

}  // namespace ps
