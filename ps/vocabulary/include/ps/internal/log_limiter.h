// LogLimiter: decides which of many similar events to log, so that a flood of bad
// input (or of failing requests) cannot flood the log. Thread-safe.
#ifndef PS_INTERNAL_LOG_LIMITER_H_
#define PS_INTERNAL_LOG_LIMITER_H_

#include <atomic>
#include <cstdint>

namespace ps {

class LogLimiter {
 public:
  // Counts one event; true for the first 20 and then every 1000th.
  bool ShouldLog() {
    uint64_t n = count_.fetch_add(1, std::memory_order_relaxed) + 1;
    return n <= 20 || n % 1000 == 0;
  }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> count_{0};
};

}  // namespace ps

#endif  // PS_INTERNAL_LOG_LIMITER_H_
