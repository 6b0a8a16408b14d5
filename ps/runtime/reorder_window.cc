#include "ps/internal/reorder_window.h"

#include <algorithm>
#include <utility>

namespace ps {

InboundSequencer::InboundSequencer(size_t window) : window_(std::max<size_t>(window, 1)) {}

InboundSequencer::Verdict InboundSequencer::Accept(int sender, uint64_t incarnation, uint64_t seq,
                                                   Message&& msg, std::vector<Message>* ready) {
  // Sequences start at 1; a 0 is a sender that does not number its messages. Refusing
  // (rather than calling it a duplicate) keeps it from being ACKed as if it were known.
  if (seq == 0) return Verdict::kRefused;

  auto retired = retired_.find(sender);
  if (retired != retired_.end() && std::find(retired->second.begin(), retired->second.end(),
                                             incarnation) != retired->second.end()) {
    return Verdict::kRefused;  // a straggler from a process that has since restarted
  }

  auto [it, fresh] = senders_.try_emplace(sender);
  SenderState& state = it->second;
  if (fresh) {
    state.incarnation = incarnation;
  } else if (incarnation != state.incarnation) {
    Retire(sender, state.incarnation);
    held_ -= state.held.size();
    state = SenderState();
    state.incarnation = incarnation;
  }

  if (seq < state.next_expected) return Verdict::kDuplicate;
  // Written as a difference so that a huge seq cannot overflow next_expected + window.
  if (seq - state.next_expected >= window_) return Verdict::kRefused;
  if (seq != state.next_expected) {
    if (!state.held.try_emplace(seq, std::move(msg)).second) return Verdict::kDuplicate;
    ++held_;
    return Verdict::kAccepted;
  }

  ready->push_back(std::move(msg));
  ++state.next_expected;
  // Held keys are all > next_expected, so the successors that became deliverable are a
  // contiguous run at the front of the map.
  auto h = state.held.begin();
  while (h != state.held.end() && h->first == state.next_expected) {
    ready->push_back(std::move(h->second));
    h = state.held.erase(h);
    --held_;
    ++state.next_expected;
  }
  return Verdict::kAccepted;
}

void InboundSequencer::Forget(int sender) {
  auto it = senders_.find(sender);
  if (it == senders_.end()) return;
  held_ -= it->second.held.size();
  Retire(sender, it->second.incarnation);
  senders_.erase(it);
}

void InboundSequencer::Retire(int sender, uint64_t incarnation) {
  std::vector<uint64_t>& retired = retired_[sender];
  if (retired.size() == kRetiredPerSender) retired.erase(retired.begin());
  retired.push_back(incarnation);
}

}  // namespace ps
