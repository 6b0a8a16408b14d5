// The stall report: who waits for whom, from the nodes' reports and the pending
// barriers, and when a report is due (once per stall).
#include "stall_report.h"

#include <gtest/gtest.h>

#include "ps/base.h"

namespace ps {
namespace {

Node Member(Node::Role role, int rank, Node::State state = Node::kLive) {
  Node n;
  n.role = role;
  n.rank = rank;
  n.id = role == Node::kSchedulerRole ? 1
         : role == Node::kServerRole  ? 8 + 2 * rank
                                      : 9 + 2 * rank;
  n.state = state;
  return n;
}

JobReports::Snapshot Job(int workers, int servers) {
  JobReports::Snapshot s;
  s.nodes.push_back(Member(Node::kSchedulerRole, 0));
  for (int r = 0; r < servers; ++r) s.nodes.push_back(Member(Node::kServerRole, r));
  for (int r = 0; r < workers; ++r) s.nodes.push_back(Member(Node::kWorkerRole, r));
  return s;
}

int Worker(int rank) { return 9 + 2 * rank; }
int Server(int rank) { return 8 + 2 * rank; }

auto NeverSilent = [](int) { return 0.0; };

TEST(StallReportTest, ClockWaitNamesTheWorkersBehindAndTheBarrierItsWaiters) {
  JobReports::Snapshot s = Job(3, 1);
  herdps::wire::NodeReport w0;
  w0.set_clocks_ended(2);
  herdps::wire::NodeWait* wait = w0.add_wait();
  wait->set_what("Clock() ending clock 1");
  wait->set_clock_minimum(2);
  wait->set_seconds(4);
  s.reports[Worker(0)].report = w0;
  for (int r : {1, 2}) s.reports[Worker(r)].report.set_clocks_ended(1);
  StallReport::PendingBarrier b;
  b.group = kWorkerGroup;
  b.arrived = {Worker(1), Worker(2)};
  b.members = {Worker(0), Worker(1), Worker(2)};
  std::vector<std::string> lines = StallReport::Describe(s, {b}, NeverSilent, 2.5);
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0], "worker 0 waits in Clock() ending clock 1 (4.0 s so far) for workers 1, 2");
  EXPECT_EQ(lines[1], "workers 1, 2 wait in Barrier(workers) for worker 0");
}

TEST(StallReportTest, AFinishedWorkerIsNotWaitedFor) {
  JobReports::Snapshot s = Job(2, 1);
  herdps::wire::NodeWait* wait = s.reports[Worker(0)].report.add_wait();
  wait->set_what("Clock() ending clock 3");
  wait->set_clock_minimum(4);
  s.reports[Worker(0)].report.set_clocks_ended(4);
  s.reports[Worker(1)].report.set_clocks_ended(1);
  s.reports[Worker(1)].report.set_clocks_finished(true);
  std::vector<std::string> lines = StallReport::Describe(s, {}, NeverSilent, 2.5);
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0], "worker 0 waits in Clock() ending clock 3 (0.0 s so far)");
}

TEST(StallReportTest, ARequestWaitNamesItsServerAndASilentServerIsSaidSo) {
  JobReports::Snapshot s = Job(1, 2);
  herdps::wire::NodeWait* wait = s.reports[Worker(0)].report.add_wait();
  wait->set_what("Push(timestamp 7)");
  wait->add_waiting_for(Server(1));
  wait->set_seconds(3.25);
  auto silent = [](int id) { return id == 10 ? 6.0 : 0.2; };
  std::vector<std::string> lines = StallReport::Describe(s, {}, silent, 2.5);
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0], "worker 0 waits in Push(timestamp 7) (3.2 s so far) for server 1");
  EXPECT_EQ(lines[1],
            "server 1 has been silent for 6.0 s (stopped, cut off or starved of CPU?)");
}

TEST(StallReportTest, AWaitedForNodeThatWaitsInNothingRunsAppCode) {
  JobReports::Snapshot s = Job(2, 1);
  StallReport::PendingBarrier b;
  b.group = kWorkerGroup;
  b.arrived = {Worker(1)};
  b.members = {Worker(0), Worker(1)};
  std::vector<std::string> lines = StallReport::Describe(s, {b}, NeverSilent, 2.5);
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0], "worker 1 waits in Barrier(workers) for worker 0");
  EXPECT_EQ(lines[1], "worker 0 waits in nothing HerdPS knows of (it runs app code)");
}

TEST(StallReportTest, DeadNodesWaitForNothingAndAreNamedDead) {
  JobReports::Snapshot s = Job(1, 2);
  s.nodes[2].state = Node::kDead;  // server 1
  herdps::wire::NodeWait* wait = s.reports[Worker(0)].report.add_wait();
  wait->set_what("Pull(timestamp 2)");
  wait->add_waiting_for(Server(1));
  s.reports[Server(1)].report.add_wait()->set_what("Push(timestamp 1)");
  std::vector<std::string> lines = StallReport::Describe(s, {}, NeverSilent, 2.5);
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0], "worker 0 waits in Pull(timestamp 2) (0.0 s so far) for server 1");
  EXPECT_EQ(lines[1], "server 1 is dead");
}

TEST(StallReportTest, NobodyWaitsNoLines) {
  EXPECT_TRUE(StallReport::Describe(Job(2, 2), {}, NeverSilent, 2.5).empty());
}

TEST(StallReportTest, DueOncePerStallAndOnlyWhileSomebodyWaits) {
  StallReport stall;
  auto t0 = StallReport::Clock::now();
  auto at = [&](double s) { return t0 + std::chrono::milliseconds(static_cast<int>(s * 1000)); };
  EXPECT_FALSE(stall.Due(5, true, at(0), 3));
  EXPECT_FALSE(stall.Due(5, true, at(2.9), 3));
  EXPECT_TRUE(stall.Due(5, true, at(3.0), 3));
  EXPECT_TRUE(stall.reported());
  EXPECT_FALSE(stall.Due(5, true, at(10), 3));  // once per stall
  EXPECT_FALSE(stall.Due(6, true, at(11), 3));  // progress: a new stall may begin
  EXPECT_FALSE(stall.reported());
  EXPECT_FALSE(stall.Due(6, false, at(20), 3));  // nobody waits: no report
  EXPECT_TRUE(stall.Due(6, true, at(20.1), 3));
  StallReport off;
  EXPECT_FALSE(off.Due(1, true, at(0), 0));
  EXPECT_FALSE(off.Due(1, true, at(1000), 0));  // PS_STALL_REPORT=0: never
}

}  // namespace
}  // namespace ps
