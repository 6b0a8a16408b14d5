#include "record_senders.h"

#include <algorithm>
#include <utility>

namespace ps {

void RecordSenders::Message(int sender) {
  Round& round = rounds_[sender];
  if (round.open) return;
  if (!round.sorted) std::stable_sort(round.keys.begin(), round.keys.end());
  round.previous = std::move(round.keys);
  round.previous_order = round.order;
  round.open = true;
  round.order = ++next_order_;
  round.keys.clear();
  round.sorted = true;
}

void RecordSenders::Sent(int sender, uint64_t key, int32_t chunk, uint64_t taken_at) {
  Message(sender);
  Round& round = rounds_[sender];
  const Key entry{key, chunk, taken_at};
  // Keys come ascending within a round; a chunked key's chunks each in a message.
  if (!round.keys.empty() && entry < round.keys.back()) round.sorted = false;
  round.keys.push_back(entry);
}

void RecordSenders::End(int sender) {
  Message(sender);  // a round of no message but its end replaces the one before too
  Round& round = rounds_[sender];
  round.open = false;
  round.previous.clear();
  round.previous.shrink_to_fit();
  round.previous_order = 0;
}

const RecordSenders::Key* RecordSenders::Find(const std::vector<Key>& keys, const Key& entry) {
  // The last among equals: the latest record of the key.
  auto it = std::upper_bound(keys.begin(), keys.end(), entry);
  if (it == keys.begin() || *(it - 1) < entry) return nullptr;
  return &*(it - 1);
}

int RecordSenders::SenderOf(uint64_t key, int32_t chunk, uint64_t* taken_at) const {
  const Key entry{key, chunk, 0};
  int sender = -1;
  uint64_t latest = 0;
  for (const auto& [id, round] : rounds_) {
    if (round.order <= latest) continue;
    if (!round.sorted) {
      // A chunked key's chunks may come out of order; a key sent twice in a round (a
      // catch-up topped up) keeps its later record last among equals.
      std::stable_sort(round.keys.begin(), round.keys.end());
      round.sorted = true;
    }
    const Key* found = Find(round.keys, entry);
    if (found) {
      sender = id;
      latest = round.order;
      if (taken_at) *taken_at = found->taken_at;
      continue;
    }
    if (round.previous_order > latest && (found = Find(round.previous, entry))) {
      sender = id;
      latest = round.previous_order;
      if (taken_at) *taken_at = found->taken_at;
    }
  }
  return sender;
}

void RecordSenders::Clear() {
  rounds_.clear();
}

}  // namespace ps
