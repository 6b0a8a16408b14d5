#include "imported_copies.h"

namespace ps {

void ImportedCopies::Add(int sender, const std::string& identity,
                         const std::vector<AppliedCopies::Id>& ids) {
  std::lock_guard<std::mutex> lock(mu_);
  Sender& s = senders_[sender];
  if (!s.ids || s.identity != identity) {
    s.identity = identity;
    s.ids = std::make_unique<AppliedCopies>();
  }
  for (const AppliedCopies::Id& id : ids) s.ids->Insert(id);
}

bool ImportedCopies::Holds(int sender, const AppliedCopies::Id& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = senders_.find(sender);
  return it != senders_.end() && it->second.ids->Contains(id);
}

std::vector<AppliedCopies::Id> ImportedCopies::Ids() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<AppliedCopies::Id> all;
  for (const auto& [node, sender] : senders_) {
    std::vector<AppliedCopies::Id> ids = sender.ids->Ids();
    all.insert(all.end(), ids.begin(), ids.end());
  }
  return all;
}

void ImportedCopies::KeepOnly(int node, const std::string& identity) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = senders_.find(node);
  if (it != senders_.end() && it->second.identity != identity) senders_.erase(it);
}

}  // namespace ps
