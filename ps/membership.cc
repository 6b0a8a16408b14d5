#include "ps/internal/membership.h"

#include "ps/base.h"

namespace ps {

const Node* MembershipView::Find(int id) const {
  for (const Node& n : nodes) {
    if (n.id == id) return &n;
  }
  return nullptr;
}

std::vector<int> MembershipView::Ids(int node_group, bool alive_only) const {
  std::vector<int> ids;
  for (const Node& n : nodes) {
    if (alive_only && !n.alive()) continue;
    bool in;
    if (node_group >= 8) {
      in = n.id == node_group;
    } else {
      in = (n.role == Node::kSchedulerRole && (node_group & kScheduler)) ||
           (n.role == Node::kServerRole && (node_group & kServerGroup)) ||
           (n.role == Node::kWorkerRole && (node_group & kWorkerGroup));
    }
    if (in) ids.push_back(n.id);
  }
  return ids;
}

int MembershipView::CountAlive(Node::Role role) const {
  int count = 0;
  for (const Node& n : nodes) count += n.role == role && n.alive();
  return count;
}

MembershipHolder::MembershipHolder() {
  history_.push_back(std::make_unique<MembershipView>());
  current_.store(history_.back().get(), std::memory_order_release);
}

const MembershipView* MembershipHolder::Publish(MembershipView view) {
  std::lock_guard<std::mutex> lock(mu_);
  history_.push_back(std::make_unique<MembershipView>(std::move(view)));
  const MembershipView* published = history_.back().get();
  current_.store(published, std::memory_order_release);
  return published;
}

void MembershipHolder::Reset() { Publish(MembershipView()); }

}  // namespace ps
