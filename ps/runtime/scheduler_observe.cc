// The scheduler's view of a running job: the stall report (PS_STALL_REPORT, SIGUSR1)
// and the metrics endpoint (PS_METRICS_PORT). See docs/operability.md.
#include <glog/logging.h>
#include <signal.h>

#include <atomic>

#include "metrics_text.h"
#include "ps/internal/config.h"
#include "ps/internal/node_activity.h"
#include "ps/internal/postoffice.h"
#include "scheduler_role.h"

namespace ps {
namespace {

std::atomic<bool> report_asked{false};  // set by SIGUSR1

void OnSigusr1(int) { report_asked.store(true); }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void SchedulerRole::ListenForSigusr1() {
  static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");
  struct sigaction old {};
  if (sigaction(SIGUSR1, nullptr, &old) != 0) return;
  // An app's own handler stays; the default would end the process.
  if ((old.sa_flags & SA_SIGINFO) || (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) {
    LOG(INFO) << "SIGUSR1 has a handler of the app's: it does not print who waits for whom";
    return;
  }
  struct sigaction act {};
  act.sa_handler = OnSigusr1;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &act, nullptr);
}

Status SchedulerRole::StartMetrics() {
  if (config_.metrics_port <= 0) return Status::OK();
  metrics_ = std::make_unique<MetricsEndpoint>();
  Status s = metrics_->Start(config_.metrics_host, config_.metrics_port, [this] {
    return MetricsText(reports_.Get(), JobReports::Clock::now());
  });
  if (!s.ok()) {
    metrics_.reset();
    return s;
  }
  LOG(INFO) << "metrics at http://" << config_.metrics_host << ":" << config_.metrics_port
            << "/metrics (PS_METRICS_PORT)";
  return Status::OK();
}

std::vector<std::string> SchedulerRole::WhoWaitsForWhom(const JobReports::Snapshot& snapshot) {
  std::vector<StallReport::PendingBarrier> barriers;
  for (const auto& kv : barriers_) {
    StallReport::PendingBarrier b;
    b.group = kv.first.first;
    b.arrived = kv.second.arrived;
    b.members = view_.Ids(b.group, /*alive_only=*/true);
    barriers.push_back(std::move(b));
  }
  std::atomic<int64_t>* heard = heard_ns_.load(std::memory_order_acquire);
  const int64_t now = NowNs();
  auto silent_s = [&](int id) {
    if (!heard || id < 0 || static_cast<size_t>(id) >= heard_size_) return 0.0;
    return (now - heard[id].load(std::memory_order_relaxed)) / 1e9;
  };
  // Heartbeats come every interval: silence past two of them is news.
  const double silent_after = config_.heartbeat_interval_s > 0
                                  ? 2 * config_.heartbeat_interval_s + 0.5 : 1e18;
  return StallReport::Describe(snapshot, barriers, silent_s, silent_after);
}

void SchedulerRole::CheckStall() {
  if (!complete_) return;
  reports_.SetMembership(view_.nodes, view_.version);
  const JobReports::Snapshot snapshot = reports_.Get();
  uint64_t progress = snapshot.barrier_releases + snapshot.membership_version +
                      NodeActivity::Get()->progress();
  // A stall is one in which a worker waits: servers and the scheduler wait in their
  // Finalize for as long as the job runs.
  bool worker_waits = false;
  for (const auto& kv : barriers_) {
    for (int id : kv.second.arrived) {
      const Node* n = view_.Find(id);
      worker_waits |= n && n->alive() && n->role == Node::kWorkerRole;
    }
  }
  for (const auto& kv : snapshot.reports) {
    progress += kv.second.report.progress();
    const Node* n = view_.Find(kv.first);
    worker_waits |= n && n->alive() && n->role == Node::kWorkerRole &&
                    kv.second.report.wait_size() > 0;
  }
  const bool due = stall_.Due(progress, worker_waits, Clock::now(), config_.stall_report_s);
  reports_.SetStalled(stall_.reported());
  const bool asked = report_asked.exchange(false);
  if (!due && !asked) return;
  std::vector<std::string> lines = WhoWaitsForWhom(snapshot);
  if (due) {
    const std::string stall_s = SecondsText(config_.stall_report_s);
    LOG(WARNING) << "stall: nothing has progressed for " << stall_s
                 << " s while workers wait (PS_STALL_REPORT=" << stall_s
                 << "); who waits for whom:";
  } else {
    LOG(WARNING) << "waits: who waits for whom now (asked by SIGUSR1)"
                 << (lines.empty() ? ": nobody waits in HerdPS" : ":");
  }
  for (const std::string& line : lines) LOG(WARNING) << (due ? "stall: " : "waits: ") << line;
}

}  // namespace ps
