// Postoffice: the node's place among the job's workers and keys, as ps-lite apps ask
// for it: the workers of a process that runs several (ps-lite's Start per customer),
// the key ranges of ps-lite's placement, the dead nodes, and whether this node took a
// dead one's place.
#include <glog/logging.h>

#include <mutex>
#include <string>
#include <vector>

#include "ps/internal/event_loop.h"
#include "join_state.h"
#include "ps/internal/postoffice.h"
#include "worker_instances.h"

namespace ps {

const std::vector<Range>& Postoffice::GetServerKeyRanges() {
  std::lock_guard<std::mutex> lock(key_ranges_mu_);
  if (key_ranges_.empty() && num_servers() > 0) {
    Key width = kMaxKey / static_cast<Key>(num_servers());
    for (int i = 0; i < num_servers(); ++i) {
      Key end = i + 1 == num_servers() ? kMaxKey : width * (i + 1);
      key_ranges_.emplace_back(width * i, end);
    }
  }
  return key_ranges_;
}

std::vector<int> Postoffice::GetDeadNodes(int /*t*/) {
  std::vector<int> dead;
  for (const Node& n : membership_.Get()->nodes) {
    if (n.state == Node::kDead) dead.push_back(n.id);
  }
  return dead;
}

bool Postoffice::is_recovery() const { return join_->replaces_dead_node(); }

void Postoffice::SendJoins() {
  std::vector<Node> nodes = {my_node_};
  for (const Node& instance : instances_->Nodes()) nodes.push_back(instance);
  for (const Node& node : nodes) {
    Message join;
    join.meta.control.cmd = Control::kAddNode;
    join.meta.control.nodes.push_back(node);
    join.meta.control.token = config_.job_token;
    join.meta.request = true;
    join.meta.recipient = kScheduler;
    join.meta.sender = kEmpty;
    join.meta.sender_incarnation = process_incarnation_;
    van_->Send(join, SendMode::kNonBlocking, Channel::kControl);
  }
}

bool Postoffice::AddInstance(int customer_id) {
  if (!is_worker() || instances_->Knows(customer_id)) return false;
  if (config_.resend) {
    throw Error("Start(" + std::to_string(customer_id) +
                "): several workers in one process do not work with PS_RESEND yet");
  }
  if (!instances_->Add(customer_id, my_node_)) return false;
  LOG(INFO) << "customer " << customer_id << " joins as one more worker of this process";
  loop_->Post([this] {
    if (!join_->joined()) SendJoins();
  });
  return true;
}

int Postoffice::InstanceIdOf(int customer_id) { return instances_->IdOf(customer_id, my_node_.id); }

bool Postoffice::IsMyInstanceId(int id) { return instances_->Has(id); }

}  // namespace ps
