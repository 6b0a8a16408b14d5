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

void KeyListStore::Put(const ListId& id, const SArray<Key>& keys) {
  const size_t bytes = keys.size() * sizeof(Key);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id);
  if (it != by_id_.end()) EraseLocked(it->second);
  if (bytes > max_bytes_) return;
  while (bytes_ + bytes > max_bytes_ && !lru_.empty()) EraseLocked(std::prev(lru_.end()));
  lru_.push_front(Entry{id, keys});
  by_id_[id] = lru_.begin();
  bytes_ += bytes;
}

void KeyListStore::EraseLocked(std::list<Entry>::iterator it) {
  bytes_ -= it->keys.size() * sizeof(Key);
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
