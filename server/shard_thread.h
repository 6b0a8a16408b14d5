// ShardThread: one thread that owns one ShardStore and runs the tasks queued for it,
// strictly in queue order. Because every key belongs to exactly one shard and each
// request's parts are queued in arrival order, updates to a key are applied in the
// order the requests arrived, without a lock on the key data. A task that throws
// (anything) is logged at ERROR, sampled when many do, and the thread goes on.
#ifndef HERDPS_SERVER_SHARD_THREAD_H_
#define HERDPS_SERVER_SHARD_THREAD_H_

#include <tbb/concurrent_queue.h>

#include <algorithm>
#include <cstddef>

#include <functional>
#include <memory>
#include <thread>

#include "ps/internal/log_limiter.h"
#include "shard_store.h"

namespace ps {

class ShardThread {
 public:
  using Task = std::function<void(ShardStore& store)>;

  // Starts the thread. At most `queue_capacity` tasks wait; Enqueue blocks beyond
  // that, which pushes back on the van thread instead of growing memory.
  ShardThread(std::unique_ptr<ShardStore> store, size_t queue_capacity);
  // Runs the tasks already queued, then stops the thread.
  ~ShardThread();

  // Thread-safe.
  void Enqueue(Task task);

  // Runs `task` on the shard thread after everything queued before it and waits for
  // it; for reading the store from another thread (checkpoints, statistics). An
  // exception of the task is rethrown here.
  void RunAndWait(const Task& task);

  // Tasks waiting in the queue (not counting the one running). Thread-safe.
  size_t queued() const {
    // The queue's size counts waiting consumers as negative.
    return static_cast<size_t>(std::max<std::ptrdiff_t>(queue_.size(), 0));
  }

 private:
  void Loop();

  std::unique_ptr<ShardStore> store_;  // touched only by thread_
  LogLimiter thrown_log_;              // tasks that threw
  tbb::concurrent_bounded_queue<Task> queue_;  // an empty Task stops the loop
  std::thread thread_;
};

}  // namespace ps

#endif  // HERDPS_SERVER_SHARD_THREAD_H_
