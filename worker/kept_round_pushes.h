// KeptRoundPushes: the worker's side of round copies (PS_REPLICATE_ROUNDS,
// docs/fault-tolerance.md). A server that copies closed rounds to its keys' replicas,
// instead of every push, answers a push once it is in its round: until the round is
// copied, that server process alone holds it. So the worker keeps its own copy of each
// push part such a server answered, until an answer from the same process says its
// rounds are copied past the part's clock (Meta::rounds_copied_below). Should the
// process die first, the parts kept for it go again to the servers that took its keys
// over (RequestPipeline, part_failover.cc). Private to worker/.
//
// Thread safety: all members take an internal lock; call from any thread.
#ifndef HERDPS_WORKER_KEPT_ROUND_PUSHES_H_
#define HERDPS_WORKER_KEPT_ROUND_PUSHES_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ps/internal/message.h"

namespace ps {

class KeptRoundPushes {
 public:
  struct Kept {
    int server = 0;       // rank
    std::string process;  // the server process that answered it (its identity)
    int64_t clock = 0;    // the clock of the round it went into
    Message sent;         // the part as sent, its arrays copies of its own
  };
  // An answer from server `rank`, process `process`, says its rounds are copied below
  // `copied_below`: the parts kept for that process of earlier clocks are dropped. An
  // answer from another process of that rank drops what the earlier one's kept parts
  // would need (they go again only when a process dies; see TakeGone).
  void Copied(int rank, const std::string& process, int64_t copied_below);
  // Keeps a copy of `sent`, a push part of clock `clock` that server `rank` (process
  // `process`) answered, unless that process said its rounds are copied past it, or
  // another process of the rank answered since. Returns whether it kept it.
  bool Keep(int rank, const std::string& process, int64_t clock, const Message& sent);
  // Takes out the parts kept for the servers for which `gone(rank, process)` is true.
  template <typename Gone>
  std::vector<Kept> TakeGone(const Gone& gone) {
    std::vector<Kept> out;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = servers_.begin(); it != servers_.end();) {
      if (!gone(it->first, it->second.process)) {
        ++it;
        continue;
      }
      for (Kept& k : it->second.kept) out.push_back(std::move(k));
      it = servers_.erase(it);
    }
    return out;
  }
 private:
  struct Server {
    std::string process;
    int64_t copied_below = -1;
    std::deque<Kept> kept;  // in the order answered
  };
  std::mutex mu_;
  std::map<int, Server> servers_;  // by rank
};

}  // namespace ps

#endif  // HERDPS_WORKER_KEPT_ROUND_PUSHES_H_
