// Postoffice: the control loop's work. Everything here runs on the node's EventLoop
// thread, which never runs app code, so heartbeats, ACKs, barriers and deadlines go
// on whatever the app's handles and callbacks are doing.
#include <glog/logging.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "barrier_releases.h"
#include "customer_directory.h"
#include "idle_trimmer.h"
#include "inbound_channel.h"
#include "join_state.h"
#include "node_report.pb.h"
#include "ps/internal/event_loop.h"
#include "ps/internal/large_buffer.h"
#include "ps/internal/node_activity.h"
#include "ps/internal/postoffice.h"
#include "ps/internal/reorder_window.h"
#include "ps/internal/resend_outbox.h"
#include "ps/logging.h"
#include "scheduler_role.h"
#include "scheduler_watch.h"
#include "worker_instances.h"

namespace ps {
namespace {

// A request may wait this long for its app to start on this node before the sender
// is told that it is not running here.
constexpr std::chrono::seconds kEarlyMessageGrace(10);
// How often request deadlines are checked.
constexpr std::chrono::milliseconds kRequestSweep(200);
// Resends per channel and tick of the resend timer, at most (the rest go at the next).
constexpr size_t kResendBurst = 1024;
// How long a node that gives up waits before it exits, so that the apps' threads
// can report the errors their requests ended with.
constexpr std::chrono::milliseconds kGiveUpGrace(1000);

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

void Postoffice::HandleControl(Message& msg) {
  const Control& c = msg.meta.control;
  if (scheduler_) {
    scheduler_->Handle(msg);
    return;
  }
  switch (c.cmd) {
    case Control::kAddNode:
      if (!msg.meta.request) HandleJoinReply(msg);
      break;
    case Control::kBarrier:
      if (!msg.meta.request) HandleBarrierRelease(msg);
      break;
    case Control::kMembership:
    case Control::kHeartbeat:
      if (!msg.meta.request) HandleMembership(msg);
      break;
    case Control::kWithdraw:
      HandleWithdrawn(msg);
      break;
    default:
      LOG_IF(WARNING, stray_log_.ShouldLog())
          << "control command " << c.cmd << " from node " << msg.meta.sender
          << " is not for a " << RoleName(config_.role) << "; ignored";
  }
}

void Postoffice::HandleJoinReply(const Message& msg) {
  if (join_->joined()) {
    // A repeated table (our ACK was lost): acknowledge again.
    if (config_.resend && msg.meta.sequence) {
      SendAck(kScheduler, msg.meta.sequence, Channel::kControl);
    }
    return;
  }
  if (msg.meta.status_code != 0) {
    // Only a refusal that names this node's identity is the scheduler's (see
    // SchedulerRole::Refuse); anything else is ignored.
    const auto& named = msg.meta.control.nodes;
    if (named.size() != 1 || named[0].identity != my_node_.identity) {
      LOG_IF(WARNING, forged_log_.ShouldLog())
          << "a join refusal that does not name this node ignored";
      return;
    }
    join_->Fail(Status::FromWire(msg.meta.status_code, msg.meta.status_message));
    return;
  }
  // The table must list this node with the identity only it and the scheduler know:
  // a table from anyone else is ignored.
  int my_id = kEmpty;
  for (const Node& n : msg.meta.control.nodes) {
    if (n.endpoint == my_node_.endpoint && n.identity == my_node_.identity && n.instance == 0) {
      my_id = n.id;
    }
  }
  instances_->Name(msg.meta.control.nodes, my_node_.identity);  // this process's other workers
  const Node* scheduler = nullptr;
  for (const Node& n : msg.meta.control.nodes) {
    if (n.id == kScheduler) scheduler = &n;
  }
  if (my_id == kEmpty || !scheduler) {
    LOG_IF(WARNING, forged_log_.ShouldLog())
        << "node table that does not list this node (or no scheduler) ignored";
    return;
  }
  if (!AcceptJobSettings(msg.meta.control)) return;
  join_->set_replaces_dead_node(msg.meta.control.replaces_dead_node);
  MembershipView view;
  view.version = msg.meta.control.membership_version;
  view.leave_version = msg.meta.control.leave_version;
  view.retiring = msg.meta.control.retiring;
  view.nodes = msg.meta.control.nodes;
  my_node_.id = my_id;
  InstallMembership(std::move(view));
  scheduler_watch_->Heard(NowNs());
  if (config_.resend && msg.meta.sequence) {
    SendAck(kScheduler, msg.meta.sequence, Channel::kControl);
  }
  MarkJoinedAndAdmitEarlyInput();
}

bool Postoffice::AcceptJobSettings(const Control& control) {
  ConsistencyModel model;
  Status valid = ConsistencyModel::FromWire(control.consistency, control.staleness, &model);
  if (!valid.ok()) {
    LOG_IF(WARNING, forged_log_.ShouldLog()) << "node table ignored: " << valid;
    return false;
  }
  if (config_.consistency_set && model != config_.consistency) {
    LOG(WARNING) << "PS_CONSISTENCY=" << config_.consistency.ToString()
                 << " on this node, but the job's scheduler runs " << model.ToString()
                 << ": the scheduler's model holds";
  }
  consistency_ = model;
  if (control.key_placement != ConsistentHashRing::kRing &&
      control.key_placement != ConsistentHashRing::kRanges) {
    LOG_IF(WARNING, forged_log_.ShouldLog()) << "node table with an unknown key placement ignored";
    return false;
  }
  key_placement_ = static_cast<ConsistentHashRing::Placement>(control.key_placement);
  if (config_.key_placement_set && key_placement_ != config_.key_placement) {
    LOG(WARNING) << "PS_KEY_PLACEMENT on this node differs from the job's scheduler: the "
                    "scheduler's holds ("
                 << (key_placement_ == ConsistentHashRing::kRanges ? "range" : "ring") << ")";
  }
  if (control.chunk_bytes != 0 && control.chunk_bytes < Config::kMinChunkBytes) {
    LOG_IF(WARNING, forged_log_.ShouldLog()) << "node table with a chunk size below the minimum ignored";
    return false;
  }
  chunk_bytes_ = control.chunk_bytes;
  if (control.replication < 1 || control.replication > static_cast<int>(control.nodes.size())) {
    LOG_IF(WARNING, forged_log_.ShouldLog()) << "node table with a replication of "
                                             << control.replication << " ignored";
    return false;
  }
  replication_ = control.replication;
  replicate_rounds_ = control.replicate_rounds && replication_ == 2;
  if (config_.replicate_rounds_set && replicate_rounds_ != config_.replicate_rounds) {
    LOG(WARNING) << "PS_REPLICATE_ROUNDS=" << config_.replicate_rounds
                 << " on this node, but the job's scheduler has " << replicate_rounds_
                 << ": the scheduler's holds";
  }
  if (config_.replication_set && replication_ != config_.replication) {
    LOG(WARNING) << "PS_REPLICATION=" << config_.replication
                 << " on this node, but the job's scheduler has " << replication_
                 << ": the scheduler's holds";
  }
  if (config_.chunk_bytes_set && chunk_bytes_ != config_.chunk_bytes) {
    LOG(WARNING) << "PS_CHUNK_BYTES=" << config_.chunk_bytes
                 << " on this node, but the job's scheduler has " << chunk_bytes_
                 << ": the scheduler's holds";
  }
  return true;
}

void Postoffice::MarkJoinedAndAdmitEarlyInput() {
  // What raced ahead of the table is checked and delivered by the thread that receives
  // its channel (it may run app handles, which this loop never does), before anything
  // that comes after it: whichever of that thread's next message and the task below
  // comes first drains it, under the channel's lock.
  std::lock_guard<std::mutex> data_lock(inbound_[0]->mu());
  std::lock_guard<std::mutex> control_lock(inbound_[1]->mu());
  MarkJoined();
  for (Channel channel : {Channel::kData, Channel::kControl}) {
    if (!inbound_[static_cast<int>(channel)]->has_unverified()) continue;
    bool posted = van_->RunOnReceiver(channel, [this, channel] {
      InboundChannel& in = *inbound_[static_cast<int>(channel)];
      std::lock_guard<std::mutex> lock(in.mu());
      if (in.has_unverified()) DrainUnverified(channel);
    });
    if (!posted) DrainUnverified(channel);  // a van that cannot wake its receivers
  }
}

void Postoffice::HandleBarrierRelease(const Message& msg) {
  int to = msg.meta.recipient == kEmpty ? my_node_.id : msg.meta.recipient;
  barriers_->Release({msg.meta.control.barrier_group, msg.meta.customer_id, to});
}

void Postoffice::HandleMembership(const Message& msg) {
  const Control& c = msg.meta.control;
  if (c.membership_version <= membership_.Get()->version || c.nodes.empty()) return;
  MembershipView view;
  view.version = c.membership_version;
  view.leave_version = c.leave_version;
  view.retiring = c.retiring;
  view.nodes = c.nodes;
  InstallMembership(std::move(view));
}

void Postoffice::StartNodeTimers() {
  if (config_.heartbeat_interval_s > 0 && !is_scheduler()) {
    scheduler_watch_->Start(config_.heartbeat_interval_s, config_.heartbeat_timeout_s, NowNs());
    loop_->RunEvery(Millis(config_.heartbeat_interval_s), [this] { SendHeartbeat(); });
    // Often enough that a lost heartbeat (or answer) is asked again well within the
    // timeout: CheckScheduler sends one at every check once an answer is overdue.
    auto check = std::max(std::chrono::milliseconds(20),
                          std::min(Millis(config_.heartbeat_interval_s / 4),
                                   std::chrono::milliseconds(250)));
    loop_->RunEvery(check, [this] { CheckScheduler(); });
  }
  if (config_.resend) {
    auto tick = std::max(std::chrono::milliseconds(5),
                         std::chrono::milliseconds(config_.resend_timeout_ms / 4));
    loop_->RunEvery(tick, [this] { ResendDue(); });
  }
  if (config_.idle_trim_ms > 0) {
    {
      std::lock_guard<std::mutex> lock(trim_mu_);
      idle_trimmer_->Start(std::chrono::milliseconds(config_.idle_trim_ms),
                           std::chrono::steady_clock::now());
    }
    auto tick = std::max(std::chrono::milliseconds(50),
                         std::chrono::milliseconds(config_.idle_trim_ms / 2));
    loop_->RunEvery(tick, [this] { TrimMemoryIfIdle(); });
  }
  ListenForSigtermLeave();
  loop_->RunEvery(kRequestSweep, [this] {
    // Small requests coalesced while others were in flight whose answers never came (a
    // node died): they go now at the latest.
    van_->FlushCoalesced(SendMode::kNonBlocking);
    ExpireRequests();
    if (directory_->has_held()) ExpireEarlyMessages();
  });
}

void Postoffice::TrimMemoryIfIdle() {
  // A barrier's thread trimming now: the control loop does not wait for it.
  std::unique_lock<std::mutex> lock(trim_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  VanStats stats = van_->stats();
  if (!idle_trimmer_->Tick(stats.sent_bytes + stats.received_bytes,
                           std::chrono::steady_clock::now())) {
    return;
  }
  GiveMemoryBack("idle");
}

void Postoffice::TrimMemoryAtBarrier() {
  if (config_.idle_trim_ms <= 0 || is_scheduler()) return;
  std::lock_guard<std::mutex> lock(trim_mu_);
  VanStats stats = van_->stats();  // under the lock: the counts only grow between looks
  if (!idle_trimmer_->AtBarrier(stats.sent_bytes + stats.received_bytes,
                                std::chrono::steady_clock::now())) {
    return;
  }
  GiveMemoryBack("at a barrier");
}

void Postoffice::GiveMemoryBack(const char* why) {
  // The kept buffers speed up the next burst of large messages; a node between
  // bursts gives them back (glibc keeps freed heap, up to 1 GiB with PS_TUNE_MALLOC=1,
  // and a shared-memory ring stays resident at its busiest).
  uint64_t ring_bytes = van_->ReleaseIdleMemory();
  const size_t kept_bytes = ReleaseLargeBuffers();
  malloc_trim(0);
  PS_VLOG(1) << why << ": gave free memory back (" << (ring_bytes >> 20)
             << " MiB of shared-memory rings, " << (kept_bytes >> 20)
             << " MiB of large buffers kept for reuse, and malloc_trim)";
}

std::string Postoffice::ActivityReport() const {
  herdps::wire::NodeReport report;
  NodeActivity::Get()->Fill(&report);
  VanStats van = van_->stats();
  NodeStats node = stats();
  report.set_sent_bytes(van.sent_bytes);
  report.set_received_bytes(van.received_bytes);
  report.set_sent_messages(van.sent_messages);
  report.set_received_messages(van.received_messages);
  report.set_resent_messages(node.resent_messages);
  report.set_dropped_messages(node.injected_drops + van.dropped_messages);
  return report.SerializeAsString();
}

void Postoffice::SendHeartbeat() {
  if (withdrawn_.load()) return;  // out of the job: nobody watches for it
  Message hb;
  hb.meta.control.cmd = Control::kHeartbeat;
  // What this node waits in and its counters (stall report, metrics endpoint).
  hb.meta.body = ActivityReport();
  hb.meta.control.membership_version = membership_.Get()->version;
  hb.meta.request = true;
  hb.meta.recipient = kScheduler;
  Send(hb, SendMode::kNonBlocking);
  SendCaughtUp();  // a new server that caught up says so until it is live
  SendWithdraw();  // a server that asked to leave asks until it is leaving
}

void Postoffice::CheckScheduler() {
  if (finalizing_ || join_->gave_up() || withdrawn_.load()) return;
  const bool busy =
      inbound_[static_cast<int>(Channel::kControl)]->busy()->load(std::memory_order_relaxed);
  double seconds = 0;
  switch (scheduler_watch_->Check(NowNs(), busy, &seconds)) {
    case SchedulerWatch::Verdict::kFine:
      return;
    case SchedulerWatch::Verdict::kAskAgain:
      SendHeartbeat();
      return;
    case SchedulerWatch::Verdict::kStalled:
      LOG(WARNING) << RoleName(config_.role) << " " << my_node_.rank
                   << ": this node did not run for " << SecondsText(seconds)
                   << " s (it was stopped, or starved of CPU); asking the scheduler whether "
                   << "the job still has it";
      SendHeartbeat();
      return;
    case SchedulerWatch::Verdict::kGone: {
      char text[64];
      std::snprintf(text, sizeof(text), "%.1f", seconds);
      GiveUp("the scheduler at " + scheduler_endpoint_ + " has been silent for " + text +
             " s (PS_HEARTBEAT_TIMEOUT=" + SecondsText(config_.heartbeat_timeout_s) +
             " s): it is gone and the job cannot go on");
      return;
    }
  }
}

void Postoffice::GiveUp(const std::string& why) {
  if (join_->gave_up()) return;  // only the control loop gives up: no race
  LOG(ERROR) << RoleName(config_.role) << " " << my_node_.rank << ": " << why
             << "; ending every request and exiting";
  // The process exits without Stop, possibly as soon as the app hears of this (its
  // barrier or requests fail below): its ipc socket files go first.
  van_->RemoveEndpointFiles();
  // From now on every send fails with `why`, so requests issued during the grace
  // period end at once too.
  join_->GiveUp(why);
  barriers_->Fail(why);
  directory_->ForEach([&why](int, int, Customer* customer) {
    customer->AbortAllRequests(Status::Unavailable(why));
    return true;
  });
  loop_->RunAfter(kGiveUpGrace, [] {
    google::FlushLogFiles(google::GLOG_INFO);
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(1);
  });
}

void Postoffice::ResendDue() {
  for (int c = 0; c < 2; ++c) {
    ResendOutbox* outbox = outbox_[c].get();
    // A bounded burst per tick: the loop also carries heartbeats, ACK bookkeeping and
    // every deadline, and a large backlog of resends must not hold them up.
    for (Message& m : outbox->DueForResend(std::chrono::steady_clock::now(), kResendBurst)) {
      if (!membership_.Get()->IsAlive(m.meta.recipient) && membership_.Get()->version > 0) {
        outbox->Ack(m.meta.recipient, m.meta.sequence);
        continue;
      }
      resent_.fetch_add(1, std::memory_order_relaxed);
      van_->Send(m, SendMode::kNonBlocking, static_cast<Channel>(c));
    }
  }
}

void Postoffice::ExpireRequests() {
  auto now = std::chrono::steady_clock::now();
  directory_->ForEach([now](int, int, Customer* customer) {
    customer->ExpireRequests(now);
    return true;
  });
}

void Postoffice::ExpireEarlyMessages() {
  // The grace counts from when this node finished Start (its apps cannot serve before):
  // until then nothing expires (what is held stays bounded by count and bytes).
  const int64_t started_ns = started_at_ns_.load();
  if (started_ns == 0) return;
  const std::chrono::steady_clock::time_point started{std::chrono::nanoseconds(started_ns)};
  const auto deadline = std::chrono::steady_clock::now() - kEarlyMessageGrace;
  if (started >= deadline) return;
  for (const Message& m : directory_->TakeHeldBefore(deadline)) {
    expired_early_.fetch_add(1, std::memory_order_relaxed);
    if (!m.meta.request) continue;
    ReplyError(m, Status::NotFound("app " + std::to_string(m.meta.app_id) +
                                   " is not running on node " + std::to_string(my_id()) +
                                   " (its request waited " +
                                   std::to_string(kEarlyMessageGrace.count()) +
                                   " s for it to start)"));
  }
}

}  // namespace ps
