#include "worker_instances.h"

#include <string>

#include "ps/status.h"

namespace ps {

void WorkerInstances::Reset(int first_customer) {
  std::lock_guard<std::mutex> lock(mu_);
  instances_.clear();
  any_ = false;
  first_customer_ = first_customer;
}

bool WorkerInstances::Knows(int customer_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (customer_id == first_customer_) return true;
  for (const auto& instance : instances_) {
    if (instance.first == customer_id) return true;
  }
  return false;
}

bool WorkerInstances::Add(int customer_id, const Node& first) {
  std::lock_guard<std::mutex> lock(mu_);
  if (customer_id == first_customer_) return false;
  for (const auto& instance : instances_) {
    if (instance.first == customer_id) return false;
  }
  if (instances_.size() + 1 >= static_cast<size_t>(Node::kMaxInstances)) {
    throw Error("Start(" + std::to_string(customer_id) + "): too many workers in one process");
  }
  Node node = first;
  node.instance = static_cast<int>(instances_.size()) + 1;
  instances_.emplace_back(customer_id, node);
  any_ = true;
  return true;
}

std::vector<Node> WorkerInstances::Nodes() const {
  std::vector<Node> nodes;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& instance : instances_) nodes.push_back(instance.second);
  return nodes;
}

void WorkerInstances::Name(const std::vector<Node>& table, const std::string& identity) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& instance : instances_) {
    for (const Node& n : table) {
      if (n.identity == identity && n.instance == instance.second.instance) {
        instance.second.id = n.id;
        instance.second.rank = n.rank;
      }
    }
  }
}

int WorkerInstances::IdOf(int customer_id, int otherwise) const {
  if (!any()) return otherwise;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& instance : instances_) {
    if (instance.first == customer_id) return instance.second.id;
  }
  return otherwise;
}

bool WorkerInstances::Has(int id) const {
  // kEmpty is also the id of an instance the table has not named (yet).
  if (id == kEmpty || !any()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& instance : instances_) {
    if (instance.second.id == id) return true;
  }
  return false;
}

}  // namespace ps
