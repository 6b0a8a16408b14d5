// FlushTimer: see flush_timer.h.
#include "flush_timer.h"

#include <glog/logging.h>

#include <algorithm>
#include <exception>
#include <system_error>
#include <utility>

namespace ps {
namespace {

thread_local bool t_timer_thread = false;

}  // namespace

bool FlushTimer::OnTimerThread() { return t_timer_thread; }

FlushTimer::FlushTimer(std::chrono::microseconds delay, std::function<bool()> flush,
                       std::chrono::milliseconds max_retry)
    : delay_(std::max(delay, kMinDelay)), max_retry_(max_retry), flush_(std::move(flush)) {}

FlushTimer::~FlushTimer() { Stop(); }

int64_t FlushTimer::NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool FlushTimer::ArmAt(int64_t at, int64_t* replaced) {
  int64_t armed = armed_at_.load();
  while (armed == 0 || armed > at) {
    if (armed_at_.compare_exchange_weak(armed, at)) {
      *replaced = armed;
      return true;
    }
  }
  return false;
}

void FlushTimer::WakeFor(int64_t replaced) {
  // Paired with Loop's store to sleeping_ before it checks armed_at_ (both sequentially
  // consistent): either it sees this deadline, or this sees it asleep and wakes it. A
  // deadline that replaced a later one (a retry backing off) wakes it from that wait.
  if (sleeping_.load() || replaced != 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_one();
  }
}

bool FlushTimer::Arm() {
  const int64_t now = NowNs();
  last_arm_.store(now, std::memory_order_relaxed);
  // An earlier deadline stays; none, or a later one (a retry backing off), becomes now.
  int64_t replaced = 0;
  const bool set = ArmAt(now, &replaced);
  if (!running_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || no_thread_.load()) return false;
    if (!thread_.joinable()) {
      try {
        thread_ = std::thread([this] { Loop(); });
      } catch (const std::system_error& e) {
        // Said once; not tried again. The callers then send what they coalesce at once.
        no_thread_.store(true);
        LOG(ERROR) << "cannot start the thread that flushes coalesced messages: " << e.what();
        return false;
      }
      running_.store(true, std::memory_order_release);
    }
    return true;  // the new thread looks at armed_at_ first
  }
  if (set) WakeFor(replaced);
  return true;
}

int64_t FlushTimer::Disarm() { return armed_at_.exchange(0); }

void FlushTimer::Rearm(int64_t taken) {
  if (taken == 0) {
    Arm();  // starts the thread if need be; what a stopped timer leaves, Stop's caller sends
    return;
  }
  int64_t replaced = 0;
  if (ArmAt(taken, &replaced)) WakeFor(replaced);
}

void FlushTimer::Stop() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    running_.store(false, std::memory_order_release);  // Arm then sees stopping_
    thread = std::move(thread_);
  }
  cv_.notify_all();
  if (thread.joinable()) {
    CHECK(thread.get_id() != std::this_thread::get_id()) << "FlushTimer stopped by its own flush";
    thread.join();
  }
}

void FlushTimer::Loop() {
  t_timer_thread = true;
  const int64_t delay_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(delay_).count();
  const int64_t linger_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(kLinger).count();
  const int64_t max_retry_ns =
      std::max(delay_ns, std::chrono::duration_cast<std::chrono::nanoseconds>(max_retry_).count());
  int64_t retry_ns = 0;  // the wait before the next try after flushes that left something
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    int64_t armed = armed_at_.load();
    const int64_t now = NowNs();
    if (armed == 0) {
      if (now - last_arm_.load(std::memory_order_relaxed) < linger_ns) {
        // Arms keep coming: look again in `delay`, so that the next Arm wakes nobody.
        cv_.wait_for(lock, delay_);
        continue;
      }
      sleeping_.store(true);
      cv_.wait(lock, [this] { return stopping_ || armed_at_.load() != 0; });
      sleeping_.store(false);
      continue;
    }
    if (now < armed + delay_ns) {
      // Until it is due (a retry backing off: up to max_retry); an Arm or Rearm that
      // brings it forward wakes this wait (WakeFor).
      cv_.wait_for(lock, std::chrono::nanoseconds(armed + delay_ns - now));
      continue;
    }
    // Due. Taken only if nobody disarmed or re-armed meanwhile.
    if (!armed_at_.compare_exchange_strong(armed, 0)) continue;
    lock.unlock();
    bool left = true;
    try {
      left = flush_();
    } catch (const std::exception& e) {
      LOG_IF(ERROR, throw_log_.ShouldLog())
          << "flushing coalesced messages failed (tried again): " << e.what();
    } catch (...) {
      LOG_IF(ERROR, throw_log_.ShouldLog()) << "flushing coalesced messages failed (tried again)";
    }
    flushes_.fetch_add(1, std::memory_order_relaxed);
    if (left) {
      // A peer had no room: try again, later each time while it has none (a flush from
      // elsewhere may come first). Armed in the future: due `retry_ns` from now.
      retry_ns = std::min(max_retry_ns, retry_ns == 0 ? delay_ns : 2 * retry_ns);
      int64_t none = 0;
      const int64_t again = NowNs();
      last_arm_.store(again, std::memory_order_relaxed);
      armed_at_.compare_exchange_strong(none, again + retry_ns - delay_ns);
    } else {
      retry_ns = 0;
    }
    lock.lock();
  }
}

}  // namespace ps
