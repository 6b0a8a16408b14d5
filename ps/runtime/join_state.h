// JoinState: where this node stands with the job: joining (the first Start waits for
// the node table), joined, refused or timed out (the join's error), or given up (the
// scheduler lost, or this node declared dead). Part of the Postoffice; internal to the
// runtime.
//
// Thread safety: all methods are thread-safe; joined(), joining() and gave_up() are
// lock-free.
#ifndef HERDPS_PS_RUNTIME_JOIN_STATE_H_
#define HERDPS_PS_RUNTIME_JOIN_STATE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "ps/status.h"

namespace ps {

class JoinState {
 public:
  // A new Start: not joined, no error, not given up.
  void Reset();

  bool joined() const { return joined_.load(std::memory_order_acquire); }
  // The node table is installed: wakes the waiters.
  void MarkJoined();
  // The join failed with `error` (the first error holds): wakes the waiters.
  void Fail(const Status& error);
  // Waits until the node has joined or its join failed, at most `timeout`. False when
  // the time ran out; else true, with *error the join's error (OK: joined).
  bool WaitFor(std::chrono::milliseconds timeout, Status* error);
  // Waits without a bound (a later Start while the first waits).
  Status Wait();

  // Whether the first Start waits for the table (a Start for another customer then
  // joins one more worker). Set and read under the Postoffice's start lock.
  bool joining() const { return joining_.load(); }
  void set_joining(bool joining) { joining_ = joining; }

  // Whether the node joined a running job in a dead node's place (from the node table).
  bool replaces_dead_node() const { return replaces_dead_node_.load(); }
  void set_replaces_dead_node(bool on) { replaces_dead_node_ = on; }

  // The node cannot go on: records `why`. False if it had given up already.
  bool GiveUp(const std::string& why);
  bool gave_up() const { return gave_up_.load(std::memory_order_acquire); }
  // Why it gave up ("" if it has not).
  std::string why_gave_up() const;

 private:
  mutable std::mutex mu_;  // guards error_ and gave_up_why_
  std::condition_variable cv_;
  std::atomic<bool> joined_{false};
  std::atomic<bool> joining_{false};
  std::atomic<bool> replaces_dead_node_{false};
  Status error_;
  std::string gave_up_why_;
  std::atomic<bool> gave_up_{false};  // !gave_up_why_.empty()
};

}  // namespace ps

#endif  // HERDPS_PS_RUNTIME_JOIN_STATE_H_
