// A server leaving the running job gracefully (docs/fault-tolerance.md, "Removing a
// server"; the server's side is postoffice_withdraw.cc). Once every server is live the
// scheduler marks it leaving: it still serves its keys, and the ring that follows has
// none on it. The servers send each live server the keys that ring gives it and that
// it does not hold yet, with the copies of the pushes taken meanwhile; each live server
// says when it holds them all (Control::kCaughtUp). Then the leaving server goes out of
// the table, and is told so. One ring change at a time.
#include <glog/logging.h>

#include <algorithm>
#include <string>

#include "ps/internal/postoffice.h"
#include "scheduler_role.h"

namespace ps {

void SchedulerRole::HandleWithdraw(const Message& msg) {
  const int id = msg.meta.sender;
  Node* leaving = nullptr;
  for (Node& n : view_.nodes) {
    if (n.id == id) leaving = &n;
  }
  if (!leaving || leaving->role != Node::kServerRole || !live_.count(id) ||
      leaving->state != Node::kLive) {
    return;  // leaving already, or not a live server
  }
  const std::string asks = "server " + std::to_string(leaving->rank) + " asks to leave the job";
  size_t placed = 0;
  std::string busy;
  for (const Node& n : view_.nodes) {
    if (n.role != Node::kServerRole) continue;
    placed += n.state != Node::kEntering;
    if (n.state != Node::kLive && busy.empty()) {
      busy = "server " + std::to_string(n.rank) + " is " + StateName(n.state);
    }
  }
  // The server checked these before it asked (Postoffice::Withdraw).
  std::string cannot;
  if (config_.key_placement != ConsistentHashRing::kRing) {
    cannot = "leaving needs PS_KEY_PLACEMENT=ring";
  } else if (config_.replication < 2 && config_.chunk_bytes != 0) {
    cannot = Postoffice::kLeaveNeedsKeptParts;
  } else if (config_.replicate_rounds) {
    cannot = "with PS_REPLICATE_ROUNDS=1 no server takes keys from the others";
  } else if (placed <= static_cast<size_t>(config_.replication)) {
    cannot = "without it fewer than PS_REPLICATION=" + std::to_string(config_.replication) +
             " servers would hold each key";
  }
  if (!cannot.empty() || !busy.empty()) {
    // It asks again with each heartbeat: said once per server.
    if (withdraw_waits_logged_.insert(id).second) {
      LOG(WARNING) << asks << ", but " << (cannot.empty() ? busy : cannot) << ": it "
                   << (cannot.empty() ? "waits until every server is live" : "stays");
    }
    return;
  }
  withdraw_waits_logged_.erase(id);
  leaving->state = Node::kLeaving;
  BeginLeaveRound(id);
  LOG(WARNING) << asks << ": it is leaving, and serves its keys while the other "
               << leave_receivers_.size() << " servers take them over (membership version "
               << view_.version << ")";
  Broadcast();
}

void SchedulerRole::BeginLeaveRound(int id) {
  leaving_ = id;
  leave_started_ = Clock::now();
  leave_receivers_.clear();
  leave_reported_.clear();
  for (const Node& n : view_.nodes) {
    if (n.role == Node::kServerRole && n.state == Node::kLive) leave_receivers_.insert(n.id);
  }
  ++view_.version;
  view_.leave_version = view_.version;
  postoffice_->InstallMembership(view_);
}

void SchedulerRole::FinishLeave() {
  const Node* leaving = view_.Find(leaving_);
  if (!leaving) return;
  const Node gone = *leaving;
  const bool retired = view_.retiring == gone.id;  // a dead one (scheduler_retire.cc)
  if (!retired) {
    // Told while it is still in the table; a lost answer is repeated for its heartbeats.
    withdrawn_[gone.id] = gone.identity;
    AnswerWithdrawn(gone.id);
  }
  EraseFromTable(gone.id);
  // Its rank is never given again, though no server in the table has it now.
  next_added_rank_ = std::max(next_added_rank_, gone.rank + 1);
  live_.erase(gone.id);
  replacements_.erase(gone.id);
  dead_since_.erase(gone.id);
  for (auto& barrier : barriers_) barrier.second.arrived.erase(gone.id);
  leaving_ = kEmpty;
  leave_receivers_.clear();
  leave_reported_.clear();
  view_.leave_version = 0;
  view_.retiring = 0;
  ++view_.version;
  postoffice_->InstallMembership(view_);
  const size_t ring = postoffice_->membership()->ring.servers().size();
  if (retired) {
    LOG(WARNING) << "dead server " << gone.rank << " (node " << gone.id << ") is retired: "
                 << "the other servers hold its keys, each key is on PS_REPLICATION="
                 << config_.replication << " servers again, and the ring has " << ring
                 << " servers (membership version " << view_.version << ")";
  } else {
    LOG(WARNING) << "server " << gone.rank << " (node " << gone.id << ") left the job: the "
                 << "other servers hold its keys, and the ring has " << ring << " servers "
                 << "(membership version " << view_.version << ")";
  }
  Broadcast();
  ReleaseCompleteBarriers();
  AdmitWaitingServer();
}

void SchedulerRole::CallOffLeave(const std::string& why) {
  for (Node& n : view_.nodes) {
    if (n.id != leaving_) continue;
    if (n.id == view_.retiring) {
      // Dead it stays; its keys stay on their live replicas.
      LOG(WARNING) << "the re-replication of dead server " << n.rank << "'s keys is called "
                   << "off (" << why << ")";
      continue;
    }
    n.state = Node::kLive;
    LOG(WARNING) << "server " << n.rank << "'s leave is called off (" << why << "): it serves "
                 << "its keys as before and asks again";
  }
  leaving_ = kEmpty;
  leave_receivers_.clear();
  leave_reported_.clear();
  view_.leave_version = 0;
  view_.retiring = 0;
}

void SchedulerRole::AnswerIfWithdrawn(int id, const std::string& identity) {
  if (view_.Find(id)) return;
  auto it = withdrawn_.find(id);
  if (it != withdrawn_.end() && it->second == identity) return AnswerWithdrawn(id);
  auto off = called_off_.find(id);
  if (off == called_off_.end() || off->second.identity != identity) return;
  TellNotAdded(off->second, view_.version);  // an add called off
}

void SchedulerRole::AnswerWithdrawn(int id) {
  Message reply;
  reply.meta.control.cmd = Control::kWithdraw;
  reply.meta.recipient = id;
  // Straight through the van: the runtime sends nothing to a node out of the table.
  reply.meta.sender = self_.id;
  postoffice_->van()->Send(reply, SendMode::kNonBlocking, Channel::kControl);
}

}  // namespace ps
