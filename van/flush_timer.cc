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

void FlushTimer::Arm() {
  const int64_t now = NowNs();
  last_arm_.store(now, std::memory_order_relaxed);
  // An earlier deadline stays; none, or a later one (a retry backing off), becomes now.
  int64_t armed = armed_at_.load();
  while ((armed == 0 || armed > now) && !armed_at_.compare_exchange_weak(armed, now)) {
  }
  if (!running_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || no_thread_) return;
    if (!thread_.joinable()) {
      try {
        thread_ = std::thread([this] { Loop(); });
      } catch (const std::system_error& e) {
        // Without the thread, batches wait for the next flush from elsewhere (a node's
        // request sweep makes one every 200 ms). Said once; not tried again.
        no_thread_ = true;
        LOG(ERROR) << "cannot start the thread that flushes coalesced messages: " << e.what();
        return;
      }
      running_.store(true, std::memory_order_release);
    }
    return;  // the new thread looks at armed_at_ first
  }
  // Paired with Loop's store to sleeping_ before it checks armed_at_ (both sequentially
  // consistent): either it sees this deadline, or this sees it asleep and wakes it.
  if (sleeping_.load()) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_one();
  }
}

void FlushTimer::Disarm() { armed_at_.store(0); }

void FlushTimer::Stop() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
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
      // At most `delay` at a time: an Arm that brings the deadline forward (during a
      // retry's backoff) wakes nobody, and is seen at the next look.
      cv_.wait_for(lock, std::chrono::nanoseconds(std::min(armed + delay_ns - now, delay_ns)));
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
