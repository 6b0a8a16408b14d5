#include "kept_round_pushes.h"

#include <algorithm>
#include <utility>

#include "request_parts.h"

namespace ps {
namespace {

// The same message over arrays of its own: the caller may change its arrays once the
// request it sent them in has ended.
Message OwnedMessage(const Message& sent) {
  Message copy = sent;
  for (SArray<char>& frame : copy.data) frame = OwnedCopy(frame);
  return copy;
}

}  // namespace

void KeptRoundPushes::Copied(int rank, const std::string& process, int64_t copied_below) {
  std::lock_guard<std::mutex> lock(mu_);
  Server& s = servers_[rank];
  if (s.process != process) {
    // A new process answers for the rank: what the old one held went again when it
    // died (TakeGone), so nothing kept for it is of use now.
    for (const Kept& k : s.kept) bytes_ -= k.sent.DataBytes();
    s.kept.clear();
    s.process = process;
    s.copied_below = -1;
  }
  if (copied_below <= s.copied_below) return;
  s.copied_below = copied_below;
  auto copied = [copied_below](const Kept& k) { return k.clock < copied_below; };
  for (const Kept& k : s.kept) {
    if (copied(k)) bytes_ -= k.sent.DataBytes();
  }
  s.kept.erase(std::remove_if(s.kept.begin(), s.kept.end(), copied), s.kept.end());
}

bool KeptRoundPushes::Keep(int rank, const std::string& process, int64_t clock,
                           const Message& sent) {
  Message owned = OwnedMessage(sent);  // outside the lock: a pass over the values
  std::lock_guard<std::mutex> lock(mu_);
  Server& s = servers_[rank];
  if (s.process.empty()) s.process = process;  // taken out meanwhile (TakeGone)
  if (s.process != process || clock < s.copied_below) return false;
  bytes_ += owned.DataBytes();
  s.kept.push_back(Kept{rank, process, clock, std::move(owned)});
  return true;
}

size_t KeptRoundPushes::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& kv : servers_) n += kv.second.kept.size();
  return n;
}

size_t KeptRoundPushes::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace ps
