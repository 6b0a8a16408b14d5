// MembershipView and MembershipHolder (ps/internal/membership.h): the job's node table as
// an immutable, versioned snapshot, and the holder that swaps snapshots under readers.
#include "ps/internal/membership.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "ps/base.h"

namespace ps {
namespace {

Node MakeNode(int id, Node::Role role, Node::State state) {
  Node n;
  n.id = id;
  n.role = role;
  n.state = state;
  n.host = "127.0.0.1";
  n.port = 9000 + id;
  return n;
}

// A job of one scheduler, three servers (8, 10, 12) and three workers (9, 11, 13), one of
// each kind in every state but the scheduler's.
//   8 live server     9 live worker
//  10 dead server    11 joining worker
//  12 joining server 13 left worker
MembershipView SampleView(uint64_t version) {
  MembershipView v;
  v.version = version;
  v.nodes = {MakeNode(1, Node::kSchedulerRole, Node::kLive),
             MakeNode(8, Node::kServerRole, Node::kLive),
             MakeNode(9, Node::kWorkerRole, Node::kLive),
             MakeNode(10, Node::kServerRole, Node::kDead),
             MakeNode(11, Node::kWorkerRole, Node::kJoining),
             MakeNode(12, Node::kServerRole, Node::kJoining),
             MakeNode(13, Node::kWorkerRole, Node::kLeft)};
  return v;
}

using Ids = std::vector<int>;

TEST(MembershipView, FindReturnsTheNodeWithThatIdOrNull) {
  MembershipView v = SampleView(1);
  for (const Node& n : v.nodes) {
    const Node* found = v.Find(n.id);
    ASSERT_NE(found, nullptr) << n.id;
    EXPECT_EQ(found->id, n.id);
    EXPECT_EQ(found->role, n.role);
    EXPECT_EQ(found->port, n.port);
  }
  for (int id : {0, 2, 7, 14, 15, 100, -1, kEmpty}) EXPECT_EQ(v.Find(id), nullptr) << id;
  EXPECT_EQ(MembershipView().Find(1), nullptr);
}

TEST(MembershipView, JoiningAndLiveNodesAreAliveDeadAndLeftOnesAreNot) {
  MembershipView v = SampleView(1);
  EXPECT_TRUE(v.IsAlive(1));
  EXPECT_TRUE(v.IsAlive(8));    // live
  EXPECT_TRUE(v.IsAlive(12));   // joining
  EXPECT_FALSE(v.IsAlive(10));  // dead
  EXPECT_FALSE(v.IsAlive(13));  // left
  EXPECT_FALSE(v.IsAlive(20));  // never in the job
}

TEST(MembershipView, IdsOfAGroupListEveryMemberOrOnlyTheAliveOnes) {
  MembershipView v = SampleView(1);
  EXPECT_EQ(v.Ids(kServerGroup, false), (Ids{8, 10, 12}));
  EXPECT_EQ(v.Ids(kServerGroup, true), (Ids{8, 12}));
  EXPECT_EQ(v.Ids(kWorkerGroup, false), (Ids{9, 11, 13}));
  EXPECT_EQ(v.Ids(kWorkerGroup, true), (Ids{9, 11}));
  EXPECT_EQ(v.Ids(kScheduler, false), (Ids{1}));
  EXPECT_EQ(v.Ids(kServerGroup + kWorkerGroup, false), (Ids{8, 9, 10, 11, 12, 13}));
  EXPECT_EQ(v.Ids(kServerGroup + kWorkerGroup, true), (Ids{8, 9, 11, 12}));
  EXPECT_EQ(v.Ids(kScheduler + kServerGroup + kWorkerGroup, true), (Ids{1, 8, 9, 11, 12}));
}

TEST(MembershipView, IdsOfASingleNodeNameItUnlessItIsGoneAndAliveOnlyIsAsked) {
  MembershipView v = SampleView(1);
  EXPECT_EQ(v.Ids(8, false), (Ids{8}));
  EXPECT_EQ(v.Ids(8, true), (Ids{8}));
  EXPECT_EQ(v.Ids(11, true), (Ids{11}));  // joining counts as alive
  EXPECT_EQ(v.Ids(10, false), (Ids{10}));
  EXPECT_EQ(v.Ids(10, true), Ids{});
  EXPECT_EQ(v.Ids(13, true), Ids{});
  EXPECT_EQ(v.Ids(20, false), Ids{});  // not in the job
}

TEST(MembershipView, CountAliveCountsJoiningAndLiveNodesOfARole) {
  MembershipView v = SampleView(1);
  EXPECT_EQ(v.CountAlive(Node::kServerRole), 2);
  EXPECT_EQ(v.CountAlive(Node::kWorkerRole), 2);
  EXPECT_EQ(v.CountAlive(Node::kSchedulerRole), 1);
  EXPECT_EQ(MembershipView().CountAlive(Node::kWorkerRole), 0);
}

Node MakeServer(int rank, Node::State state) {
  Node n = MakeNode(8 + 2 * rank, Node::kServerRole, state);
  n.rank = rank;
  return n;
}

TEST(MembershipView, AnEnteringServerIsAliveAndOnlyOnTheNextRing) {
  MembershipView v;
  v.nodes = {MakeNode(1, Node::kSchedulerRole, Node::kLive), MakeServer(0, Node::kLive),
             MakeServer(1, Node::kDead), MakeServer(2, Node::kJoining),
             MakeServer(3, Node::kEntering)};
  v.PlaceKeys(ConsistentHashRing::kRing, 16);
  EXPECT_TRUE(v.IsAlive(14));
  // Dead and joining servers keep their place (their keys fail over); the entering one
  // has none yet.
  EXPECT_EQ(v.ring.servers(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(v.ring.rank_bound(), 3);
  ASSERT_TRUE(v.ring_changing());
  EXPECT_EQ(v.next_ring.servers(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(v.next_ring.rank_bound(), 4);
  // The grown ring moves keys only onto the new server.
  int moved = 0;
  for (Key key = 0; key < 4000; ++key) {
    const int before = v.ring.ServerOf(key);
    const int after = v.next_ring.ServerOf(key);
    if (before != after) {
      EXPECT_EQ(after, 3) << key;
      ++moved;
    }
  }
  EXPECT_GT(moved, 4000 / 4 / 2);
  EXPECT_LT(moved, 4000 / 4 * 2);

  v.nodes.back().state = Node::kLive;
  v.PlaceKeys(ConsistentHashRing::kRing, 16);
  EXPECT_EQ(v.ring.servers(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_FALSE(v.ring_changing());
}

TEST(MembershipView, ARetiringDeadServerIsTheLeavingOneAndOffTheNextRing) {
  MembershipView v;
  v.nodes = {MakeNode(1, Node::kSchedulerRole, Node::kLive), MakeServer(0, Node::kLive),
             MakeServer(1, Node::kDead), MakeServer(2, Node::kLive)};
  v.PlaceKeys(ConsistentHashRing::kRing, 16);
  EXPECT_EQ(v.LeavingServer(), nullptr);  // dead, not retiring: no ring change
  EXPECT_FALSE(v.ring_changing());
  v.retiring = 10;
  v.PlaceKeys(ConsistentHashRing::kRing, 16);
  ASSERT_NE(v.LeavingServer(), nullptr);
  EXPECT_EQ(v.LeavingServer()->id, 10);
  EXPECT_FALSE(v.IsAlive(10));
  // Its keys fail over on the ring as before; the ring that follows has none on it.
  EXPECT_EQ(v.ring.servers(), (std::vector<int>{0, 1, 2}));
  ASSERT_TRUE(v.ring_changing());
  EXPECT_EQ(v.next_ring.servers(), (std::vector<int>{0, 2}));
}

TEST(MembershipHolder, StartsWithAnEmptyVersionZeroView) {
  MembershipHolder holder;
  const MembershipView* v = holder.Get();
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->version, 0u);
  EXPECT_TRUE(v->nodes.empty());
}

TEST(MembershipHolder, PublishMakesTheViewCurrentSortedById) {
  MembershipHolder holder;
  MembershipView shuffled = SampleView(3);
  std::swap(shuffled.nodes[0], shuffled.nodes[6]);
  std::swap(shuffled.nodes[2], shuffled.nodes[4]);
  const MembershipView* published = holder.Publish(std::move(shuffled));
  ASSERT_EQ(holder.Get(), published);
  EXPECT_EQ(published->version, 3u);
  Ids order;
  for (const Node& n : published->nodes) order.push_back(n.id);
  EXPECT_EQ(order, (Ids{1, 8, 9, 10, 11, 12, 13}));
  ASSERT_NE(published->Find(13), nullptr);
  EXPECT_EQ(published->Find(13)->state, Node::kLeft);
}

TEST(MembershipHolder, AViewFromGetStaysValidAndUnchangedAfterNewerOnesArePublished) {
  MembershipHolder holder;
  const MembershipView* first = holder.Publish(SampleView(1));
  MembershipView second = SampleView(2);
  second.nodes[1].state = Node::kDead;  // server 8 died
  holder.Publish(std::move(second));
  for (uint64_t v = 3; v < 50; ++v) holder.Publish(SampleView(v));

  EXPECT_EQ(holder.Get()->version, 49u);
  EXPECT_EQ(first->version, 1u);
  ASSERT_EQ(first->nodes.size(), 7u);
  EXPECT_TRUE(first->IsAlive(8));
  EXPECT_EQ(first->Ids(kServerGroup, true), (Ids{8, 12}));
}

TEST(MembershipHolder, ResetGoesBackToAnEmptyVersionZeroViewKeepingOldPointersValid) {
  MembershipHolder holder;
  const MembershipView* before = holder.Publish(SampleView(7));
  holder.Reset();
  EXPECT_EQ(holder.Get()->version, 0u);
  EXPECT_TRUE(holder.Get()->nodes.empty());
  EXPECT_EQ(before->version, 7u);
  EXPECT_EQ(before->nodes.size(), 7u);
  holder.Publish(SampleView(1));  // a new Start after Finalize
  EXPECT_EQ(holder.Get()->version, 1u);
}

TEST(MembershipHolder, KeepsOnlyTheNewestViewsOnceTheGraceHasPassed) {
  // Memory does not grow with the number of changes: past the grace, only the newest
  // views (and the current one) are kept.
  MembershipHolder holder(/*keep_newest=*/4, /*grace=*/std::chrono::seconds(0));
  for (uint64_t v = 1; v <= 1000; ++v) holder.Publish(SampleView(v));
  EXPECT_EQ(holder.kept(), 5u);
  EXPECT_EQ(holder.Get()->version, 1000u);
}

TEST(MembershipHolder, KeepsEveryViewReplacedWithinTheGrace) {
  MembershipHolder holder(/*keep_newest=*/4, /*grace=*/std::chrono::hours(1));
  const MembershipView* first = holder.Publish(SampleView(1));
  for (uint64_t v = 2; v <= 100; ++v) holder.Publish(SampleView(v));
  EXPECT_EQ(holder.kept(), 101u);  // the initial empty view too
  EXPECT_EQ(first->version, 1u);
}

TEST(MembershipHolder, ReadersSeeWholeViewsWithNonDecreasingVersionsWhilePublishing) {
  MembershipHolder holder;
  constexpr uint64_t kViews = 2000;
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&] {
      uint64_t last = 0;
      while (!done.load()) {
        const MembershipView* v = holder.Get();
        // Every published view (but the initial one) has 7 nodes, sorted, and the
        // version number of the view in its ports.
        bool whole = v->version == 0 ? v->nodes.empty()
                                     : v->nodes.size() == 7 && v->nodes.front().id == 1 &&
                                           v->nodes.back().id == 13 &&
                                           v->nodes[3].port == static_cast<int>(v->version);
        if (!whole || v->version < last) ++bad;
        last = v->version;
      }
    });
  }
  for (uint64_t version = 1; version <= kViews; ++version) {
    MembershipView view = SampleView(version);
    view.nodes[3].port = static_cast<int>(version);
    holder.Publish(std::move(view));
  }
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(holder.Get()->version, kViews);
}

TEST(NodeIds, ServersAreEvenIdsFromEightWorkersOddIdsFromNine) {
  for (int id : {8, 10, 12, 1000}) {
    EXPECT_TRUE(IsServerId(id)) << id;
    EXPECT_FALSE(IsWorkerId(id)) << id;
  }
  for (int id : {9, 11, 13, 1001}) {
    EXPECT_TRUE(IsWorkerId(id)) << id;
    EXPECT_FALSE(IsServerId(id)) << id;
  }
  // The scheduler and the group ids (1..7) are neither; nor are negative ids.
  for (int id : {0, 1, 2, 4, 6, 7, -8, -9}) {
    EXPECT_FALSE(IsServerId(id)) << id;
    EXPECT_FALSE(IsWorkerId(id)) << id;
  }
}

}  // namespace
}  // namespace ps
