// Postoffice: a server leaving the running job gracefully (docs/fault-tolerance.md,
// "Removing a server"). Withdraw asks the scheduler, again with each heartbeat until the
// table says this server is leaving. While it leaves, the servers send the keys a ring
// without it gives to servers that do not hold them yet (OptimizerServer); once every
// live server says it holds them, the scheduler takes this server out of the table and
// answers the request: from then on this node waits for nobody (its barriers end, its
// Finalize leaves at once) and exits 0. The workers send what they had in flight to it
// again to the servers that hold its keys now, as after a death.
#include <glog/logging.h>

#include <csignal>
#include <string>

#include "barrier_releases.h"
#include "join_state.h"
#include "ps/internal/event_loop.h"
#include "ps/internal/postoffice.h"

namespace ps {
namespace {

volatile std::sig_atomic_t g_sigterm_seen = 0;

void LeaveOnSigterm(int) {
  if (g_sigterm_seen) {
    // The second one: the operator wants it gone now.
    std::signal(SIGTERM, SIG_DFL);
    std::raise(SIGTERM);
    return;
  }
  g_sigterm_seen = 1;
}

}  // namespace

void Postoffice::ListenForSigtermLeave() {
  if (!config_.leave_on_sigterm || !is_server()) return;
  g_sigterm_seen = 0;
  std::signal(SIGTERM, LeaveOnSigterm);
  loop_->RunEvery(std::chrono::milliseconds(100), [this] { CheckSigtermLeave(); });
}

void Postoffice::CheckSigtermLeave() {
  if (!g_sigterm_seen || withdraw_asked_.load()) return;
  Status asked = Withdraw();
  if (asked.ok()) return;
  LOG(ERROR) << "SIGTERM: server " << my_node_.rank << " cannot leave the job gracefully ("
             << asked.message() << "): it ends now";
  std::signal(SIGTERM, SIG_DFL);
  std::raise(SIGTERM);
}

Status Postoffice::Withdraw() {
  const std::string cannot = "this server cannot leave the running job: ";
  if (!is_server()) return Status::InvalidArgument(cannot + "only a server leaves this way");
  if (!join_->joined()) return Status::InvalidArgument(cannot + "it has not joined yet");
  if (key_placement_ != ConsistentHashRing::kRing) {
    return Status::InvalidArgument(
        cannot + "with PS_KEY_PLACEMENT=range every rank owns a fixed range of keys");
  }
  if (!PartsMayGoAgain()) {
    return Status::InvalidArgument(cannot + kLeaveNeedsKeptParts);
  }
  if (replicate_rounds_) {
    return Status::InvalidArgument(
        cannot + "with PS_REPLICATE_ROUNDS=1 no server takes keys from the others");
  }
  const MembershipView* view = membership_.Get();
  if (view->ring.servers().size() <= static_cast<size_t>(replication_)) {
    return Status::InvalidArgument(
        cannot + "the ring has " + std::to_string(view->ring.servers().size()) +
        " servers, and without this one fewer than PS_REPLICATION=" +
        std::to_string(replication_) + " would hold each key");
  }
  if (withdraw_asked_.exchange(true)) return Status::OK();
  LOG(WARNING) << "server " << my_node_.rank << " asks to leave the running job: the others "
               << "take its keys over first, while it serves them";
  loop_->Post([this] { SendWithdraw(); });
  return Status::OK();
}

void Postoffice::SendWithdraw() {
  if (!withdraw_asked_.load() || withdrawn_.load()) return;
  const Node* me = membership_.Get()->Find(my_node_.id);
  if (!me || me->state != Node::kLive) return;  // leaving already, or on its way out
  Message ask;
  ask.meta.control.cmd = Control::kWithdraw;
  ask.meta.request = true;
  ask.meta.recipient = kScheduler;
  Status sent = SendControl(ask);
  LOG_IF(WARNING, !sent.ok()) << "cannot ask the scheduler to let this server leave: " << sent
                              << " (it asks again with the next heartbeat)";
}

void Postoffice::HandleWithdrawn(const Message& msg) {
  if (msg.meta.request || msg.meta.sender != kScheduler || !withdraw_asked_.load() ||
      withdrawn_.exchange(true)) {
    return;
  }
  LOG(WARNING) << "server " << my_node_.rank << " has left the job: the other servers hold "
               << "its keys; it waits for nobody from now on (its barriers end, Finalize "
               << "leaves at once)";
  barriers_->ReleaseAll();
}

}  // namespace ps
