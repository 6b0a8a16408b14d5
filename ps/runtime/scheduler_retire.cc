// Re-replication without a new server (docs/fault-tolerance.md, "Re-replication"). A
// server dead for PS_REREPLICATE_AFTER seconds whose place no new process took is
// retired: the table names it (MembershipView::retiring) under a leave version, the ring
// that follows places nothing on it, and the live servers send each other the keys that
// ring gives them and they do not hold, each from the replica that serves it now: a
// server leaving (scheduler_withdraw.cc) that sends nothing itself. Once every live
// server says it holds them (Control::kCaughtUp), the dead server goes out of the table
// (FinishLeave) and every key is on PS_REPLICATION servers again.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "ps/internal/postoffice.h"
#include "scheduler_role.h"

namespace ps {

void SchedulerRole::RetireLongDeadServer() {
  if (leaving_ != kEmpty && leaving_ == view_.retiring) {
    // Only a server that cannot take keys (no OptimizerServer, a message it refused), or
    // one stopped, holds a retire this long.
    const double deadline = RingChangeTimeoutSeconds(config_);
    if (deadline <= 0 ||
        Clock::now() - leave_started_ < std::chrono::duration<double>(deadline)) {
      return;
    }
    const int id = leaving_;
    CallOffLeave("not every live server said it holds its keys within "
                 "PS_RING_CHANGE_TIMEOUT=" + SecondsText(deadline) +
                 " s; tried again PS_REREPLICATE_AFTER from now");
    dead_since_[id] = Clock::now();
    ++view_.version;
    postoffice_->InstallMembership(view_);
    Broadcast();
    AdmitWaitingServer();
    return;
  }
  // With PS_REPLICATE_ROUNDS=1 no server takes keys from the others.
  if (config_.rereplicate_after_s <= 0 || config_.replication < 2 || config_.replicate_rounds ||
      leaving_ != kEmpty ||
      dead_since_.empty() || postoffice_->finalizing_) {
    return;
  }
  const Node* dead = nullptr;
  int live = 0;
  for (const Node& n : view_.nodes) {
    if (n.role != Node::kServerRole) continue;
    if (n.state == Node::kLive) {
      ++live;
      continue;
    }
    // A ring change under way (a server joining, entering or leaving) comes first.
    if (n.state != Node::kDead) return;
    // With two dead, keys held by both have no copy to send: retiring one of them would
    // give those keys to a server without their history.
    if (dead) return;
    dead = &n;
  }
  if (!dead) return;
  auto since = dead_since_.find(dead->id);
  if (since == dead_since_.end()) return;
  const double dead_s =
      std::chrono::duration<double>(Clock::now() - since->second).count();
  if (dead_s < config_.rereplicate_after_s) return;
  std::string cannot;
  if (config_.key_placement != ConsistentHashRing::kRing) {
    // Ranges are laid out by rank: a rank gone moves most keys.
    cannot = "re-replication needs PS_KEY_PLACEMENT=ring";
  } else if (live < config_.replication) {
    cannot = "only " + std::to_string(live) + " servers live";
  }
  if (!cannot.empty()) {
    if (retire_waits_logged_.insert(dead->id).second) {
      LOG(WARNING) << "server " << dead->rank << " has been dead for over PS_REREPLICATE_AFTER="
                   << SecondsText(config_.rereplicate_after_s) << " s, but " << cannot
                   << ": its keys run on fewer than PS_REPLICATION=" << config_.replication
                   << " copies until a new server takes its place (start one with PS_RANK="
                   << dead->rank << ")";
    }
    return;
  }
  retire_waits_logged_.erase(dead->id);
  const int rank = dead->rank;
  const int id = dead->id;
  view_.retiring = id;
  BeginLeaveRound(id);
  LOG(WARNING) << "server " << rank << " (node " << id << ") has been dead for "
               << SecondsText(dead_s) << " s and no new server took its place: the other "
               << leave_receivers_.size() << " servers copy its keys among themselves, until "
               << "each key is on PS_REPLICATION=" << config_.replication << " servers again "
               << "(re-replication, membership version " << view_.version << ")";
  Broadcast();
}

}  // namespace ps
