#include "job_reports.h"

#include "ps/internal/node_activity.h"

namespace ps {

bool JobReports::Update(int id, const std::string& body, Clock::time_point now) {
  if (body.size() > kMaxReportBytes) return false;
  Entry entry;
  if (!entry.report.ParseFromString(body)) return false;
  // A histogram of another shape (a node of another version) cannot be summed with
  // the bounds this scheduler knows: it is dropped, the rest kept.
  const size_t buckets = static_cast<size_t>(entry.report.latency_bucket_size());
  if (buckets != 0 && buckets != NodeActivity::kLatencyBounds.size() + 1) {
    entry.report.clear_latency_bucket();
    entry.report.clear_latency_seconds_sum();
  }
  entry.at = now;
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_.reports[id] = std::move(entry);
  return true;
}

void JobReports::SetMembership(const std::vector<Node>& nodes, uint64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  if (version == snapshot_.membership_version && !snapshot_.nodes.empty()) return;
  snapshot_.nodes = nodes;
  snapshot_.membership_version = version;
}

void JobReports::CountBarrierRelease() {
  std::lock_guard<std::mutex> lock(mu_);
  ++snapshot_.barrier_releases;
}

void JobReports::SetStalled(bool stalled) {
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_.stalled = stalled;
}

JobReports::Snapshot JobReports::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

}  // namespace ps
