// A server added to a running job (docs/fault-tolerance.md, "Adding a server"). The
// scheduler gives it the next rank and puts it in the table as entering: every node
// connects to it, but the ring places no key on it yet. The live servers send it the
// keys the grown ring gives it, and the copies of the pushes they take on those keys
// meanwhile; once it holds them all it says so (Control::kCaughtUp) and the scheduler
// makes it live, so that every node's ring has it from that version on. One server
// enters at a time.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "ps/internal/postoffice.h"
#include "scheduler_role.h"

namespace ps {

bool SchedulerRole::AdmitAddedServer(const Node& joining, std::string* why) {
  const std::string cannot = "the job has its " + std::to_string(config_.num_workers) +
                             " workers and no dead server whose place it could take, and a "
                             "server cannot be added to it: ";
  if (config_.key_placement != ConsistentHashRing::kRing) {
    *why = cannot + "with PS_KEY_PLACEMENT=range every rank owns a fixed range of keys "
                    "(PS_KEY_PLACEMENT=ring lets servers be added)";
    return false;
  }
  if (config_.replicate_rounds) {
    *why = cannot + "with PS_REPLICATE_ROUNDS=1 no server takes keys from the others";
    return false;
  }
  // Ranks are not used twice: a server that left, or died entering, keeps its own.
  int next_rank = std::max(next_added_rank_, config_.num_servers);
  for (const Node& n : view_.nodes) {
    if (n.role != Node::kServerRole) continue;
    next_rank = std::max(next_rank, n.rank + 1);
    if (n.state == Node::kDead && n.id != view_.retiring) {
      *why = cannot + "server " + std::to_string(n.rank) + " is dead (a new server takes "
             "its place first: start it with PS_RANK=" + std::to_string(n.rank) +
             (config_.replication >= 2
                  ? "; or start this one again once the dead one's keys are re-replicated, "
                    "PS_REREPLICATE_AFTER after its death)"
                  : ")");
      return false;
    }
    if (n.state == Node::kLeft) {
      *why = cannot + "the job is ending (server " + std::to_string(n.rank) + " has left)";
      return false;
    }
  }
  if (next_rank >= config_.num_servers + kMaxAddedServers) {
    *why = cannot + "at most " + std::to_string(kMaxAddedServers) +
           " servers can be added over a job's life";
    return false;
  }
  for (const Node& n : view_.nodes) {
    const bool changing = n.state == Node::kEntering || n.state == Node::kJoining ||
                          n.state == Node::kLeaving || n.id == view_.retiring;
    if (n.role != Node::kServerRole || !changing) continue;
    // One ring change at a time: this one waits, and its join (repeated every second)
    // keeps its place in the queue.
    auto waiting = waiting_adds_.find(joining.identity);
    if (waiting == waiting_adds_.end()) {
      LOG(INFO) << "a server at " << joining.endpoint << " waits to be added until server "
                << n.rank
                << (n.state == Node::kLeaving ? " has left"
                    : n.id == view_.retiring ? "'s keys are re-replicated"
                                             : " holds its keys");
    }
    waiting_adds_[joining.identity] = Parked{joining, Clock::now()};
    return true;
  }
  waiting_adds_.erase(joining.identity);
  next_added_rank_ = next_rank + 1;
  Node n = joining;
  n.rank = next_rank;
  n.id = Postoffice::ServerRankToID(next_rank);
  n.instance = 0;
  n.state = Node::kEntering;
  view_.nodes.push_back(n);
  std::sort(view_.nodes.begin(), view_.nodes.end(),
            [](const Node& a, const Node& b) { return a.id < b.id; });
  // The death of another process with this id (a server added before that died while
  // entering) left no barrier entry of its own.
  for (auto& barrier : barriers_) barrier.second.arrived.erase(n.id);
  postoffice_->van()->AdmitIdentity(n.identity);
  replacements_.insert(n.id);  // it joins a running job: no start barrier
  live_.insert(n.id);
  add_started_ = Clock::now();
  Heard(n.id);
  ++view_.version;
  postoffice_->InstallMembership(view_);
  LOG(WARNING) << "server " << n.rank << " (node " << n.id << ") at " << n.endpoint
               << " is added to the job: it catches up the keys the grown ring gives it "
               << "from the live servers, and the ring places keys on it once it holds "
               << "them (membership version " << view_.version << ")";
  SendTable(n, /*replaces_dead_node=*/true);
  Broadcast(n.id);
  return true;
}

void SchedulerRole::AdmitWaitingServer() {
  while (!waiting_adds_.empty()) {
    // The first of those still asking (by identity: no order is promised).
    auto next = waiting_adds_.end();
    for (auto it = waiting_adds_.begin(); it != waiting_adds_.end();) {
      if (Clock::now() - it->second.heard >= kParkedSilence) {
        it = waiting_adds_.erase(it);
        continue;
      }
      if (next == waiting_adds_.end()) next = it;
      ++it;
    }
    if (next == waiting_adds_.end()) return;
    Node node = next->second.node;
    waiting_adds_.erase(next);
    bool listed = false;  // let in another way meanwhile (a dead one's place)
    for (const Node& n : view_.nodes) listed |= n.identity == node.identity;
    if (listed) continue;
    std::string why;
    if (AdmitAddedServer(node, &why)) return;
    Refuse(node, why);
  }
}

void SchedulerRole::CallOffAdd(int id, const std::string& why) {
  const Node* node = view_.Find(id);
  if (!node) return;
  Node told = *node;
  LOG(ERROR) << "server " << told.rank << " (node " << id << ", " << told.endpoint << ") is "
             << "not added: " << why << "; it is told, and the ring stays as it was";
  // The others never list it again.
  told.state = Node::kDead;
  EraseFromTable(id);
  TellNotAdded(told, view_.version + 1);  // the version the caller publishes
  live_.erase(id);
  replacements_.erase(id);
  called_off_[id] = told;  // told again if it asks (the word above may be lost)
}

void SchedulerRole::CallOffLateRingChange() {
  const double deadline = RingChangeTimeoutSeconds(config_);
  if (deadline <= 0 || postoffice_->finalizing_) return;
  const auto late = [deadline](Clock::time_point since) {
    return Clock::now() - since >= std::chrono::duration<double>(deadline);
  };
  const std::string within = " within PS_RING_CHANGE_TIMEOUT=" + SecondsText(deadline) + " s";
  for (const Node& n : view_.nodes) {
    if (n.role != Node::kServerRole || n.state != Node::kEntering || !late(add_started_)) {
      continue;
    }
    CallOffAdd(n.id, "it did not hold its keys" + within + " (a live server did not send "
                     "them all: one stopped, starved of CPU, or not running an "
                     "OptimizerServer)");
    ++view_.version;
    postoffice_->InstallMembership(view_);
    Broadcast();
    ReleaseCompleteBarriers();
    AdmitWaitingServer();
    return;  // view_.nodes changed
  }
  if (leaving_ == kEmpty || leaving_ == view_.retiring || !late(leave_started_)) return;
  CallOffLeave("not every live server said it holds its keys" + within);
  ++view_.version;
  postoffice_->InstallMembership(view_);
  Broadcast();
  AdmitWaitingServer();
}

void SchedulerRole::TellNotAdded(const Node& told, uint64_t version) {
  // It reads that it is dead in a table of its own, straight through the van: the
  // runtime sends nothing to a node out of the table.
  Message reply;
  reply.meta.control.cmd = Control::kHeartbeat;
  reply.meta.control.membership_version = version;
  reply.meta.control.leave_version = view_.leave_version;
  reply.meta.control.retiring = view_.retiring;
  reply.meta.control.nodes = view_.nodes;
  reply.meta.control.nodes.push_back(told);
  reply.meta.recipient = told.id;
  reply.meta.sender = self_.id;
  postoffice_->van()->Send(reply, SendMode::kNonBlocking, Channel::kControl);
}

void SchedulerRole::EraseFromTable(int id) {
  view_.nodes.erase(std::remove_if(view_.nodes.begin(), view_.nodes.end(),
                                   [id](const Node& n) { return n.id == id; }),
                    view_.nodes.end());
}

void SchedulerRole::DropEnteringServer(const Node& node, Node::State state) {
  const int rank = node.rank;
  const int id = node.id;
  LOG(ERROR) << "server " << rank << " (node " << id << ", " << node.endpoint << ") "
             << (state == Node::kDead ? "died" : "left") << " before it caught up: it is "
             << "not added, and the ring stays as it was";
  EraseFromTable(id);
  replacements_.erase(id);
  ++view_.version;
  postoffice_->InstallMembership(view_);
  if (!postoffice_->finalizing_) Broadcast();
  ReleaseCompleteBarriers();
  if (!postoffice_->finalizing_) AdmitWaitingServer();
}

}  // namespace ps
