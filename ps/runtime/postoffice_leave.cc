// Postoffice: Finalize, this node leaving the job: the closing barrier, the apps'
// last handles, the leave (acknowledged), the scheduler waiting for the others, and
// the exit status of a job that lost a node.
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "customer_directory.h"
#include "ps/internal/event_loop.h"
#include "ps/internal/postoffice.h"
#include "ps/internal/resend_outbox.h"
#include "scheduler_role.h"
#include "worker_instances.h"

namespace ps {
namespace {

// How long Finalize waits for the leave to be acknowledged (PS_RESEND), and the
// scheduler for every node to leave.
constexpr std::chrono::seconds kFinalizeWait(5);
// The longest the scheduler's Finalize waits for live nodes to leave.
constexpr std::chrono::seconds kLeaveWait(60);
// How often a leaving node sends its leave again until it is acknowledged (PS_RESEND).
constexpr std::chrono::milliseconds kLeaveRepeat(250);

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

void ExitWithStatusOne() {
  google::FlushLogFiles(google::GLOG_INFO);
  std::fflush(nullptr);
  _exit(1);
}

}  // namespace

void Postoffice::Finalize(int customer_id, bool do_barrier) {
  if (!started()) return;
  if (NodeServices* services = services_.load()) services->OnLeaving(this);
  if (do_barrier) Barrier(customer_id, kScheduler + kServerGroup + kWorkerGroup);
  std::lock_guard<std::mutex> lock(start_mu_);
  if (start_count_ == 0 || --start_count_ > 0) return;
  DrainCustomers();
  if (exit_callback_) exit_callback_();
  finalizing_ = true;
  if (is_scheduler()) {
    WaitForNodesToLeave();
  } else if (withdrawn_.load()) {
    // Out of the table already (Withdraw): the scheduler knows it left.
  } else {
    // Leave explicitly, so that the scheduler does not wait for this node in
    // barriers nor later declare it dead: this process's other workers first.
    for (const Node& instance : instances_->Nodes()) {
      Message instance_leave;
      instance_leave.meta.control.cmd = Control::kLeave;
      instance_leave.meta.request = true;
      instance_leave.meta.recipient = kScheduler;
      instance_leave.meta.sender = instance.id;
      SendControl(instance_leave);
    }
    Message leave;
    leave.meta.control.cmd = Control::kLeave;
    leave.meta.body = ActivityReport();  // the final counters (metrics endpoint)
    leave.meta.request = true;
    leave.meta.recipient = kScheduler;
    SendControl(leave);
    // With resend on, wait for the ACK, asking again every kLeaveRepeat rather than by
    // the resend backoff: a node that exits before its leave arrived would be declared
    // dead, and the job would count as having lost it. Heartbeats go on meanwhile.
    using Clock = std::chrono::steady_clock;
    const Clock::time_point deadline =
        Clock::now() + (config_.heartbeat_interval_s > 0
                            ? std::max<Clock::duration>(Millis(config_.heartbeat_timeout_s),
                                                        kFinalizeWait)
                            : Clock::duration(kFinalizeWait));
    Clock::time_point repeat = Clock::now() + kLeaveRepeat;
    ResendOutbox* outbox = outbox_[static_cast<int>(Channel::kControl)].get();
    while (outbox && outbox->Tracked(kScheduler, leave.meta.sequence) &&
           Clock::now() < deadline) {
      if (Clock::now() >= repeat) {
        van_->Send(leave, SendMode::kNonBlocking, Channel::kControl);  // same sequence
        repeat = Clock::now() + kLeaveRepeat;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  if (NodeServices* services = services_.load()) services->OnStopping();
  StopRuntime();
  if (size_t dropped = directory_->DropHeld()) {
    LOG(WARNING) << dropped << " messages for apps that never started on this node were dropped";
  }
  scheduler_.reset();
  ExitNonZeroIfNodesWereLost();
}

void Postoffice::WaitForNodesToLeave() {
  // Stay until every node has left (or died): their last messages need a live
  // scheduler (the closing barrier's release, resent while it is lost; the ACK of their
  // leave). Liveness bounds the wait, since a node that vanished is declared dead; a
  // node that lives on without leaving is given up on after kLeaveWait. Nothing more is
  // broadcast meanwhile.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + (config_.heartbeat_interval_s > 0 ? kLeaveWait : kFinalizeWait);
  Clock::time_point next_report = start + kFinalizeWait;
  for (;;) {
    std::string waiting;
    for (const Node& n : membership_.Get()->nodes) {
      if (n.id == my_node_.id || !n.alive()) continue;
      waiting += (waiting.empty() ? "" : ", ") + std::string(RoleName(n.role)) + " " +
                 std::to_string(n.rank);
    }
    if (waiting.empty()) return;
    const Clock::time_point now = Clock::now();
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start).count();
    if (now >= deadline) {
      LOG(ERROR) << "the scheduler stops without waiting longer for " << waiting
                 << " to leave (" << waited << " s after its Finalize)";
      return;
    }
    if (now >= next_report) {
      LOG(INFO) << "the scheduler waits for " << waiting << " to leave (" << waited << " s)";
      next_report = now + kFinalizeWait;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void Postoffice::ExitNonZeroIfNodesWereLost() {
  // A job that lost a node did not succeed, whatever the survivors did: a supervisor
  // that reads this process's exit status must not take it for success.
  // With replication, servers fewer than PS_REPLICATION down at once (dead, or new in a
  // dead one's place and catching up) lost nothing: every key had a live replica, which
  // served it from then on.
  const int most_down = most_servers_down_.load();
  std::string lost;
  bool dead_other = false;
  for (const Node& n : membership_.Get()->nodes) {
    if (n.state != Node::kDead) continue;
    lost += (lost.empty() ? "" : ", ") + std::string(RoleName(n.role)) + " " +
            std::to_string(n.rank) + " (node " + std::to_string(n.id) + ")";
    if (n.role != Node::kServerRole) dead_other = true;
  }
  const bool copies_lost = replication_ >= 2 && most_down >= replication_;
  if (lost.empty() && !copies_lost) return;
  if (!dead_other && replication_ >= 2 && !copies_lost) {
    LOG(WARNING) << "the job lost " << lost << " (declared dead); with PS_REPLICATION="
                 << replication_ << " every key of the apps that keep replicas "
                                    "(OptimizerServer) kept a live replica, which served it "
                                    "from then on: the job counts as a success (an app whose "
                                    "servers keep no replicas lost the dead servers' keys, and "
                                    "its requests for them failed)";
    return;
  }
  std::string what = lost.empty() ? lost : lost + " (declared dead)";
  if (copies_lost) {
    what += std::string(what.empty() ? "" : "; ") + std::to_string(most_down) +
            " servers were down at once (dead, or catching up in a dead one's place), as many "
            "as PS_REPLICATION=" + std::to_string(replication_) +
            ": keys held only by them lost their updates";
  }
  LOG(ERROR) << "the job lost " << what << ": this process exits with status 1 when it ends";
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(ExitWithStatusOne); });
}

void Postoffice::DrainCustomers() {
  // What reached this node before the closing barrier has run when Finalize returns
  // (an app that counts the requests its handle answered, as ps-lite's tests do, sees
  // them all). Bounded: a handle that never returns does not hold the node forever.
  auto deadline = std::chrono::steady_clock::now() + kFinalizeWait;
  directory_->ForEach([&deadline](int app_id, int customer_id, Customer* customer) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (customer->DrainOwnThread(std::max(left, std::chrono::milliseconds(0)))) return true;
    LOG(WARNING) << "app " << app_id << " customer " << customer_id
                 << " is still running a handle " << kFinalizeWait.count()
                 << " s into Finalize; stopping without it";
    return false;
  });
}

void Postoffice::StopRuntime() {
  // Timers first, so that nothing sends on a stopping van.
  if (loop_) loop_->Stop();
  running_van_.store(nullptr, std::memory_order_release);
  if (van_) van_->Stop();
}

}  // namespace ps
