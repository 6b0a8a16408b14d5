#include "ps/internal/node_activity.h"

#include <algorithm>

#include "node_report.pb.h"

namespace ps {

NodeActivity* NodeActivity::Get() {
  // Never destroyed: threads may count while the process exits.
  static NodeActivity* activity = new NodeActivity();
  return activity;
}

uint64_t NodeActivity::BeginWait(Describe describe) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t token = next_token_++;
  waits_.emplace(token, Wait{std::move(describe), std::chrono::steady_clock::now()});
  return token;
}

void NodeActivity::EndWait(uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  waits_.erase(token);
}

void NodeActivity::CountIssued(bool push, bool pull) {
  if (push) push_requests_.fetch_add(1, std::memory_order_relaxed);
  if (pull) pull_requests_.fetch_add(1, std::memory_order_relaxed);
}

void NodeActivity::CountServed(bool push, bool pull) {
  if (push) served_push_.fetch_add(1, std::memory_order_relaxed);
  if (pull) served_pull_.fetch_add(1, std::memory_order_relaxed);
}

void NodeActivity::CountLatency(std::chrono::steady_clock::duration latency) {
  const double seconds = std::chrono::duration<double>(latency).count();
  size_t bucket = std::lower_bound(kLatencyBounds.begin(), kLatencyBounds.end(), seconds) -
                  kLatencyBounds.begin();
  latency_buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  latency_ns_sum_.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(latency).count(),
      std::memory_order_relaxed);
}

void NodeActivity::SetClocks(int64_t ended, bool finished) {
  clocks_ended_.store(ended, std::memory_order_relaxed);
  clocks_finished_.store(finished, std::memory_order_relaxed);
}

int NodeActivity::AddQueueDepths(std::function<std::vector<uint64_t>()> depths) {
  std::lock_guard<std::mutex> lock(mu_);
  int id = next_depths_id_++;
  queue_depths_.emplace(id, std::move(depths));
  return id;
}

void NodeActivity::RemoveQueueDepths(int id) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_depths_.erase(id);
}

void NodeActivity::Fill(herdps::wire::NodeReport* report) {
  auto relaxed = std::memory_order_relaxed;
  report->set_progress(progress_.load(relaxed));
  report->set_clocks_ended(clocks_ended_.load(relaxed));
  report->set_clocks_finished(clocks_finished_.load(relaxed));
  report->set_push_requests(push_requests_.load(relaxed));
  report->set_pull_requests(pull_requests_.load(relaxed));
  report->set_served_push_requests(served_push_.load(relaxed));
  report->set_served_pull_requests(served_pull_.load(relaxed));
  for (const auto& bucket : latency_buckets_) report->add_latency_bucket(bucket.load(relaxed));
  report->set_latency_seconds_sum(latency_ns_sum_.load(relaxed) / 1e9);
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& entry : waits_) {
    WaitInfo info;
    entry.second.describe(&info);
    herdps::wire::NodeWait* wait = report->add_wait();
    wait->set_what(info.what);
    for (int id : info.waiting_for) wait->add_waiting_for(id);
    wait->set_clock_minimum(info.clock_minimum);
    wait->set_seconds(std::chrono::duration<double>(now - entry.second.since).count());
  }
  for (const auto& entry : queue_depths_) {
    for (uint64_t depth : entry.second()) report->add_shard_queue_depth(depth);
  }
}

}  // namespace ps
