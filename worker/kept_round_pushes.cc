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
    s.kept.clear();
    s.process = process;
    s.copied_below = -1;
  }
  if (copied_below <= s.copied_below) return;
  s.copied_below = copied_below;
  auto copied = [copied_below](const Kept& k) { return k.clock < copied_below; };
  s.kept.erase(std::remove_if(s.kept.begin(), s.kept.end(), copied), s.kept.end());
}

bool KeptRoundPushes::Keep(int rank, const std::string& process, int64_t clock,
                           const Message& sent) {
  Message owned = OwnedMessage(sent);  // outside the lock: a pass over the values
  std::lock_guard<std::mutex> lock(mu_);
  Server& s = servers_[rank];
  if (s.process.empty()) s.process = process;  // taken out meanwhile (TakeGone)
  if (s.process != process || clock < s.copied_below) return false;
  s.kept.push_back(Kept{rank, process, clock, std::move(owned)});
  return true;
}

}  // namespace ps
