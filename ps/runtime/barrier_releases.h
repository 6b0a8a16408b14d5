// BarrierReleases: the releases this node has received from the scheduler's barriers,
// counted per (node group, customer, node id), and the waits for the next one. Part of
// the Postoffice; internal to the runtime.
//
// Thread safety: all methods are thread-safe.
#ifndef HERDPS_PS_RUNTIME_BARRIER_RELEASES_H_
#define HERDPS_PS_RUNTIME_BARRIER_RELEASES_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "ps/status.h"

namespace ps {

class BarrierReleases {
 public:
  // (node group, customer id, node id): a process with several worker instances gets
  // one release per instance.
  using Key = std::tuple<int, int, int>;

  // A new Start: no releases, no failure.
  void Reset();
  // How many releases `key` has had: read before asking for a barrier.
  uint64_t Count(const Key& key);
  // One more release for `key`: wakes its waiter.
  void Release(const Key& key);
  // Waits until `key` has had more than `seen` releases (OK), or until Fail
  // (Unavailable with its reason).
  Status WaitBeyond(const Key& key, uint64_t seen);
  // Ends every wait, now and later, with `why` (the node gave up).
  void Fail(const std::string& why);
  // Ends every wait, now and later, as released (the node left the job: no barrier
  // includes it any more).
  void ReleaseAll();

 private:
  std::mutex mu_;  // guards counts_ and failed_
  std::condition_variable cv_;
  std::map<Key, uint64_t> counts_;
  std::string failed_;
  bool released_all_ = false;
};

}  // namespace ps

#endif  // HERDPS_PS_RUNTIME_BARRIER_RELEASES_H_
