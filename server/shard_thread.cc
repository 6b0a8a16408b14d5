#include "shard_thread.h"

#include <glog/logging.h>

#include <future>

namespace ps {

ShardThread::ShardThread(std::unique_ptr<ShardStore> store, size_t queue_capacity)
    : store_(std::move(store)) {
  queue_.set_capacity(static_cast<std::ptrdiff_t>(queue_capacity));
  thread_ = std::thread([this] { Loop(); });
}

ShardThread::~ShardThread() {
  queue_.push(Task());
  thread_.join();
}

void ShardThread::Enqueue(Task task) { queue_.push(std::move(task)); }

void ShardThread::RunAndWait(const Task& task) {
  std::promise<void> done;
  Enqueue([&](ShardStore& store) {
    // The caller waits on `done`: it must be set whatever the task does.
    try {
      task(store);
      done.set_value();
    } catch (...) {
      done.set_exception(std::current_exception());
    }
  });
  done.get_future().get();  // rethrows the task's exception here
}

void ShardThread::Loop() {
  for (;;) {
    Task task;
    queue_.pop(task);
    if (!task) return;
    // A task runs request parts for any peer, so whatever it throws is logged (a flood
    // of them only sampled) and the shard goes on with its queue.
    try {
      task(*store_);
    } catch (const std::exception& e) {
      LOG_IF(ERROR, thrown_log_.ShouldLog())
          << "shard task threw: " << e.what() << " (" << thrown_log_.count() << " so far)";
    } catch (...) {
      LOG_IF(ERROR, thrown_log_.ShouldLog())
          << "shard task threw an exception that is not a std::exception (" << thrown_log_.count()
          << " so far)";
    }
  }
}

}  // namespace ps
