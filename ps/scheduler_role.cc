#include "scheduler_role.h"

#include <glog/logging.h>

#include <algorithm>

#include "ps/base.h"
#include "ps/internal/postoffice.h"

namespace ps {

SchedulerRole::SchedulerRole(Postoffice* postoffice, const Config& config, const Node& self)
    : postoffice_(postoffice), config_(config), self_(self) {}

void SchedulerRole::Reply(int recipient_id, const std::string& endpoint, Message& msg) {
  Status s = postoffice_->van()->Connect(recipient_id, endpoint);
  if (s.ok()) {
    msg.meta.recipient = recipient_id;
    s = postoffice_->Send(msg);
  }
  if (!s.ok()) LOG(WARNING) << "cannot answer node at " << endpoint << ": " << s;
}

void SchedulerRole::HandleAddNode(const Message& msg) {
  if (msg.meta.control.nodes.size() != 1) {
    LOG(WARNING) << "join request with " << msg.meta.control.nodes.size()
                 << " node entries ignored";
    return;
  }
  Node node = msg.meta.control.nodes[0];
  if (node.role == Node::kSchedulerRole || node.endpoint.empty()) {
    LOG(WARNING) << "join request from " << node.DebugString() << " ignored: "
                 << (node.endpoint.empty() ? "no endpoint" : "a second scheduler");
    return;
  }
  for (const Node& n : joining_) {
    if (n.endpoint == node.endpoint) return;  // a repeated request
  }
  if (complete_) {
    // Re-joining after a failure is the fault-tolerance layer's business; until then
    // a late node is told plainly that the job is full.
    Message reply;
    reply.meta.control.cmd = Control::kAddNode;
    reply.meta.status_code = static_cast<int>(Status::Code::kUnavailable);
    reply.meta.status_message = "the job already has " + std::to_string(config_.num_workers) +
                                " workers and " + std::to_string(config_.num_servers) +
                                " servers; this node is one too many";
    // Temporary id for the reply only: above every real id, so it clashes with none.
    Reply(Postoffice::WorkerRankToID(1 << 22), node.endpoint, reply);
    LOG(WARNING) << "refused " << node.DebugString() << ": job is full";
    return;
  }
  joining_.push_back(node);
  if (postoffice_->verbose()) {
    LOG(INFO) << "node joined: " << node.DebugString() << " (" << joining_.size() << "/"
              << config_.num_workers + config_.num_servers << ")";
  }
  if (joining_.size() == static_cast<size_t>(config_.num_workers + config_.num_servers)) {
    AssignAndBroadcast();
  }
}

void SchedulerRole::AssignAndBroadcast() {
  complete_ = true;
  std::vector<Node> table;
  table.push_back(self_);
  for (Node::Role role : {Node::kServerRole, Node::kWorkerRole}) {
    std::vector<Node*> group;
    for (Node& n : joining_) {
      if (n.role == role) group.push_back(&n);
    }
    // Use the launcher's labels as ranks when they are exactly 0..n-1, so that
    // "[worker 2]" in the launcher's output is rank 2.
    std::vector<bool> seen(group.size(), false);
    bool hints_ok = true;
    for (Node* n : group) {
      if (n->rank_hint < 0 || n->rank_hint >= static_cast<int>(group.size()) ||
          seen[n->rank_hint]) {
        hints_ok = false;
        break;
      }
      seen[n->rank_hint] = true;
    }
    for (size_t i = 0; i < group.size(); ++i) {
      Node* n = group[i];
      n->rank = hints_ok ? n->rank_hint : static_cast<int>(i);
      n->id = role == Node::kServerRole ? Postoffice::ServerRankToID(n->rank)
                                        : Postoffice::WorkerRankToID(n->rank);
    }
  }
  for (const Node& n : joining_) table.push_back(n);
  std::sort(table.begin(), table.end(), [](const Node& a, const Node& b) { return a.id < b.id; });

  postoffice_->InstallNodeTable(table, self_.id);
  for (const Node& n : joining_) {
    Message reply;
    reply.meta.control.cmd = Control::kAddNode;
    reply.meta.control.nodes = table;
    Reply(n.id, n.endpoint, reply);
  }
  LOG(INFO) << "all " << joining_.size() << " nodes joined (" << config_.num_servers
            << " servers, " << config_.num_workers << " workers)";
}

void SchedulerRole::HandleBarrier(const Message& msg) {
  int group = msg.meta.control.barrier_group;
  int customer = msg.meta.customer_id;
  std::vector<int> members = postoffice_->GetNodeIDs(group);
  if (members.empty() ||
      std::find(members.begin(), members.end(), msg.meta.sender) == members.end()) {
    LOG(WARNING) << "barrier request from node " << msg.meta.sender << " for group " << group
                 << " it is not in; ignored";
    return;
  }
  auto key = std::make_pair(group, customer);
  auto& arrived = barrier_arrivals_[key];
  arrived.insert(msg.meta.sender);
  if (arrived.size() < members.size()) return;
  barrier_arrivals_.erase(key);
  for (int id : members) {
    Message release;
    release.meta.control.cmd = Control::kBarrier;
    release.meta.control.barrier_group = group;
    release.meta.customer_id = customer;
    release.meta.request = false;
    release.meta.recipient = id;
    Status s = postoffice_->Send(release);
    if (!s.ok()) LOG(WARNING) << "cannot release node " << id << " from barrier: " << s;
  }
}

}  // namespace ps
