// ClockCoordinator (ps/services/clock_coordinator.h), the scheduler plugin that keeps the job's
// clocks, driven through a fake PluginContext: what it answers, what it pushes and
// whom it stops waiting for.
#include "clock_coordinator.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ps/base.h"
#include "ps/internal/clock_client.h"

namespace ps {
namespace {

class FakeContext : public PluginContext {
 public:
  struct Sent {
    int to, head;
    std::string body;
  };
  void Respond(const SimpleData& request, const std::string& body) override {
    answers.push_back(std::to_string(request.sender) + ":" + body);
  }
  void RespondError(const SimpleData& request, const Status& status) override {
    errors.push_back(std::to_string(request.sender) + ":" + status.message());
  }
  int Notify(int node_or_group, int head, const std::string& body) override {
    pushes.push_back({node_or_group, head, body});
    return 0;
  }
  const MembershipView& membership() const override { return view; }
  int app_id() const override { return kClockAppId; }

  MembershipView view;
  std::vector<std::string> answers, errors;
  std::vector<Sent> pushes;
};

Node MakeNode(int id, Node::Role role) {
  Node n;
  n.id = id;
  n.role = role;
  n.state = Node::kLive;
  return n;
}

// Scheduler 1, server 8, workers 9, 11, 13.
class ClockCoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx.view.version = 1;
    ctx.view.nodes = {MakeNode(1, Node::kSchedulerRole), MakeNode(8, Node::kServerRole),
                      MakeNode(9, Node::kWorkerRole), MakeNode(11, Node::kWorkerRole),
                      MakeNode(13, Node::kWorkerRole)};
    coordinator.OnStart(&ctx);
  }
  void Send(int sender, int head, const std::string& body) {
    SimpleData req;
    req.sender = sender;
    req.head = head;
    req.body = body;
    coordinator.OnRequest(req, &ctx);
  }
  void End(int sender, int64_t clock) { Send(sender, kClockEnded, std::to_string(clock)); }
  std::string LastPush() const { return ctx.pushes.empty() ? "" : ctx.pushes.back().body; }
  void SetState(int id, Node::State state) {
    for (Node& n : ctx.view.nodes) {
      if (n.id == id) n.state = state;
    }
    ++ctx.view.version;
    coordinator.OnMembershipChange(ctx.view, &ctx);
  }

  ClockCoordinator coordinator{ConsistencyModel{ConsistencyModel::kBsp, 0}};
  FakeContext ctx;
};

TEST_F(ClockCoordinatorTest, TheMinimumMovesWhenTheLastWorkerEndsAClock) {
  EXPECT_TRUE(ctx.pushes.empty()) << "everyone starts in clock 0: nothing to push";
  End(9, 0);
  End(11, 0);
  EXPECT_TRUE(ctx.pushes.empty());
  EXPECT_EQ(ctx.answers, (std::vector<std::string>{"9:0", "11:0"}));
  End(13, 0);
  ASSERT_EQ(ctx.pushes.size(), 1u);
  EXPECT_EQ(ctx.pushes[0].to, kWorkerGroup + kServerGroup);
  EXPECT_EQ(ctx.pushes[0].head, kClockMinimum);
  EXPECT_EQ(ctx.pushes[0].body, "1");
  EXPECT_EQ(ctx.answers.back(), "13:1") << "the last one's answer carries the new minimum";
}

TEST_F(ClockCoordinatorTest, AFastWorkerDoesNotMoveTheMinimum) {
  for (int c = 0; c < 5; ++c) End(9, c);
  EXPECT_TRUE(ctx.pushes.empty());
  EXPECT_EQ(ctx.answers.back(), "9:0");
  EXPECT_TRUE(ctx.errors.empty());
}

TEST_F(ClockCoordinatorTest, ClocksOutOfOrderOrMalformedAreRefusedAndChangeNothing) {
  End(9, 1);   // skips clock 0
  End(9, 0);
  End(9, 0);   // the same clock twice
  Send(9, kClockEnded, "-1");
  Send(9, kClockEnded, "one");
  Send(9, 99, "");
  Send(8, kClockEnded, "0");   // a server
  Send(21, kClockEnded, "0");  // not in the job
  EXPECT_EQ(ctx.errors.size(), 7u);
  EXPECT_EQ(ctx.answers, (std::vector<std::string>{"9:0"}));
  End(11, 0);
  End(13, 0);
  EXPECT_EQ(LastPush(), "1") << "only the one valid clock of worker 9 counted";
}

TEST_F(ClockCoordinatorTest, ADeadOrLeftWorkerStopsCounting) {
  End(9, 0);
  End(11, 0);
  SetState(13, Node::kDead);
  EXPECT_EQ(LastPush(), "1");
  End(9, 1);
  SetState(11, Node::kLeft);
  EXPECT_EQ(LastPush(), "2");
  End(11, 1);  // from a node that left: refused
  EXPECT_EQ(ctx.errors.size(), 1u);
}

TEST_F(ClockCoordinatorTest, FinishedWorkersStopCountingAndAllFinishedMeansNoWaiting) {
  End(9, 0);
  End(11, 0);
  Send(13, kClockFinished, "");
  EXPECT_EQ(LastPush(), "1");
  End(13, 0);  // after finishing: refused
  EXPECT_EQ(ctx.errors.size(), 1u);
  Send(9, kClockFinished, "");
  Send(11, kClockFinished, "");
  EXPECT_EQ(LastPush(), std::to_string(kAllClocksEnded));
}

TEST(ClockText, OnlyNonNegativeDecimalsAreClocks) {
  int64_t v = -1;
  EXPECT_TRUE(ParseClockText("0", &v));
  EXPECT_EQ(v, 0);
  EXPECT_TRUE(ParseClockText(std::to_string(kAllClocksEnded), &v));
  EXPECT_EQ(v, kAllClocksEnded);
  for (const char* bad : {"", "-1", "+1", "1x", " 1", "99999999999999999999"}) {
    EXPECT_FALSE(ParseClockText(bad, &v)) << bad;
  }
}

}  // namespace
}  // namespace ps
