#include "shm_receiver.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <vector>

namespace ps {
namespace {

// A descriptor that becomes readable when process `pid` ends (pidfd_open, Linux 5.3),
// or -1 where the system has none: such rings stay mapped until the van stops.
int OpenPidFd(int pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

}  // namespace

ShmReceiver::~ShmReceiver() { Clear(); }

void ShmReceiver::Drop(Ring* ring) {
  if (ring->pidfd >= 0) close(ring->pidfd);
  ring->pidfd = -1;
  ring->mapping.reset();
}

ShmAnswerFields ShmReceiver::HandleOffer(const std::string& identity, const ShmOfferFields& offer) {
  ShmAnswerFields answer;
  answer.ring = offer.ring;
  answer.token = offer.token;
  auto& rings = by_identity_[identity];
  for (const Ring& r : rings) {
    if (r.mapping->ring() == offer.ring) {
      answer.accepted = true;  // a repeated offer (the message was resent)
      return answer;
    }
  }
  if (count_ >= kMaxRings) {
    if (rings.empty()) by_identity_.erase(identity);
    answer.reason = "this node maps " + std::to_string(count_) + " rings already";
    return answer;
  }
  Ring ring;
  // The process first, then its descriptor: if the pid was recycled in between, the
  // token check below fails instead of watching the wrong process.
  ring.pidfd = OpenPidFd(offer.pid);
  Status s = ShmMapping::Open(offer, &ring.mapping);
  if (!s.ok()) {
    if (ring.pidfd >= 0) close(ring.pidfd);
    if (rings.empty()) by_identity_.erase(identity);
    answer.reason = s.message();
    return answer;
  }
  if (rings.size() >= kMaxRingsPerPeer) {
    Drop(&rings.front());
    rings.pop_front();
    --count_;
  }
  rings.push_back(std::move(ring));
  ++count_;
  answer.accepted = true;
  return answer;
}

std::shared_ptr<ShmMapping> ShmReceiver::Find(const std::string& identity, uint64_t ring) const {
  auto it = by_identity_.find(identity);
  if (it == by_identity_.end()) return nullptr;
  for (const Ring& r : it->second) {
    if (r.mapping->ring() == ring) return r.mapping;
  }
  return nullptr;
}

void ShmReceiver::Sweep() {
  const auto now = std::chrono::steady_clock::now();
  if (count_ == 0 || now - last_sweep_ < std::chrono::seconds(1)) return;
  last_sweep_ = now;
  for (auto it = by_identity_.begin(); it != by_identity_.end();) {
    auto& rings = it->second;
    for (auto r = rings.begin(); r != rings.end();) {
      if (r->pidfd >= 0 && r->ended == std::chrono::steady_clock::time_point{}) {
        pollfd p{r->pidfd, POLLIN, 0};
        if (poll(&p, 1, 0) > 0) r->ended = now;
      }
      // The grace lets messages the sender queued before it ended still be read.
      if (r->ended != std::chrono::steady_clock::time_point{} &&
          now - r->ended >= kDeadSenderGrace) {
        Drop(&*r);
        r = rings.erase(r);
        --count_;
      } else {
        ++r;
      }
    }
    it = rings.empty() ? by_identity_.erase(it) : std::next(it);
  }
}

void ShmReceiver::Clear() {
  for (auto& kv : by_identity_) {
    for (Ring& r : kv.second) Drop(&r);
  }
  by_identity_.clear();
  count_ = 0;
}

}  // namespace ps
