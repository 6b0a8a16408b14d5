#include "ps/internal/membership.h"

#include <algorithm>

#include "ps/base.h"

namespace ps {

const Node* MembershipView::Find(int id) const {
  // Sorted by id (the holder sorts what it publishes): on the path of every message.
  auto it = std::lower_bound(nodes.begin(), nodes.end(), id,
                             [](const Node& n, int v) { return n.id < v; });
  return it != nodes.end() && it->id == id ? &*it : nullptr;
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

const Node* MembershipView::LeavingServer() const {
  for (const Node& n : nodes) {
    if (n.role != Node::kServerRole) continue;
    if (n.state == Node::kLeaving || (retiring != 0 && n.id == retiring)) return &n;
  }
  return nullptr;
}

void MembershipView::PlaceKeys(ConsistentHashRing::Placement placement, int virtual_nodes) {
  std::vector<int> placed;
  std::vector<int> next;
  for (const Node& n : nodes) {
    if (n.role != Node::kServerRole) continue;
    if (n.state != Node::kLeaving && n.id != retiring) next.push_back(n.rank);
    if (n.state != Node::kEntering) placed.push_back(n.rank);
  }
  ring = ConsistentHashRing::Make(placement, placed, virtual_nodes);
  next_ring = next == placed ? ConsistentHashRing()
                             : ConsistentHashRing::Make(placement, next, virtual_nodes);
}

MembershipHolder::MembershipHolder(size_t keep_newest, std::chrono::steady_clock::duration grace)
    : keep_newest_(keep_newest), grace_(grace) {
  history_.push_back({std::make_unique<MembershipView>(), {}});
  current_.store(history_.back().view.get(), std::memory_order_release);
}

const MembershipView* MembershipHolder::Publish(MembershipView view) {
  std::sort(view.nodes.begin(), view.nodes.end(),
            [](const Node& a, const Node& b) { return a.id < b.id; });
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  history_.back().replaced = now;
  history_.push_back({std::make_unique<MembershipView>(std::move(view)), {}});
  const MembershipView* published = history_.back().view.get();
  current_.store(published, std::memory_order_release);
  // Oldest first: each was replaced no later than the one after it.
  while (history_.size() > keep_newest_ + 1 && now - history_.front().replaced >= grace_) {
    history_.pop_front();
  }
  return published;
}

size_t MembershipHolder::kept() const {
  std::lock_guard<std::mutex> lock(mu_);
  return history_.size();
}

void MembershipHolder::Reset() { Publish(MembershipView()); }

}  // namespace ps
