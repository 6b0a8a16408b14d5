// The metrics page: NodeActivity's counts, as a node reports them, in the Prometheus
// text format the scheduler serves.
#include "metrics_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "ps/internal/node_activity.h"

namespace ps {
namespace {

const std::string kWorker0 = R"(node="worker 0",role="worker",rank="0")";
const std::string kWorker1 = R"(node="worker 1",role="worker",rank="1")";
const std::string kServer0 = R"(node="server 0",role="server",rank="0")";

bool Has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos ||
         text.compare(0, line.size() + 1, line + "\n") == 0;
}

TEST(NodeActivityTest, CountsAndWaitsGoIntoTheReport) {
  NodeActivity* a = NodeActivity::Get();
  herdps::wire::NodeReport before;
  a->Fill(&before);
  a->CountIssued(true, false);
  a->CountIssued(true, true);
  a->CountServed(false, true);
  a->CountLatency(std::chrono::microseconds(700));  // bucket le=0.001
  a->CountLatency(std::chrono::seconds(20));        // above every bound
  a->CountReceivedData();
  herdps::wire::NodeReport after;
  {
    ActivityWait wait([](NodeActivity::WaitInfo* info) {
      info->what = "Push(timestamp 3)";
      info->waiting_for = {10};
    });
    a->Fill(&after);
  }
  EXPECT_EQ(after.push_requests() - before.push_requests(), 2u);
  EXPECT_EQ(after.pull_requests() - before.pull_requests(), 1u);
  EXPECT_EQ(after.served_pull_requests() - before.served_pull_requests(), 1u);
  EXPECT_EQ(after.progress() - before.progress(), 1u);
  ASSERT_EQ(after.latency_bucket_size(), static_cast<int>(NodeActivity::kLatencyBounds.size() + 1));
  EXPECT_EQ(after.latency_bucket(3) - before.latency_bucket(3), 1u);  // <= 0.001
  EXPECT_EQ(after.latency_bucket(after.latency_bucket_size() - 1) -
                before.latency_bucket(before.latency_bucket_size() - 1), 1u);
  EXPECT_NEAR(after.latency_seconds_sum() - before.latency_seconds_sum(), 20.0007, 1e-6);
  ASSERT_EQ(after.wait_size(), before.wait_size() + 1);
  EXPECT_EQ(after.wait(after.wait_size() - 1).what(), "Push(timestamp 3)");
  herdps::wire::NodeReport done;
  a->Fill(&done);
  EXPECT_EQ(done.wait_size(), before.wait_size());  // the wait ended with its scope
}

TEST(NodeActivityTest, QueueDepthsAreReadUntilRemoved) {
  NodeActivity* a = NodeActivity::Get();
  int id = a->AddQueueDepths([] { return std::vector<uint64_t>{3, 0}; });
  herdps::wire::NodeReport with;
  a->Fill(&with);
  a->RemoveQueueDepths(id);
  herdps::wire::NodeReport without;
  a->Fill(&without);
  ASSERT_EQ(with.shard_queue_depth_size(), 2);
  EXPECT_EQ(with.shard_queue_depth(0), 3u);
  EXPECT_EQ(without.shard_queue_depth_size(), 0);
}

Node MakeNode(int id, Node::Role role, int rank, Node::State state = Node::kLive) {
  Node n;
  n.id = id;
  n.role = role;
  n.rank = rank;
  n.state = state;
  return n;
}

TEST(MetricsTextTest, PerNodeCountersHistogramAndStates) {
  JobReports::Snapshot s;
  s.nodes = {MakeNode(1, Node::kSchedulerRole, 0), MakeNode(8, Node::kServerRole, 0),
             MakeNode(9, Node::kWorkerRole, 0), MakeNode(11, Node::kWorkerRole, 1, Node::kDead)};
  s.membership_version = 4;
  s.barrier_releases = 2;
  auto now = JobReports::Clock::now();
  herdps::wire::NodeReport& w = s.reports[9].report;
  s.reports[9].at = now - std::chrono::seconds(1);
  w.set_push_requests(5);
  w.set_pull_requests(3);
  w.set_clocks_ended(7);
  w.set_sent_bytes(1234);
  for (size_t b = 0; b <= NodeActivity::kLatencyBounds.size(); ++b) {
    w.add_latency_bucket(b == 3 ? 6 : b == 5 ? 2 : 0);
  }
  w.set_latency_seconds_sum(0.25);
  herdps::wire::NodeReport& srv = s.reports[8].report;
  s.reports[8].at = now;
  srv.set_served_push_requests(5);
  srv.add_shard_queue_depth(4);
  const std::string text = MetricsText(s, now);
  EXPECT_TRUE(Has(text, "# TYPE herdps_requests_total counter")) << text;
  EXPECT_TRUE(Has(text, "herdps_requests_total{" + kWorker0 + R"(,kind="push"} 5)"))
      << text;
  EXPECT_TRUE(Has(text, "herdps_requests_total{" + kWorker0 + R"(,kind="pull"} 3)"));
  EXPECT_TRUE(Has(text, "herdps_served_requests_total{" + kServer0 + R"(,kind="push"} 5)"));
  EXPECT_TRUE(Has(text, "herdps_request_latency_seconds_bucket{" + kWorker0 + R"(,le="0.001"} 6)"));
  EXPECT_TRUE(Has(text, "herdps_request_latency_seconds_bucket{" + kWorker0 + R"(,le="0.005"} 8)"));
  EXPECT_TRUE(Has(text, "herdps_request_latency_seconds_bucket{" + kWorker0 + R"(,le="+Inf"} 8)"));
  EXPECT_TRUE(Has(text, "herdps_request_latency_seconds_count{" + kWorker0 + "} 8"));
  EXPECT_TRUE(Has(text, "herdps_clock{" + kWorker0 + "} 7"));
  EXPECT_TRUE(Has(text, "herdps_node_live{" + kWorker1 + "} 0"));
  EXPECT_TRUE(Has(text, "herdps_node_state{" + kWorker1 + R"(,state="dead"} 1)"));
  EXPECT_TRUE(Has(text, "herdps_shard_queue_depth{" + kServer0 + R"(,shard="0"} 4)"));
  EXPECT_TRUE(Has(text, "herdps_membership_version 4"));
  EXPECT_TRUE(Has(text, "herdps_barrier_releases_total 2"));
  EXPECT_TRUE(Has(text, "herdps_report_age_seconds{" + kWorker0 + "} 1"));
  // The clock is a worker's: the server has none.
  EXPECT_EQ(text.find(R"(herdps_clock{node="server 0")"), std::string::npos);
}

TEST(MetricsTextTest, ValuesFromTheWireThatAreNoCountsPrintAsPrometheusReadsThem) {
  JobReports::Snapshot s;
  s.nodes = {MakeNode(9, Node::kWorkerRole, 0)};
  herdps::wire::NodeReport& r = s.reports[9].report;
  for (size_t b = 0; b <= NodeActivity::kLatencyBounds.size(); ++b) r.add_latency_bucket(0);
  r.set_latency_seconds_sum(std::nan(""));
  r.set_clocks_ended(-7);
  const std::string text = MetricsText(s, JobReports::Clock::now());
  EXPECT_TRUE(Has(text, "herdps_request_latency_seconds_sum{" + kWorker0 + "} NaN")) << text;
  EXPECT_TRUE(Has(text, "herdps_clock{" + kWorker0 + "} -7"));
  r.set_latency_seconds_sum(1e300 * 1e300);
  EXPECT_TRUE(Has(MetricsText(s, JobReports::Clock::now()),
                  "herdps_request_latency_seconds_sum{" + kWorker0 + "} +Inf"));
  r.set_latency_seconds_sum(7.5e78);
  EXPECT_TRUE(Has(MetricsText(s, JobReports::Clock::now()),
                  "herdps_request_latency_seconds_sum{" + kWorker0 + "} 7.5e+78"));
}

}  // namespace
}  // namespace ps
