#include "record_senders.h"

#include <algorithm>
#include <utility>

namespace ps {

void RecordSenders::Message(int sender) {
  Round& round = rounds_[sender];
  if (round.open) return;
  if (!round.sorted) std::sort(round.keys.begin(), round.keys.end());
  round.previous = std::move(round.keys);
  round.previous_order = round.order;
  round.open = true;
  round.order = ++next_order_;
  round.keys.clear();
  round.sorted = true;
}

void RecordSenders::Sent(int sender, uint64_t key, int32_t chunk) {
  Message(sender);
  Round& round = rounds_[sender];
  const std::pair<uint64_t, int32_t> entry(key, chunk);
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

int RecordSenders::SenderOf(uint64_t key, int32_t chunk) const {
  const std::pair<uint64_t, int32_t> entry(key, chunk);
  int sender = -1;
  uint64_t latest = 0;
  for (const auto& [id, round] : rounds_) {
    if (round.order <= latest) continue;
    if (!round.sorted) {
      std::sort(round.keys.begin(), round.keys.end());
      round.sorted = true;
    }
    if (std::binary_search(round.keys.begin(), round.keys.end(), entry)) {
      sender = id;
      latest = round.order;
    } else if (round.previous_order > latest &&
               std::binary_search(round.previous.begin(), round.previous.end(), entry)) {
      sender = id;
      latest = round.previous_order;
    }
  }
  return sender;
}

void RecordSenders::Clear() {
  rounds_.clear();
}

}  // namespace ps
