// EventLoop (ps/internal/event_loop.h).
#include "ps/internal/event_loop.h"

#include <glog/logging.h>

#include <exception>

#ifdef __linux__
#include <pthread.h>
#endif

namespace ps {
namespace {

// The first tick of the grid `deadline + k * period` (k >= 1) that lies after now, so
// a periodic timer keeps its phase and skips the ticks an overrun let pass.
EventLoop::Clock::time_point NextTick(EventLoop::Clock::time_point deadline,
                                      EventLoop::Clock::duration period) {
  EventLoop::Clock::time_point next = deadline + period;
  EventLoop::Clock::time_point now = EventLoop::Clock::now();
  if (next <= now) next += ((now - next) / period + 1) * period;
  return next;
}

}  // namespace

EventLoop::EventLoop(std::string name) : name_(std::move(name)) {}

EventLoop::~EventLoop() {
  CHECK(!InLoopThread()) << "event loop " << name_ << " destroyed on its own thread";
  Stop();
}

void EventLoop::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_ || stopping_) return;
  started_ = true;
  thread_ = std::thread([this] { Run(); });
}

void EventLoop::Stop() {
  // Discarded work is destroyed when this returns, after the lock is released.
  std::deque<PostedTask> discarded_tasks;
  std::map<TimerKey, Timer> discarded_timers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    discarded_tasks.swap(tasks_);
    discarded_timers.swap(timers_);
    armed_.clear();
  }
  wake_.notify_all();
  // On the loop thread we are inside a task: the loop exits once it returns.
  if (InLoopThread()) return;
  // thread_ is no longer written: Start does nothing once stopping_ is set.
  std::lock_guard<std::mutex> lock(join_mu_);
  if (thread_.joinable()) thread_.join();
}

void EventLoop::Post(Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    // Stamped under the lock, so tasks_ is sorted by `posted`.
    tasks_.push_back(PostedTask{Clock::now(), std::move(task)});
  }
  wake_.notify_one();
}

EventLoop::TimerId EventLoop::RunAt(Clock::time_point when, Task task) {
  return Arm(when, Clock::duration::zero(), std::move(task));
}

EventLoop::TimerId EventLoop::RunAfter(Clock::duration delay, Task task) {
  return Arm(Clock::now() + delay, Clock::duration::zero(), std::move(task));
}

EventLoop::TimerId EventLoop::RunEvery(Clock::duration period, Task task) {
  CHECK(period > Clock::duration::zero()) << "event loop " << name_ << ": period must be > 0";
  return Arm(Clock::now() + period, period, std::move(task));
}

void EventLoop::Cancel(TimerId id) {
  Task discarded;  // declared before the lock, so destroyed after it is released
  std::lock_guard<std::mutex> lock(mu_);
  if (id != 0 && id == running_timer_) {
    running_cancelled_ = true;  // the loop thread will not re-arm it
    return;
  }
  auto it = armed_.find(id);
  if (it == armed_.end()) return;
  auto timer = timers_.find(it->second);
  discarded = std::move(timer->second.task);
  timers_.erase(timer);
  armed_.erase(it);
}

bool EventLoop::InLoopThread() const {
  return loop_thread_id_.load() == std::this_thread::get_id();
}

size_t EventLoop::NumTimers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return timers_.size();
}

EventLoop::TimerId EventLoop::Arm(Clock::time_point when, Clock::duration period, Task task) {
  TimerId id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    if (stopping_) return id;
    ArmLocked(when, Timer{id, period, std::move(task)});
  }
  // The loop may be sleeping until a later deadline.
  wake_.notify_one();
  return id;
}

void EventLoop::ArmLocked(Clock::time_point when, Timer timer) {
  TimerKey key(when, next_sequence_++);
  armed_[timer.id] = key;
  timers_.emplace(key, std::move(timer));
}

void EventLoop::Run() {
  loop_thread_id_.store(std::this_thread::get_id());
#ifdef __linux__
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
#endif
  for (;;) {
    Work work;  // declared before the locks below, so its task dies without mu_ held
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!TakeNext(lock, &work)) break;
    }
    RunGuarded(work.task);
    if (work.timer_id == 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    running_timer_ = 0;
    if (work.period != Clock::duration::zero() && !running_cancelled_ && !stopping_) {
      ArmLocked(NextTick(work.deadline, work.period),
                Timer{work.timer_id, work.period, std::move(work.task)});
    }
  }
  // A later thread may be given this id; it must not pass for the loop thread.
  loop_thread_id_.store(std::thread::id());
}

bool EventLoop::TakeNext(std::unique_lock<std::mutex>& lock, Work* work) {
  for (;;) {
    if (stopping_) return false;
    auto timer = timers_.begin();
    bool has_timer = timer != timers_.end();
    if (!tasks_.empty() && (!has_timer || tasks_.front().posted <= timer->first.first)) {
      work->task = std::move(tasks_.front().task);
      tasks_.pop_front();
      return true;
    }
    if (!has_timer) {
      wake_.wait(lock);
      continue;
    }
    Clock::time_point deadline = timer->first.first;
    if (Clock::now() < deadline) {
      wake_.wait_until(lock, deadline);
      continue;
    }
    work->timer_id = timer->second.id;
    work->period = timer->second.period;
    work->deadline = deadline;
    work->task = std::move(timer->second.task);
    armed_.erase(work->timer_id);
    timers_.erase(timer);
    running_timer_ = work->timer_id;
    running_cancelled_ = false;
    return true;
  }
}

void EventLoop::RunGuarded(const Task& task) {
  try {
    task();
  } catch (const std::exception& e) {
    LOG_IF(ERROR, error_log_.ShouldLog()) << "event loop " << name_ << ": a task threw ("
                                          << error_log_.count() << " so far): " << e.what();
  } catch (...) {
    LOG_IF(ERROR, error_log_.ShouldLog())
        << "event loop " << name_ << ": a task threw a non-standard exception ("
        << error_log_.count() << " so far)";
  }
}

}  // namespace ps
