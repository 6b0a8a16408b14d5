#include "applied_copies.h"

#include <algorithm>
#include <iterator>

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

size_t AppliedCopies::Count(const std::vector<uint64_t>& listed, const uint64_t* keys, size_t n,
                            std::vector<uint8_t>* before) {
  before->assign(n, 0);
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (listed.empty() || std::binary_search(listed.begin(), listed.end(), keys[i])) {
      (*before)[i] = 1;
      ++count;
    }
  }
  if (count == 0) before->clear();
  return count;
}

size_t AppliedCopies::Merge(std::vector<uint64_t>* listed, const uint64_t* keys, size_t n,
                            bool whole, std::vector<uint8_t>* before) {
  const size_t count = Count(*listed, keys, n, before);
  if (listed->empty()) return count;  // whole already
  if (whole) {
    listed->clear();
    listed->shrink_to_fit();
    return count;
  }
  if (count == n) return count;
  const size_t old = listed->size();
  for (size_t i = 0; i < n; ++i) {
    if (before->empty() || !(*before)[i]) listed->push_back(keys[i]);
  }
  std::inplace_merge(listed->begin(), listed->begin() + static_cast<std::ptrdiff_t>(old),
                     listed->end());
  return count;
}

AppliedCopies::Taken* AppliedCopies::Insert(const Id& id, bool* forgot_young) {
  const auto now = std::chrono::steady_clock::now();
  auto [it, fresh] = ids_.emplace(id, Taken());
  (void)fresh;
  Taken* taken = &it->second;
  order_.push_back(Entry{id, now});
  if (order_.size() > kCapacity) {
    if (now - order_.front().at < kYoung) {
      ++evicted_young_;
      if (forgot_young) *forgot_young = true;
    }
    ids_.erase(order_.front().id);  // never `id`: it is the newest
    order_.pop_front();
  }
  return taken;
}

bool AppliedCopies::Knows(const Id& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ids_.count(id) != 0;
}

namespace {

void NoteTake(EarlierTakes* takes, uint64_t now, int from) {
  takes->last = now;
  if (takes->CameFrom(from)) return;
  if (takes->from[0] < 0) {
    takes->from[0] = from;
  } else if (takes->from[1] < 0) {
    takes->from[1] = from;
  } else {
    takes->from_more = true;
  }
}

}  // namespace

size_t AppliedCopies::Take(const Id& id, const uint64_t* keys, size_t n, bool whole,
                           std::vector<uint8_t>* before, bool* forgot_young, bool* known,
                           int from, EarlierTakes* earlier) {
  if (forgot_young) *forgot_young = false;
  if (earlier) *earlier = EarlierTakes();
  before->clear();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_.find(id);
  if (known) *known = it != ids_.end();
  if (n == 0) return 0;  // nothing to record (and an empty list stands for whole)
  const uint64_t now = ++takes_;
  if (it != ids_.end()) {
    if (earlier) *earlier = it->second.takes;
    NoteTake(&it->second.takes, now, from);
    return Merge(&it->second.keys, keys, n, whole, before);
  }
  Taken* taken = Insert(id, forgot_young);
  NoteTake(&taken->takes, now, from);
  if (!whole) taken->keys.assign(keys, keys + n);
  return 0;
}

uint64_t AppliedCopies::Sequence() const {
  std::lock_guard<std::mutex> lock(mu_);
  return takes_;
}

size_t AppliedCopies::Covered(const Id& id, const uint64_t* keys, size_t n,
                              std::vector<uint8_t>* before) const {
  before->clear();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_.find(id);
  if (it == ids_.end()) return 0;
  return Count(it->second.keys, keys, n, before);
}

void AppliedCopies::Add(const Record& record) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint8_t> before;
  auto it = ids_.find(record.id);
  if (it != ids_.end()) {
    Merge(&it->second.keys, record.keys.data(), record.keys.size(), record.keys.empty(),
          &before);
    return;
  }
  Insert(record.id, nullptr)->keys = record.keys;
}

std::vector<AppliedCopies::Record> AppliedCopies::Records() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Record> records;
  records.reserve(order_.size());
  for (const Entry& e : order_) records.push_back(Record{e.id, ids_.at(e.id).keys});
  return records;
}

uint64_t AppliedCopies::evicted_young() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evicted_young_;
}

}  // namespace ps
