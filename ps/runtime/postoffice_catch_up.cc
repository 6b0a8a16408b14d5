// Postoffice: membership listeners, and a new server's catch-up in a replicated job
// (docs/fault-tolerance.md). The scheduler admits a new server in a dead one's place as
// joining; the apps that keep replicas there (OptimizerServer) take what the live
// servers send them and say when they hold it all; the node then tells the scheduler,
// which makes it live, and its keys come back to it.
#include <glog/logging.h>

#include <functional>
#include <mutex>
#include <utility>

#include "ps/internal/event_loop.h"
#include "ps/internal/postoffice.h"

namespace ps {

int Postoffice::AddMembershipListener(MembershipListener listener) {
  std::lock_guard<std::mutex> lock(listeners_mu_);
  const int id = next_listener_++;
  membership_listeners_.emplace(id, std::move(listener));
  return id;
}

void Postoffice::RemoveMembershipListener(int id) {
  // InstallMembership calls the listeners under the same lock: once this returns, the
  // listener is not running and never runs again.
  std::lock_guard<std::mutex> lock(listeners_mu_);
  membership_listeners_.erase(id);
}

bool Postoffice::catching_up() const {
  if (!is_recovery()) return false;
  const Node* me = membership_.Get()->Find(my_node_.id);
  // With one copy of each key a server in a dead one's place has nobody to catch up
  // from (it resumes from its checkpoint); an added server gets its keys from their
  // owners whatever PS_REPLICATION is.
  return me && ((me->state == Node::kJoining && replication_ >= 2) ||
                me->state == Node::kEntering);
}

int Postoffice::AddCatchUp(uint64_t leave_version) {
  std::lock_guard<std::mutex> lock(catch_up_mu_);
  const int ticket = next_catch_up_++;
  catch_up_leave_ = leave_version;
  catch_up_pending_.insert(ticket);
  caught_up_ = false;
  return ticket;
}

void Postoffice::CatchUpDone(int ticket) {
  {
    std::lock_guard<std::mutex> lock(catch_up_mu_);
    if (!catch_up_pending_.erase(ticket) || !catch_up_pending_.empty()) return;
    caught_up_ = true;
  }
  LOG(INFO) << "server " << my_node_.rank << " holds every key the other servers sent it: "
            << "it tells the scheduler it caught up";
  loop_->Post([this] { SendCaughtUp(); });  // control messages leave the control loop
}

void Postoffice::CancelCatchUp(int ticket) {
  std::lock_guard<std::mutex> lock(catch_up_mu_);
  catch_up_pending_.erase(ticket);
}

bool Postoffice::ReceivesMovedKeys() const {
  const MembershipView* view = membership_.Get();
  const Node* me = view->Find(my_node_.id);
  return me && me->state == Node::kLive && view->LeavingServer();
}

void Postoffice::SendCaughtUp() {
  uint64_t leave = 0;
  {
    std::lock_guard<std::mutex> lock(catch_up_mu_);
    if (!caught_up_) return;
    leave = catch_up_leave_;
  }
  // The scheduler has made it live, or the leave it took keys for is over.
  if (!catching_up() &&
      (!ReceivesMovedKeys() || membership_.Get()->leave_version != leave)) {
    return;
  }
  Message word;
  word.meta.control.cmd = Control::kCaughtUp;
  word.meta.control.leave_version = leave;
  word.meta.recipient = kScheduler;
  // Without PS_RESEND a lost word is said again with the next heartbeat (SendHeartbeat).
  Status sent = SendControl(word);
  LOG_IF(WARNING, !sent.ok()) << "cannot tell the scheduler this server caught up: " << sent
                              << " (it tries again with the next heartbeat)";
}

}  // namespace ps
