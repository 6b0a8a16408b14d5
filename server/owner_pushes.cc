#include "owner_pushes.h"

#include <utility>

namespace ps {

void OwnerPushes::Add(const AppliedCopies::Id& id) {
  if (ring_.size() < kCapacity) {
    ring_.push_back(id);
    return;
  }
  ring_[next_] = id;
  next_ = (next_ + 1) % kCapacity;
}

std::vector<AppliedCopies::Record> OwnerPushes::Records() const {
  std::vector<AppliedCopies::Record> out;
  out.reserve(ring_.size());
  for (size_t i = 0; i < ring_.size(); ++i) {
    AppliedCopies::Record record;
    record.id = ring_[(next_ + i) % ring_.size()];  // keys empty: the whole part
    out.push_back(std::move(record));
  }
  return out;
}

}  // namespace ps
