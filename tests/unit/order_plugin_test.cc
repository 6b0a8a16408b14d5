// OrderPlugin (ps/services/order_plugin.h), the scheduler plugin that runs CD-GraB's balancer,
// driven through a fake PluginContext as the order clients would drive it: the orders it
// pushes are the PairBalancer's (fed directly, in processing order) whatever the
// interleaving of the workers' messages; what it buffers, refuses, and whom it stops
// waiting for. Also the wire codec of ps/internal/order_protocol.h.
#include "order_plugin.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ps/base.h"
#include "ps/internal/order_balancer.h"
#include "ps/internal/order_protocol.h"

namespace ps {
namespace {

using Orders = std::vector<std::vector<int>>;                // [worker][position]
using Grads = std::vector<std::vector<std::vector<float>>>;  // [worker][example][dim]

constexpr uint64_t kSeed = 7;

class FakeContext : public PluginContext {
 public:
  struct Sent {
    int to, head;
    std::string body;
  };
  void Respond(const SimpleData& request, const std::string& /*body*/) override {
    answers.push_back(request.sender);
  }
  void RespondError(const SimpleData& request, const Status& status) override {
    errors.push_back(std::to_string(request.sender) + ": " + status.message());
  }
  int Notify(int node_or_group, int head, const std::string& body) override {
    pushes.push_back({node_or_group, head, body});
    return 0;
  }
  const MembershipView& membership() const override { return view; }
  int app_id() const override { return kOrderAppId; }

  MembershipView view;
  std::vector<int> answers;
  std::vector<std::string> errors;
  std::vector<Sent> pushes;
};

Node MakeNode(int id, Node::Role role, int rank) {
  Node n;
  n.id = id;
  n.role = role;
  n.rank = rank;
  n.state = Node::kLive;
  return n;
}

int WorkerId(int rank) { return 9 + 2 * rank; }

Grads RandomGrads(int m, int n, int dim, uint64_t seed) {
  std::mt19937_64 gen(seed);
  Grads g(m, std::vector<std::vector<float>>(n, std::vector<float>(dim)));
  for (auto& worker : g)
    for (auto& example : worker)
      for (float& x : example)
        x = static_cast<float>(static_cast<double>(gen() >> 11) * 0x1.0p-52 - 1);
  return g;
}

// Pairs [first, first + count) of worker i visiting `order`, computed in float as the
// client does.
std::vector<float> Diffs(const Grads& g, int i, const std::vector<int>& order, int first,
                         int count) {
  std::vector<float> d;
  for (int k = first; k < first + count; ++k) {
    const auto& a = g[i][order[2 * k]];
    const auto& b = g[i][order[2 * k + 1]];
    for (size_t j = 0; j < a.size(); ++j) d.push_back(a[j] - b[j]);
  }
  return d;
}

// The next orders of one epoch from a PairBalancer fed directly, in processing order;
// empty rows of `orders` are workers absent from the epoch, and sent[i] (if given) cuts
// worker i's pairs short: it is removed after them.
Orders Direct(const Orders& orders, const Grads& g, std::vector<int> sent = {}) {
  const int m = orders.size(), dim = g[0][0].size();
  int n = 0;
  for (const auto& o : orders) n = std::max(n, static_cast<int>(o.size()));
  PairBalancer b(m, n, dim, kSeed);
  EXPECT_TRUE(b.BeginEpoch(orders).ok());
  if (sent.empty()) sent.assign(m, n / 2);
  for (int k = 0; k < n / 2; ++k) {
    for (int i = 0; i < m; ++i) {
      if (orders[i].empty()) continue;
      if (k == sent[i]) {
        EXPECT_TRUE(b.RemoveWorker(i).ok());
      }
      if (k >= sent[i]) continue;
      std::vector<float> d = Diffs(g, i, orders[i], k, 1);
      EXPECT_TRUE(b.AddPair(i, k, d.data(), d.size()).ok());
    }
  }
  Orders next(m);
  for (int i = 0; i < m; ++i) {
    if (!orders[i].empty()) {
      EXPECT_TRUE(b.NextOrder(i, &next[i]).ok()) << "worker " << i;
    }
  }
  return next;
}

// Scheduler 1, server 8, workers of ranks 0..m-1 (ids 9, 11, ...).
class OrderPluginTest : public ::testing::Test {
 protected:
  void Start(int m, int n, int dim) {
    m_ = m;
    n_ = n;
    dim_ = dim;
    ctx.view.version = 1;
    ctx.view.nodes = {MakeNode(1, Node::kSchedulerRole, 0), MakeNode(8, Node::kServerRole, 0)};
    for (int r = 0; r < m; ++r) {
      ctx.view.nodes.push_back(MakeNode(WorkerId(r), Node::kWorkerRole, r));
    }
    plugin->OnStart(&ctx);
    g = RandomGrads(m, n, dim, 42);
  }
  void Send(int sender, int head, const std::string& body) {
    SimpleData req;
    req.sender = sender;
    req.head = head;
    req.body = body;
    plugin->OnRequest(req, &ctx);
  }
  void Begin(int rank, int64_t epoch, const std::vector<int>& order) {
    Send(WorkerId(rank), kOrderBegin, EncodeOrderBegin({epoch, n_, dim_, kSeed, order}));
  }
  void Pairs(int rank, int64_t epoch, const std::vector<int>& order, int first, int count) {
    std::vector<float> d = Diffs(g, rank, order, first, count);
    Send(WorkerId(rank), kOrderPairs, EncodeOrderPairs(epoch, first, count, d.data(), d.size()));
  }
  void Finish(int rank) { Send(WorkerId(rank), kOrderFinish, ""); }
  void SetState(int rank, Node::State state) {
    for (Node& node : ctx.view.nodes) {
      if (node.id == WorkerId(rank)) node.state = state;
    }
    ++ctx.view.version;
    plugin->OnMembershipChange(ctx.view, &ctx);
  }
  // The orders pushed so far, by rank and epoch.
  std::map<int, std::map<int64_t, std::vector<int>>> Pushed() const {
    std::map<int, std::map<int64_t, std::vector<int>>> out;
    for (const auto& p : ctx.pushes) {
      EXPECT_EQ(p.head, kOrderNext);
      OrderNext next;
      EXPECT_TRUE(DecodeOrderNext(p.body, &next).ok());
      EXPECT_EQ(out[(p.to - 9) / 2].count(next.epoch), 0u) << "pushed twice";
      out[(p.to - 9) / 2][next.epoch] = next.order;
    }
    return out;
  }
  std::vector<int> PushedOrder(int rank, int64_t epoch) const {
    auto pushed = Pushed();
    auto it = pushed[rank].find(epoch);
    return it == pushed[rank].end() ? std::vector<int>() : it->second;
  }
  Orders FirstOrders() const {
    Orders o(m_);
    for (int i = 0; i < m_; ++i) o[i] = DrrOrder(n_, kSeed, i, 0);
    return o;
  }

  // A fresh plugin and context, for a test that runs several jobs.
  void Reset() {
    plugin = std::make_unique<OrderPlugin>();
    ctx = FakeContext();
  }

  std::unique_ptr<OrderPlugin> plugin = std::make_unique<OrderPlugin>();
  FakeContext ctx;
  Grads g;
  int m_ = 0, n_ = 0, dim_ = 0;
};

TEST_F(OrderPluginTest, NextOrdersEqualThePairBalancerFedDirectlyOverThreeEpochs) {
  Start(3, 10, 4);
  Orders orders = FirstOrders();
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    for (int i = 0; i < 3; ++i) Begin(i, epoch, orders[i]);
    EXPECT_EQ(plugin->epoch(), epoch);
    // Worker 2 races ahead, worker 0 lags, in batches of different sizes.
    Pairs(2, epoch, orders[2], 0, 5);
    Pairs(1, epoch, orders[1], 0, 2);
    Pairs(0, epoch, orders[0], 0, 1);
    Pairs(1, epoch, orders[1], 2, 3);
    Pairs(0, epoch, orders[0], 1, 4);
    Orders expected = Direct(orders, g);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(PushedOrder(i, epoch + 1), expected[i]) << "epoch " << epoch << " worker " << i;
    }
    orders = expected;
  }
  EXPECT_TRUE(ctx.errors.empty()) << ctx.errors[0];
  EXPECT_EQ(plugin->buffered_pairs(), 0u);
}

TEST_F(OrderPluginTest, AnOrderIsPushedAsSoonAsItIsReadyNotAtTheEndOfTheEpoch) {
  Start(3, 4, 2);
  Orders orders = FirstOrders();
  for (int i = 0; i < 3; ++i) Begin(i, 0, orders[i]);
  Pairs(0, 0, orders[0], 0, 2);
  Pairs(1, 0, orders[1], 0, 1);
  Pairs(2, 0, orders[2], 0, 1);
  ASSERT_EQ(ctx.pushes.size(), 1u) << "worker 0's last pair is processed: its order is known";
  EXPECT_EQ(ctx.pushes[0].to, WorkerId(0));
  Pairs(2, 0, orders[2], 1, 1);
  EXPECT_EQ(ctx.pushes.size(), 1u) << "worker 2's last pair waits for worker 1's";
  Pairs(1, 0, orders[1], 1, 1);
  EXPECT_EQ(ctx.pushes.size(), 3u);
}

TEST_F(OrderPluginTest, PairsBeforeTheEpochStartsAreBufferedAndGiveTheSameOrders) {
  Start(3, 8, 3);
  Orders orders = FirstOrders();
  // Epoch 0: worker 0 sends everything before the others have begun.
  Begin(0, 0, orders[0]);
  Pairs(0, 0, orders[0], 0, 4);
  EXPECT_EQ(plugin->epoch(), -1);
  EXPECT_EQ(plugin->buffered_pairs(), 4u);
  Begin(1, 0, orders[1]);
  Begin(2, 0, orders[2]);
  EXPECT_EQ(plugin->epoch(), 0);
  Pairs(1, 0, orders[1], 0, 4);
  // Worker 2 lags: workers 0 and 1 have their orders; they begin epoch 1 and send all of
  // its pairs while epoch 0 is still open.
  Pairs(2, 0, orders[2], 0, 3);
  Orders next = Direct(orders, g);
  ASSERT_EQ(PushedOrder(0, 1), next[0]);
  ASSERT_EQ(PushedOrder(1, 1), next[1]);
  Begin(0, 1, next[0]);
  Begin(1, 1, next[1]);
  Pairs(0, 1, next[0], 0, 4);
  Pairs(1, 1, next[1], 0, 4);
  EXPECT_EQ(plugin->epoch(), 0);
  EXPECT_LE(plugin->buffered_pairs(), static_cast<size_t>((3 - 1) * (8 / 2)))
      << "the documented bound: (m - 1) * floor(n / 2)";
  EXPECT_EQ(plugin->buffered_pairs(), 8u);
  Pairs(2, 0, orders[2], 3, 1);
  ASSERT_EQ(PushedOrder(2, 1), next[2]);
  Begin(2, 1, next[2]);
  EXPECT_EQ(plugin->epoch(), 1);
  Pairs(2, 1, next[2], 0, 4);
  Orders after = Direct(next, g);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(PushedOrder(i, 2), after[i]) << "worker " << i;
  EXPECT_TRUE(ctx.errors.empty()) << ctx.errors[0];
}

TEST_F(OrderPluginTest, AnyInterleavingOfWellBehavedClientsGivesTheBalancersOrders) {
  // Clients that follow the protocol, stepped in a random order: whichever worker runs,
  // it sends its next batch, or begins its next epoch once its order came.
  const int m = 4, n = 7, epochs = 3;  // odd n: the last example stays out
  size_t most_waiting = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Reset();
    Start(m, n, 2);
    std::mt19937_64 rng(seed);
    std::vector<Orders> orders(1, FirstOrders());
    std::vector<int64_t> epoch(m, 0);
    std::vector<int> sent(m, 0);
    size_t peak = 0;
    for (int i = 0; i < m; ++i) Begin(i, 0, orders[0][i]);
    for (int steps = 0; steps < 10000; ++steps) {
      const int i = static_cast<int>(rng() % m);
      if (epoch[i] == epochs) continue;
      if (sent[i] < n / 2) {
        const int count = std::min<int>(n / 2 - sent[i], 1 + rng() % 2);
        Pairs(i, epoch[i], orders[epoch[i]][i], sent[i], count);
        sent[i] += count;
      } else {
        std::vector<int> next = PushedOrder(i, epoch[i] + 1);
        if (next.empty()) continue;
        if (orders.size() <= static_cast<size_t>(epoch[i] + 1)) orders.emplace_back(m);
        orders[epoch[i] + 1][i] = next;
        ++epoch[i];
        sent[i] = 0;
        if (epoch[i] < epochs) Begin(i, epoch[i], next);
      }
      peak = std::max(peak, plugin->buffered_pairs());
    }
    ASSERT_EQ(epoch, std::vector<int64_t>(m, epochs)) << "seed " << seed;
    for (int e = 0; e < epochs; ++e) {
      EXPECT_EQ(orders[e + 1], Direct(orders[e], g)) << "seed " << seed << " epoch " << e;
    }
    EXPECT_LE(peak, static_cast<size_t>((m - 1) * (n / 2))) << "seed " << seed;
    EXPECT_TRUE(ctx.errors.empty()) << ctx.errors[0];
    most_waiting = std::max(most_waiting, peak);
  }
  EXPECT_EQ(most_waiting, static_cast<size_t>((m - 1) * (n / 2)))
      << "some interleaving reaches the bound: it is tight";
}

TEST_F(OrderPluginTest, ADeadWorkerUnblocksTheOthersAndIsLeftOutOfLaterEpochs) {
  Start(3, 8, 2);
  Orders orders = FirstOrders();
  for (int i = 0; i < 3; ++i) Begin(i, 0, orders[i]);
  Pairs(0, 0, orders[0], 0, 4);
  Pairs(1, 0, orders[1], 0, 2);  // worker 1 dies after 2 of 4 pairs
  Pairs(2, 0, orders[2], 0, 4);
  EXPECT_TRUE(ctx.pushes.empty()) << "everyone waits for worker 1's pair 2";
  SetState(1, Node::kDead);
  Orders next = Direct(orders, g, {4, 2, 4});
  EXPECT_EQ(PushedOrder(0, 1), next[0]);
  EXPECT_EQ(PushedOrder(2, 1), next[2]);
  EXPECT_TRUE(PushedOrder(1, 1).empty()) << "nothing goes to a dead worker";
  // Epoch 1 starts without it.
  Begin(0, 1, next[0]);
  Begin(2, 1, next[2]);
  EXPECT_EQ(plugin->epoch(), 1);
  Pairs(0, 1, next[0], 0, 4);
  Pairs(2, 1, next[2], 0, 4);
  Orders after = Direct({next[0], {}, next[2]}, g);
  EXPECT_EQ(PushedOrder(0, 2), after[0]);
  EXPECT_EQ(PushedOrder(2, 2), after[2]);
  // Anything from the dead worker is refused.
  size_t errors = ctx.errors.size();
  Pairs(1, 0, orders[1], 2, 1);
  EXPECT_EQ(ctx.errors.size(), errors + 1);
}

TEST_F(OrderPluginTest, AWorkerThatLeavesBeforeBeginningIsNotWaitedFor) {
  Start(3, 4, 2);
  Orders orders = FirstOrders();
  Begin(0, 0, orders[0]);
  Begin(2, 0, orders[2]);
  EXPECT_EQ(plugin->epoch(), -1) << "worker 1 is alive: waited for";
  SetState(1, Node::kLeft);
  EXPECT_EQ(plugin->epoch(), 0);
  Pairs(0, 0, orders[0], 0, 2);
  Pairs(2, 0, orders[2], 0, 2);
  Orders next = Direct({orders[0], {}, orders[2]}, g);
  EXPECT_EQ(PushedOrder(0, 1), next[0]);
  EXPECT_EQ(PushedOrder(2, 1), next[2]);
}

TEST_F(OrderPluginTest, AFinishedWorkerKeepsItsCompleteEpochAndIsRemovedFromAnIncompleteOne) {
  Start(3, 6, 2);
  Orders orders = FirstOrders();
  for (int i = 0; i < 3; ++i) Begin(i, 0, orders[i]);
  Pairs(1, 0, orders[1], 0, 3);
  Finish(1);  // all its pairs are in: they still count, deterministically
  Pairs(2, 0, orders[2], 0, 3);
  Pairs(0, 0, orders[0], 0, 3);
  Orders next = Direct(orders, g);
  EXPECT_EQ(PushedOrder(0, 1), next[0]);
  EXPECT_EQ(PushedOrder(2, 1), next[2]);
  EXPECT_TRUE(PushedOrder(1, 1).empty()) << "a finished worker gets no order";
  Begin(0, 1, next[0]);
  Begin(2, 1, next[2]);
  EXPECT_EQ(plugin->epoch(), 1) << "a finished worker is not waited for";
  Pairs(0, 1, next[0], 0, 1);
  Finish(0);  // mid-epoch: removed, its pair 0 stays in h
  Pairs(2, 1, next[2], 0, 3);
  Orders after = Direct({next[0], {}, next[2]}, g, {1, 0, 3});
  EXPECT_EQ(PushedOrder(2, 2), after[2]);
  Finish(0);  // idempotent
  EXPECT_TRUE(ctx.errors.empty()) << ctx.errors[0];
  Begin(0, 2, after[0]);
  EXPECT_EQ(ctx.errors.size(), 1u) << "a finished worker begins no more epochs";
}

TEST_F(OrderPluginTest, WrongEpochsAndPairsOutOfTurnAreRefusedAndChangeNothing) {
  Start(2, 4, 2);
  Orders orders = FirstOrders();
  Pairs(0, 0, orders[0], 0, 1);  // before its kOrderBegin
  Begin(0, 1, orders[0]);        // epoch 1 first
  Begin(0, 0, orders[0]);
  Begin(0, 0, orders[0]);  // epoch 0 twice
  Begin(0, 1, orders[0]);  // epoch 1 before its order for it was sent
  Begin(1, 0, orders[1]);
  Pairs(0, 1, orders[0], 0, 1);  // a future epoch
  Pairs(0, 0, orders[0], 1, 1);  // skips pair 0
  Pairs(0, 0, orders[0], 0, 1);
  Pairs(0, 0, orders[0], 0, 1);  // pair 0 twice
  std::vector<float> two = Diffs(g, 0, orders[0], 0, 2);
  Send(WorkerId(0), kOrderPairs,
       EncodeOrderPairs(0, 1, 2, two.data(), two.size()));  // past the last
  EXPECT_EQ(ctx.errors.size(), 8u);
  for (const std::string& e : ctx.errors) EXPECT_NE(e.find("worker 0"), std::string::npos) << e;
  // The valid messages counted, the refused ones did not.
  Pairs(0, 0, orders[0], 1, 1);
  Pairs(1, 0, orders[1], 0, 2);
  Orders next = Direct(orders, g);
  EXPECT_EQ(PushedOrder(0, 1), next[0]);
  EXPECT_EQ(PushedOrder(1, 1), next[1]);
  EXPECT_EQ(ctx.errors.size(), 8u);
  Pairs(0, 0, orders[0], 0, 1);  // pair 0 again, after the last
  EXPECT_EQ(ctx.errors.size(), 9u);
}

TEST_F(OrderPluginTest, MalformedBodiesAndStrangersAreRefusedAndChangeNothing) {
  Start(2, 4, 2);
  Orders orders = FirstOrders();
  const int w0 = WorkerId(0);
  Send(w0, kOrderBegin, "");
  Send(w0, kOrderBegin, std::string(23, '\0'));
  std::string begin = EncodeOrderBegin({0, 4, 2, kSeed, orders[0]});
  Send(w0, kOrderBegin, begin.substr(0, begin.size() - 1));
  Send(w0, kOrderBegin, begin + "x");
  Send(w0, kOrderBegin, EncodeOrderBegin({0, 4, 2, kSeed, {0, 1, 2, 2}}));  // not a permutation
  Send(w0, kOrderBegin, EncodeOrderBegin({0, 4, 2, kSeed, {0, 1, 2, 4}}));  // out of range
  Send(w0, kOrderBegin, EncodeOrderBegin({0, 0, 2, kSeed, {}}));            // no examples
  Send(w0, kOrderBegin, EncodeOrderBegin({0, 4, 0, kSeed, orders[0]}));     // dim 0
  std::string negative = EncodeOrderBegin({0, 4, 2, kSeed, orders[0]});
  int32_t minus = -1;
  std::memcpy(&negative[8], &minus, 4);
  Send(w0, kOrderBegin, negative);
  Send(w0, 99, "");              // unknown command
  Send(8, kOrderBegin, begin);   // a server
  Send(21, kOrderBegin, begin);  // not in the job
  EXPECT_EQ(ctx.errors.size(), 12u);
  EXPECT_EQ(plugin->epoch(), -1);

  Begin(0, 0, orders[0]);
  // Another worker with other options.
  Send(WorkerId(1), kOrderBegin, EncodeOrderBegin({0, 6, 2, kSeed, DrrOrder(6, kSeed, 1, 0)}));
  Send(WorkerId(1), kOrderBegin, EncodeOrderBegin({0, 4, 3, kSeed, orders[1]}));
  Send(WorkerId(1), kOrderBegin, EncodeOrderBegin({0, 4, 2, kSeed + 1, orders[1]}));
  EXPECT_EQ(ctx.errors.size(), 15u);
  EXPECT_NE(ctx.errors.back().find("same options"), std::string::npos) << ctx.errors.back();
  Begin(1, 0, orders[1]);
  EXPECT_EQ(plugin->epoch(), 0);

  std::vector<float> d = Diffs(g, 0, orders[0], 0, 1);
  std::string pair = EncodeOrderPairs(0, 0, 1, d.data(), d.size());
  Send(w0, kOrderPairs, pair.substr(0, 15));
  Send(w0, kOrderPairs, pair.substr(0, pair.size() - 1));
  Send(w0, kOrderPairs, pair + "abcd");                          // one float more than count * dim
  Send(w0, kOrderPairs, EncodeOrderPairs(0, 0, 0, nullptr, 0));  // count 0
  std::string huge = pair;
  int32_t count = std::numeric_limits<int32_t>::max();
  std::memcpy(&huge[12], &count, 4);
  Send(w0, kOrderPairs, huge);
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> nan = d;
    nan[1] = bad;
    Send(w0, kOrderPairs, EncodeOrderPairs(0, 0, 1, nan.data(), nan.size()));
  }
  EXPECT_EQ(ctx.errors.size(), 22u);
  for (size_t e = 15; e < ctx.errors.size(); ++e) {
    EXPECT_EQ(ctx.errors[e].rfind(std::to_string(w0) + ": worker 0: ", 0), 0u) << ctx.errors[e];
  }
  // Nothing of it counted.
  Pairs(0, 0, orders[0], 0, 2);
  Pairs(1, 0, orders[1], 0, 2);
  Orders next = Direct(orders, g);
  EXPECT_EQ(PushedOrder(0, 1), next[0]);
  EXPECT_EQ(PushedOrder(1, 1), next[1]);
  EXPECT_EQ(ctx.errors.size(), 22u);
}

TEST_F(OrderPluginTest, AJobWhoseWorkersNeverTalkToItCostsNothing) {
  Start(3, 4, 2);
  SetState(2, Node::kLeft);
  SetState(0, Node::kDead);
  EXPECT_TRUE(ctx.pushes.empty());
  EXPECT_EQ(plugin->epoch(), -1);
}

TEST(OrderPluginRegistration, TheOrderAppIdIsReserved) {
  try {
    RegisterSchedulerPlugin(kOrderAppId, [] { return std::make_unique<OrderPlugin>(); });
    FAIL() << "registered a plugin on the reserved app id";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reserved for the order plugin"), std::string::npos)
        << e.what();
  }
}

TEST(OrderProtocol, BodiesRoundTrip) {
  OrderBegin b{3, 5, 2, 99, {4, 0, 3, 1, 2}}, b2;
  ASSERT_TRUE(DecodeOrderBegin(EncodeOrderBegin(b), &b2).ok());
  EXPECT_EQ(b2.epoch, 3);
  EXPECT_EQ(b2.num_examples, 5);
  EXPECT_EQ(b2.dim, 2);
  EXPECT_EQ(b2.seed, 99u);
  EXPECT_EQ(b2.order, b.order);

  std::vector<float> d = {1.5f, -2.0f, 0.25f, 8.0f};
  OrderPairs p;
  ASSERT_TRUE(DecodeOrderPairs(EncodeOrderPairs(7, 2, 2, d.data(), d.size()), 2, &p).ok());
  EXPECT_EQ(p.epoch, 7);
  EXPECT_EQ(p.first_pair, 2);
  EXPECT_EQ(p.count, 2);
  EXPECT_EQ(p.diffs, d);
  EXPECT_FALSE(DecodeOrderPairs(EncodeOrderPairs(7, 2, 2, d.data(), d.size()), 3, &p).ok())
      << "4 floats are not 2 pairs of 3";

  OrderNext next;
  ASSERT_TRUE(DecodeOrderNext(EncodeOrderNext(4, {1, 0, 2}), &next).ok());
  EXPECT_EQ(next.epoch, 4);
  EXPECT_EQ(next.order, (std::vector<int>{1, 0, 2}));
  std::string body = EncodeOrderNext(4, {1, 0, 2});
  for (size_t len = 0; len < body.size(); ++len) {
    EXPECT_FALSE(DecodeOrderNext(body.substr(0, len), &next).ok()) << len;
  }
  EXPECT_TRUE(IsPermutation({2, 0, 1}, 3));
  EXPECT_FALSE(IsPermutation({2, 0, 0}, 3));
  EXPECT_FALSE(IsPermutation({0, 1}, 3));
}

}  // namespace
}  // namespace ps
