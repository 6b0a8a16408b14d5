#include "ps/internal/resend_outbox.h"

#include <algorithm>

namespace ps {
namespace {

// now + wait, saturating at the clock's end, so that a huge max_backoff means "resend
// (almost) never" instead of wrapping into the past and resending at once.
ResendOutbox::Clock::time_point DueAfter(ResendOutbox::Clock::time_point now,
                                         ResendOutbox::Clock::duration wait) {
  auto end = ResendOutbox::Clock::time_point::max();
  return wait >= end - now ? end : now + wait;
}

}  // namespace

ResendOutbox::ResendOutbox(std::chrono::milliseconds timeout, std::chrono::milliseconds max_backoff)
    : timeout_(std::max(timeout, std::chrono::milliseconds(1))),
      max_backoff_(std::max<Clock::duration>(max_backoff, timeout_)) {}

ResendOutbox::Unsent ResendOutbox::TrackUnsent(Message* msg) {
  std::lock_guard<std::mutex> lock(mu_);
  Unsent unsent;
  unsent.recipient = msg->meta.recipient;
  Link& link = links_[unsent.recipient];
  unsent.seq = ++link.last_seq;
  unsent.order = ++tracked_;
  msg->meta.sequence = unsent.seq;
  DueKey unscheduled(Clock::time_point::max(), unsent.order);
  link.pending.emplace(unsent.seq, Pending{*msg, unscheduled, timeout_, /*scheduled=*/false});
  ++pending_;
  return unsent;
}

void ResendOutbox::ScheduleLocked(int recipient, uint64_t seq, Pending* p,
                                  Clock::time_point now) {
  p->due.first = DueAfter(now, p->wait);
  p->scheduled = true;
  schedule_.emplace(p->due, std::make_pair(recipient, seq));
}

ResendOutbox::Pending* ResendOutbox::FindUnsentLocked(const Unsent& unsent) {
  auto link = links_.find(unsent.recipient);
  if (link == links_.end()) return nullptr;
  auto it = link->second.pending.find(unsent.seq);
  if (it == link->second.pending.end() || it->second.scheduled ||
      it->second.due.second != unsent.order) {
    return nullptr;
  }
  return &it->second;
}

void ResendOutbox::Sent(const Unsent& unsent, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  Pending* p = FindUnsentLocked(unsent);
  if (p) ScheduleLocked(unsent.recipient, unsent.seq, p, now);
}

bool ResendOutbox::Ack(int recipient, uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  auto link = links_.find(recipient);
  if (link == links_.end()) return false;
  auto it = link->second.pending.find(seq);
  if (it == link->second.pending.end()) return false;
  if (it->second.scheduled) schedule_.erase(it->second.due);
  link->second.pending.erase(it);
  --pending_;
  return true;
}

bool ResendOutbox::Skip(const Unsent& unsent, Clock::time_point now, Message* skip) {
  std::lock_guard<std::mutex> lock(mu_);
  Pending* p = FindUnsentLocked(unsent);
  if (!p) return false;
  ScheduleLocked(unsent.recipient, unsent.seq, p, now);
  const Meta& sent = p->msg.meta;
  Message placeholder;
  placeholder.meta.control.cmd = Control::kSkip;
  placeholder.meta.sender = sent.sender;
  placeholder.meta.sender_incarnation = sent.sender_incarnation;
  placeholder.meta.recipient = sent.recipient;
  placeholder.meta.sequence = sent.sequence;
  p->msg = placeholder;
  *skip = std::move(placeholder);
  return true;
}

std::vector<Message> ResendOutbox::DueForResend(Clock::time_point now, size_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<int, uint64_t>> due;
  auto end = schedule_.begin();
  for (; end != schedule_.end() && due.size() < limit && end->first.first <= now; ++end) {
    due.push_back(end->second);
  }
  schedule_.erase(schedule_.begin(), end);

  std::vector<std::pair<uint64_t, Pending*>> by_order;  // (TrackUnsent order, entry)
  by_order.reserve(due.size());
  for (const auto& [recipient, seq] : due) {
    Pending& p = links_.at(recipient).pending.at(seq);
    p.wait = p.wait >= max_backoff_ / 2 ? max_backoff_ : p.wait * 2;
    by_order.emplace_back(p.due.second, &p);
    p.due.first = DueAfter(now, p.wait);
    schedule_.emplace(p.due, std::make_pair(recipient, seq));
  }
  std::sort(by_order.begin(), by_order.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Message> out;
  out.reserve(by_order.size());
  for (const auto& entry : by_order) out.push_back(entry.second->msg);
  return out;
}

size_t ResendOutbox::DropPeer(int recipient) {
  std::lock_guard<std::mutex> lock(mu_);
  auto link = links_.find(recipient);
  if (link == links_.end()) return 0;
  size_t dropped = link->second.pending.size();
  for (const auto& entry : link->second.pending) {
    if (entry.second.scheduled) schedule_.erase(entry.second.due);
  }
  pending_ -= dropped;
  links_.erase(link);
  return dropped;
}

bool ResendOutbox::Tracked(int recipient, uint64_t seq) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto link = links_.find(recipient);
  return link != links_.end() && link->second.pending.count(seq) > 0;
}

size_t ResendOutbox::Size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_;
}

ResendOutbox::Clock::time_point ResendOutbox::NextDue() const {
  std::lock_guard<std::mutex> lock(mu_);
  return schedule_.empty() ? Clock::time_point::max() : schedule_.begin()->first.first;
}

}  // namespace ps
