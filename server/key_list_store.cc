#include "ps/internal/key_list_store.h"

namespace ps {

size_t KeyListStore::IdHash::operator()(const ListId& id) const {
  uint64_t h = id.id * 0x9E3779B97F4A7C15ULL;
  h ^= (id.incarnation + static_cast<uint64_t>(id.sender) * 0xC2B2AE3D27D4EB4FULL +
        static_cast<uint64_t>(id.customer)) * 0x165667B19E3779F9ULL;
  return static_cast<size_t>(h ^ (h >> 29));
}

bool KeyListStore::Find(const ListId& id, SArray<Key>* keys) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  lru_.splice(lru_.begin(), lru_, it->second);
  *keys = it->second->keys;
  return true;
}

size_t KeyListStore::Cost(const SArray<Key>& keys) {
  return keys.size() * sizeof(Key) + kEntryBytes;
}

void KeyListStore::Put(const ListId& id, const SArray<Key>& keys) {
  const size_t bytes = Cost(keys);
  if (keys.size() < kMinKeys || bytes > max_bytes_) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_id_.find(id);
    if (it != by_id_.end()) EraseLocked(it->second);
    return;
  }
  SArray<Key> kept = keys;
  if (keys.size() * sizeof(Key) < kCopyBelowBytes) {
    kept = SArray<Key>();
    kept.CopyFrom(keys.data(), keys.size());
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id);
  if (it != by_id_.end()) EraseLocked(it->second);
  while (bytes_ + bytes > max_bytes_ && !lru_.empty()) EraseLocked(std::prev(lru_.end()));
  lru_.push_front(Entry{id, kept});
  by_id_[id] = lru_.begin();
  bytes_ += bytes;
}

void KeyListStore::EraseLocked(std::list<Entry>::iterator it) {
  bytes_ -= Cost(it->keys);
  by_id_.erase(it->id);
  lru_.erase(it);
}

size_t KeyListStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t KeyListStore::lists() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace ps
