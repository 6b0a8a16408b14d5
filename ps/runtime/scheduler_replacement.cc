// A new server in the place of a dead one (SchedulerRole::AdmitReplacement): the
// restart path of a job without replication, and the way a replicated job gets its
// copies back (docs/fault-tolerance.md). With replication the new server first catches
// up: it is in the table as joining (connected, sent the copies of new pushes) while
// the live servers send it the keys it holds, and its keys stay with their replicas
// until it says it has them all (HandleCaughtUp).
#include <glog/logging.h>

#include <string>
#include <vector>

#include "ps/internal/postoffice.h"
#include "scheduler_role.h"

namespace ps {
namespace {

bool HasServerRank(const MembershipView& view, int rank) {
  for (const Node& n : view.nodes) {
    if (n.role == Node::kServerRole && n.rank == rank) return true;
  }
  return false;
}

}  // namespace

bool SchedulerRole::AdmitReplacement(const Node& joining, std::string* why) {
  const std::string full = "the job already has its " + std::to_string(config_.num_workers) +
                           " workers and " + std::to_string(config_.num_servers) + " servers";
  if (joining.role != Node::kServerRole) {
    *why = full + " (only a server can take a dead node's place)";
    return false;
  }
  if (joining.instance > 0) {
    *why = "only a worker process may run several workers";
    return false;
  }
  if (config_.replicate_rounds) {
    *why = full + " (with PS_REPLICATE_ROUNDS=1 no new server takes a dead one's place: "
                  "its keys run on their replica)";
    return false;
  }
  Node* slot = nullptr;
  for (Node& n : view_.nodes) {
    if (n.role != Node::kServerRole || n.state != Node::kDead) continue;
    if (joining.rank_hint >= 0 && n.rank != joining.rank_hint) continue;
    if (!slot || n.rank < slot->rank) slot = &n;
  }
  if (!slot && joining.rank_hint >= 0) {
    for (const Node& n : view_.nodes) {
      if (n.role != Node::kServerRole || n.rank != joining.rank_hint || !n.alive()) continue;
      if (config_.heartbeat_interval_s <= 0) {
        *why = full + " and server " + std::to_string(n.rank) + " (its PS_RANK) is live; "
               "with PS_HEARTBEAT_INTERVAL=0 no server is ever declared dead";
        return false;
      }
      // The process it replaces is gone but not declared dead yet (a launcher or an
      // operator restarts a server as soon as it exits): it joins when that happens. A
      // waiting node repeats its join every second; one silent for longer is gone.
      const Clock::time_point now = Clock::now();
      auto parked = parked_.find(n.rank);
      if (parked != parked_.end() && parked->second.node.identity != joining.identity &&
          now - parked->second.heard < kParkedSilence) {
        *why = "another new server already waits to take server " + std::to_string(n.rank) +
               "'s place";
        return false;
      }
      if (parked == parked_.end() || parked->second.node.identity != joining.identity) {
        LOG(INFO) << "a new server " << n.rank << " at " << joining.endpoint << " waits to take "
                  << "server " << n.rank << "'s place until that one is declared dead (silent "
                  << "for PS_HEARTBEAT_TIMEOUT=" << SecondsText(config_.heartbeat_timeout_s)
                  << " s)";
      }
      parked_[n.rank] = Parked{joining, now};
      return true;
    }
  }
  if (!slot && !HasServerRank(view_, joining.rank_hint)) return AdmitAddedServer(joining, why);
  if (!slot) {
    *why = joining.rank_hint >= 0
               ? full + " and server " + std::to_string(joining.rank_hint) +
                     " (its PS_RANK) is not dead: a new server can only take a dead "
                     "server's place"
               : full + " and none of them is dead";
    return false;
  }
  if (config_.replication >= 3) {
    // One new server catches up at a time: the keys each one is sent are listed by the
    // servers that serve them while it catches up, and a server that came back meanwhile
    // (another new one, caught up) would serve some that nobody sent it. The waiting
    // node repeats its join every second. (With PS_REPLICATION=2 two new servers at once
    // follow two deaths at once, which lost the keys they shared already.)
    const Clock::time_point now = Clock::now();
    for (const Node& other : view_.nodes) {
      if (other.role != Node::kServerRole || other.state != Node::kJoining) continue;
      auto parked = parked_.find(slot->rank);
      const bool same =
          parked != parked_.end() && parked->second.node.identity == joining.identity;
      if (parked != parked_.end() && !same && now - parked->second.heard < kParkedSilence) {
        *why = "another new server already waits to take server " +
               std::to_string(slot->rank) + "'s place";
        return false;
      }
      if (!same) {
        LOG(INFO) << "a new server " << slot->rank << " at " << joining.endpoint << " waits to "
                  << "take server " << slot->rank << "'s place until server " << other.rank
                  << ", new in another dead one's place, has caught up";
        parked_[slot->rank] = Parked{joining, now, now};
        return true;
      }
      Parked& waiting = parked->second;
      if (waiting.behind_since == Clock::time_point{}) waiting.behind_since = now;
      if (now - waiting.behind_since >= kMostBehindJoiner) {
        LOG(WARNING) << "the new server " << slot->rank << " waited "
                     << kMostBehindJoiner.count() << " s for server " << other.rank
                     << " to catch up: it takes server " << slot->rank << "'s place now";
        break;
      }
      waiting.heard = now;  // it asked again
      return true;
    }
  }
  parked_.erase(slot->rank);
  waiting_adds_.erase(joining.identity);  // it waited to be added; it takes this place
  // Its keys were being re-replicated: the new process takes them back instead.
  if (slot->id == view_.retiring) CallOffLeave("a new server takes its place");
  dead_since_.erase(slot->id);
  Node& n = *slot;
  // The dead process's barrier entries are not the new one's.
  for (auto& barrier : barriers_) barrier.second.arrived.erase(n.id);
  n.host = joining.host;
  n.port = joining.port;
  n.endpoint = joining.endpoint;
  n.control_endpoint = joining.control_endpoint;
  n.identity = joining.identity;
  n.rank_hint = joining.rank_hint;
  n.instance = 0;
  const bool catches_up = config_.replication >= 2;
  n.state = catches_up ? Node::kJoining : Node::kLive;
  postoffice_->van()->AdmitIdentity(n.identity);
  replacements_.insert(n.id);
  live_.insert(n.id);
  Heard(n.id);  // its heartbeat timeout starts now
  ++view_.version;
  // Connects this node to the new endpoints; the others do when the news reaches them.
  postoffice_->InstallMembership(view_);
  if (catches_up) {
    LOG(WARNING) << "server " << n.rank << " (node " << n.id << ") is back: a new process at "
                 << n.endpoint << " takes the dead server's place and catches up from the "
                 << "live servers (PS_REPLICATION=" << config_.replication << "); its keys "
                 << "stay with their replicas until it holds them (membership version "
                 << view_.version << ")";
  } else {
    LOG(WARNING) << "server " << n.rank << " (node " << n.id << ") is back: a new process at "
                 << n.endpoint << " takes the dead server's place and its keys (membership "
                 << "version " << view_.version << ")";
  }
  SendTable(n, /*replaces_dead_node=*/true);
  Broadcast(n.id);
  return true;
}

void SchedulerRole::HandleCaughtUp(const Message& msg) {
  if (leaving_ != kEmpty && leave_receivers_.count(msg.meta.sender)) {
    // A word for another round (a late one of an add, a leave called off) is not this
    // leave's: only what names it counts.
    if (msg.meta.control.leave_version != view_.leave_version) return;
    leave_reported_.insert(msg.meta.sender);
    for (int id : leave_receivers_) {
      if (live_.count(id) && !leave_reported_.count(id)) return;
    }
    FinishLeave();
    return;
  }
  Node* n = nullptr;
  for (Node& node : view_.nodes) {
    if (node.id == msg.meta.sender) n = &node;
  }
  // Only a new server still catching up moves on; a late or repeated word changes nothing.
  if (!n || n->role != Node::kServerRole || !live_.count(n->id) ||
      (n->state != Node::kJoining && n->state != Node::kEntering)) {
    return;
  }
  const bool added = n->state == Node::kEntering;
  n->state = Node::kLive;
  ++view_.version;
  postoffice_->InstallMembership(view_);
  if (added) {
    LOG(WARNING) << "server " << n->rank << " (node " << n->id << ") caught up: it holds its "
                 << "keys and the ring places keys on it; the job has "
                 << postoffice_->membership()->ring.servers().size() << " servers on the ring "
                 << "(membership version " << view_.version << ")";
  } else {
    LOG(WARNING) << "server " << n->rank << " (node " << n->id << ") caught up: it holds its "
                 << "keys and serves them again (membership version " << view_.version << ")";
  }
  Broadcast();
  if (added) {
    AdmitWaitingServer();
    return;
  }
  // A new server that waited for this one to catch up takes its dead server's place now.
  std::vector<int> waiting;
  for (const auto& [rank, parked] : parked_) {
    for (const Node& node : view_.nodes) {
      if (node.role == Node::kServerRole && node.rank == rank && node.state == Node::kDead) {
        waiting.push_back(rank);
      }
    }
  }
  for (int rank : waiting) AdmitParkedReplacement(rank);
}

void SchedulerRole::AdmitParkedReplacement(int rank) {
  auto parked = parked_.find(rank);
  if (parked == parked_.end()) return;
  Parked waiting = parked->second;
  parked_.erase(parked);
  if (Clock::now() - waiting.heard >= kParkedSilence) {
    LOG(INFO) << "the new server that waited for server " << rank << "'s place stopped asking; "
              << "it is not admitted";
    return;
  }
  std::string why;
  if (!AdmitReplacement(waiting.node, &why)) Refuse(waiting.node, why);
}

void SchedulerRole::RefuseParkedReplacement(int rank, const std::string& why) {
  auto parked = parked_.find(rank);
  if (parked == parked_.end()) return;
  Node joining = parked->second.node;
  parked_.erase(parked);
  Refuse(joining, why);
}

}  // namespace ps
