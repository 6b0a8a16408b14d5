#include "applied_copies.h"

#include "ps/internal/hash.h"

namespace ps {

size_t AppliedCopies::Hash::operator()(const Id& id) const {
  uint64_t h = Mix64(id.request);
  h = Mix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(id.worker)) << 32 |
                 static_cast<uint32_t>(id.customer)));
  h = Mix64(h ^ static_cast<uint32_t>(id.chunk));
  h = Mix64(h ^ static_cast<uint32_t>(id.first_server));
  return static_cast<size_t>(Mix64(h ^ static_cast<uint64_t>(id.first_part)));
}

bool AppliedCopies::Insert(const Id& id, bool* forgot_young) {
  const auto now = std::chrono::steady_clock::now();
  if (forgot_young) *forgot_young = false;
  std::lock_guard<std::mutex> lock(mu_);
  if (!ids_.insert(id).second) return false;
  order_.push_back(Entry{id, now});
  if (order_.size() > kCapacity) {
    if (now - order_.front().at < kYoung) {
      ++evicted_young_;
      if (forgot_young) *forgot_young = true;
    }
    ids_.erase(order_.front().id);
    order_.pop_front();
  }
  return true;
}

bool AppliedCopies::Contains(const Id& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ids_.count(id) > 0;
}

std::vector<AppliedCopies::Id> AppliedCopies::Ids() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Id> ids;
  ids.reserve(order_.size());
  for (const Entry& e : order_) ids.push_back(e.id);
  return ids;
}

uint64_t AppliedCopies::evicted_young() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evicted_young_;
}

}  // namespace ps
