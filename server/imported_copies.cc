#include "imported_copies.h"

#include <iterator>

namespace ps {

void ImportedCopies::Add(int sender, const std::string& identity,
                         const std::vector<AppliedCopies::Record>& records) {
  std::lock_guard<std::mutex> lock(mu_);
  Sender& s = senders_[sender];
  if (!s.ids || s.identity != identity) {
    s.identity = identity;
    s.ids = std::make_unique<AppliedCopies>();
  }
  for (const AppliedCopies::Record& record : records) s.ids->Add(record);
}

size_t ImportedCopies::Covered(int sender, const AppliedCopies::Id& id, const uint64_t* keys,
                               size_t n, std::vector<uint8_t>* before) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = senders_.find(sender);
  if (it == senders_.end()) {
    before->clear();
    return 0;
  }
  return it->second.ids->Covered(id, keys, n, before);
}

bool ImportedCopies::Knows(const AppliedCopies::Id& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [node, sender] : senders_) {
    if (sender.ids->Knows(id)) return true;
  }
  return false;
}

std::vector<AppliedCopies::Record> ImportedCopies::Records() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<AppliedCopies::Record> all;
  for (const auto& [node, sender] : senders_) {
    std::vector<AppliedCopies::Record> records = sender.ids->Records();
    all.insert(all.end(), std::make_move_iterator(records.begin()),
               std::make_move_iterator(records.end()));
  }
  return all;
}

void ImportedCopies::KeepOnly(int node, const std::string& identity) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = senders_.find(node);
  if (it != senders_.end() && it->second.identity != identity) senders_.erase(it);
}

}  // namespace ps
