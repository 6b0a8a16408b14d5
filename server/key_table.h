// KeyTable: an open-addressing hash table from Key to Slot, the index of a shard.
//
// A node-based map costs about three cache misses and 60+ bytes per key; this one
// keeps key and slot in one 32-byte entry (one miss, ~45 bytes per key at the
// maximum load of 0.7). Keys are never removed.
//
// Pointers returned by Find/Insert stay valid until the next Insert.
// Thread safety: none (owned by one shard thread).
#ifndef HERDPS_SERVER_KEY_TABLE_H_
#define HERDPS_SERVER_KEY_TABLE_H_

#include <cstdint>
#include <vector>

#include "ps/base.h"
#include "ps/internal/hash.h"

namespace ps {

// A key's values and optimizer state: `len` values followed by StateWidth() * len
// floats of state, in one arena allocation.
struct Slot {
  float* values = nullptr;
  int64_t steps = 0;  // optimizer steps applied to this key
  uint32_t len = 0;   // 0 marks an empty table entry; a stored key has len >= 1
  float* state() const { return values + len; }
};

class KeyTable {
 public:
  KeyTable() { Rehash(16); }

  Slot* Find(Key key) {
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      Entry& e = entries_[i];
      if (e.slot.len == 0) return nullptr;
      if (e.key == key) return &e.slot;
    }
  }

  // Inserts an absent key (slot.len >= 1).
  Slot* Insert(Key key, const Slot& slot) {
    if ((size_ + 1) * 10 > entries_.size() * 7) Rehash(entries_.size() * 2);
    ++size_;
    return Place(key, slot);
  }

  size_t size() const { return size_; }

  template <typename F>
  void ForEach(F f) const {
    for (const Entry& e : entries_) {
      if (e.slot.len) f(e.key, e.slot);
    }
  }

 private:
  struct Entry {
    Key key = 0;
    Slot slot;
  };

  size_t Home(Key key) const { return Mix64(key ^ 0x3c6ef372fe94f82bULL) & mask_; }

  Slot* Place(Key key, const Slot& slot) {
    size_t i = Home(key);
    while (entries_[i].slot.len) i = (i + 1) & mask_;
    entries_[i].key = key;
    entries_[i].slot = slot;
    return &entries_[i].slot;
  }

  void Rehash(size_t capacity) {
    std::vector<Entry> old;
    old.swap(entries_);
    entries_.assign(capacity, Entry());
    mask_ = capacity - 1;
    for (const Entry& e : old) {
      if (e.slot.len) Place(e.key, e.slot);
    }
  }

  std::vector<Entry> entries_;  // size is a power of two
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace ps

#endif  // HERDPS_SERVER_KEY_TABLE_H_
