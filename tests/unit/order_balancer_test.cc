// Example orders (ps/internal/order_balancer.h): CD-GraB's pair balancing, ID-GraB, D-RR and
// the random projection. Gradients here are fixed per example (grads[i][e] is the gradient of
// worker i's example e), so a worker visiting order pi sends pair k as
// grads[i][pi[2k]] - grads[i][pi[2k+1]], computed in float as a worker would.
#include "ps/internal/order_balancer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace ps {
namespace {

using Orders = std::vector<std::vector<int>>;                // [worker][position]
using Grads = std::vector<std::vector<std::vector<float>>>;  // [worker][example][dim]
using Signs = std::vector<std::vector<int>>;                 // [worker][pair]

struct Epoch {
  Orders next;
  Signs signs;
};

// Portable random numbers (the raw mt19937_64 stream is the same on every library).
class Random {
 public:
  explicit Random(uint64_t seed) : gen_(seed) {}
  double Uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }  // [0, 1)
  int Below(int bound) { return static_cast<int>(gen_() % static_cast<uint64_t>(bound)); }
  Grads Floats(int m, int n, int d) {
    return Make(m, n, d, [&] { return Uniform() * 2 - 1; });
  }
  Grads Integers(int m, int n, int d) {
    return Make(m, n, d, [&] { return Below(17) - 8.0; });
  }
  template <typename T>
  void Shuffle(std::vector<T>* v) {
    for (size_t i = v->size(); i > 1; --i) std::swap((*v)[i - 1], (*v)[Below(i)]);
  }

 private:
  template <typename F>
  Grads Make(int m, int n, int d, F value) {
    Grads g(m, std::vector<std::vector<float>>(n, std::vector<float>(d)));
    for (auto& worker : g)
      for (auto& example : worker)
        for (float& x : example) x = static_cast<float>(value());
    return g;
  }
  std::mt19937_64 gen_;
};

Orders RandomOrders(int m, int n, uint64_t seed) {
  Orders orders(m);
  for (int i = 0; i < m; ++i) orders[i] = DrrOrder(n, seed, i, 0);
  return orders;
}

std::vector<float> Diff(const Grads& g, int worker, const std::vector<int>& order, int pair) {
  const auto& a = g[worker][order[2 * pair]];
  const auto& b = g[worker][order[2 * pair + 1]];
  std::vector<float> d(a.size());
  for (size_t j = 0; j < a.size(); ++j) d[j] = a[j] - b[j];
  return d;
}

Epoch Collect(const PairBalancer& b) {
  Epoch e{Orders(b.num_workers()), Signs(b.num_workers())};
  for (int i = 0; i < b.num_workers(); ++i) {
    EXPECT_TRUE(b.NextOrder(i, &e.next[i]).ok()) << "worker " << i;
    for (int k = 0; k < b.num_pairs(); ++k) e.signs[i].push_back(b.Sign(i, k));
  }
  return e;
}

// One epoch of CD-GraB with every pair sent in processing order.
Epoch CdGrab(const Orders& orders, const Grads& g, PairBalancer* b) {
  EXPECT_TRUE(b->BeginEpoch(orders).ok());
  for (int k = 0; k < b->num_pairs(); ++k) {
    for (int i = 0; i < b->num_workers(); ++i) {
      std::vector<float> d = Diff(g, i, orders[i], k);
      EXPECT_TRUE(b->AddPair(i, k, d.data(), d.size()).ok());
    }
  }
  EXPECT_TRUE(b->EpochDone());
  return Collect(*b);
}

Epoch CdGrab(const Orders& orders, const Grads& g) {
  PairBalancer b(static_cast<int>(orders.size()), static_cast<int>(orders[0].size()),
                 static_cast<int>(g[0][0].size()));
  return CdGrab(orders, g, &b);
}

// ID-GraB: one single-worker balancer per worker, fed only that worker's gradients.
Epoch IdGrab(const Orders& orders, const Grads& g) {
  Epoch e;
  for (size_t i = 0; i < orders.size(); ++i) {
    Epoch own = CdGrab({orders[i]}, {g[i]});
    e.next.push_back(own.next[0]);
    e.signs.push_back(own.signs[0]);
  }
  return e;
}

// The rule of order_balancer.h, transcribed: one h (shared) or one per worker; worker i's pairs past
// sent[i] never arrive (it was removed then), and its row of `next` is then meaningless.
Epoch Reference(const Orders& pi, const Grads& g, bool shared, std::vector<int> sent = {}) {
  const int m = pi.size(), n = pi[0].size(), dim = g[0][0].size(), even = n - n % 2;
  if (sent.empty()) sent.assign(m, n / 2);
  std::vector<std::vector<double>> h(shared ? 1 : m, std::vector<double>(dim, 0.0));
  Epoch e{pi, Signs(m, std::vector<int>(n / 2, 0))};
  for (int k = 0; k < n / 2; ++k) {
    for (int i = 0; i < m; ++i) {
      if (k >= sent[i]) continue;
      std::vector<float> d = Diff(g, i, pi[i], k);
      std::vector<double>& hh = h[shared ? 0 : i];
      double dot = 0;
      for (int j = 0; j < dim; ++j) dot += hh[j] * d[j];
      const int s = dot <= 0 ? 1 : -1;
      for (int j = 0; j < dim; ++j) hh[j] += s * static_cast<double>(d[j]);
      e.signs[i][k] = s;
      e.next[i][k] = s > 0 ? pi[i][2 * k] : pi[i][2 * k + 1];
      e.next[i][even - 1 - k] = s > 0 ? pi[i][2 * k + 1] : pi[i][2 * k];
    }
  }
  return e;
}

bool IsPermutation(std::vector<int> order, int n) {
  std::sort(order.begin(), order.end());
  for (int e = 0; e < n; ++e)
    if (static_cast<int>(order.size()) != n || order[e] != e) return false;
  return static_cast<int>(order.size()) == n;
}

// Max over prefixes of the inf-norm of the running sum of the centred vectors, visited
// step outer, worker inner.
double ParallelHerdingBound(const Orders& orders, const Grads& g) {
  const int m = orders.size(), n = orders[0].size(), dim = g[0][0].size();
  std::vector<double> mean(dim, 0.0), sum(dim, 0.0);
  for (const auto& worker : g)
    for (const auto& example : worker)
      for (int j = 0; j < dim; ++j) mean[j] += example[j] / static_cast<double>(m * n);
  double bound = 0;
  for (int step = 0; step < n; ++step) {
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < dim; ++j) {
        sum[j] += g[i][orders[i][step]][j] - mean[j];
        bound = std::max(bound, std::fabs(sum[j]));
      }
    }
  }
  return bound;
}

TEST(CdGrabOrder, EveryNextOrderIsAPermutation) {
  Random rnd(1);
  for (int n : {0, 1, 2, 3, 4, 7, 10, 31}) {
    Orders orders = RandomOrders(3, n, n);
    Grads g = rnd.Floats(3, n, 4);
    PairBalancer b(3, n, 4);
    for (int epoch = 0; epoch < 3; ++epoch) {
      Epoch cd = CdGrab(orders, g, &b);
      Epoch id = n > 0 ? IdGrab(orders, g) : cd;
      for (int i = 0; i < 3; ++i) {
        EXPECT_TRUE(IsPermutation(cd.next[i], n)) << "n " << n << " worker " << i;
        EXPECT_TRUE(IsPermutation(id.next[i], n)) << "n " << n << " worker " << i;
        EXPECT_TRUE(IsPermutation(DrrOrder(n, 5, i, epoch), n)) << "n " << n;
      }
      orders = cd.next;
    }
  }
}

TEST(CdGrabOrder, PairAtPositions2kAnd2kPlus1LandsInSlotsKAndNMinus1MinusK) {
  Random rnd(2);
  for (int n : {8, 9}) {  // odd n: the pairs fill slots 0..n-2, the last example stays last
    Orders pi = RandomOrders(4, n, 7);
    Epoch cd = CdGrab(pi, rnd.Floats(4, n, 3));
    const int even = n - n % 2;
    for (int i = 0; i < 4; ++i) {
      for (int k = 0; k < n / 2; ++k) {
        const int plus = cd.signs[i][k] > 0 ? pi[i][2 * k] : pi[i][2 * k + 1];
        const int minus = cd.signs[i][k] > 0 ? pi[i][2 * k + 1] : pi[i][2 * k];
        EXPECT_EQ(cd.next[i][k], plus) << "worker " << i << " pair " << k;
        EXPECT_EQ(cd.next[i][even - 1 - k], minus) << "worker " << i << " pair " << k;
      }
      if (n % 2) {
        EXPECT_EQ(cd.next[i][n - 1], pi[i][n - 1]);
      }
    }
  }
}

TEST(CdGrabOrder, AllZeroGradientsGiveEvenPositionsInOrderThenOddPositionsReversed) {
  Orders pi = RandomOrders(2, 10, 3);
  Epoch cd = CdGrab(pi, Grads(2, std::vector<std::vector<float>>(10, std::vector<float>(5))));
  for (int i = 0; i < 2; ++i) {
    const std::vector<int>& p = pi[i];
    EXPECT_EQ(cd.next[i],
              (std::vector<int>{p[0], p[2], p[4], p[6], p[8], p[9], p[7], p[5], p[3], p[1]}));
    EXPECT_EQ(cd.signs[i], std::vector<int>(5, 1));  // <0, d> = 0 is a tie: +1
  }
  // Odd n: the same over the first n-1 positions, then the last one.
  Orders odd = RandomOrders(1, 7, 4);
  const std::vector<int>& p = odd[0];
  EXPECT_EQ(CdGrab(odd, Grads(1, std::vector<std::vector<float>>(7, {0.0f}))).next[0],
            (std::vector<int>{p[0], p[2], p[4], p[5], p[3], p[1], p[6]}));
}

TEST(CdGrabOrder, FollowsTheDesignRuleExactlyWithOneSharedSum) {
  Random rnd(3);
  for (int trial = 0; trial < 20; ++trial) {
    const int m = 1 + rnd.Below(6), n = 1 + rnd.Below(20), dim = 1 + rnd.Below(5);
    Orders pi = RandomOrders(m, n, trial);
    Grads g = trial % 2 ? rnd.Floats(m, n, dim) : rnd.Integers(m, n, dim);
    Epoch cd = CdGrab(pi, g), ref = Reference(pi, g, /*shared=*/true);
    EXPECT_EQ(cd.signs, ref.signs) << "trial " << trial;
    EXPECT_EQ(cd.next, ref.next) << "trial " << trial;
  }
}

// <h, d> <= 0 picks the sign and h starts at 0. Negating every gradient negates every d; by
// induction h is negated too, so every <h, d> and sign is unchanged. Doubling scales <h, d>
// by 4. Both are exact in floating point (sign flips and powers of two round identically).
TEST(CdGrabOrder, OrdersDoNotChangeWhenAllGradientsAreNegatedOrDoubled) {
  Random rnd(4);
  const Orders pi = RandomOrders(5, 40, 8);
  const Grads g = rnd.Floats(5, 40, 6);
  Grads negated = g, doubled = g;
  for (auto& w : negated)
    for (auto& e : w)
      for (float& x : e) x = -x;
  for (auto& w : doubled)
    for (auto& e : w)
      for (float& x : e) x *= 2;
  const Epoch base = CdGrab(pi, g);
  EXPECT_EQ(CdGrab(pi, negated).next, base.next);
  EXPECT_EQ(CdGrab(pi, doubled).next, base.next);
  EXPECT_EQ(CdGrab(pi, negated).signs, base.signs);
  EXPECT_EQ(IdGrab(pi, negated).next, IdGrab(pi, g).next);
  EXPECT_EQ(IdGrab(pi, doubled).next, IdGrab(pi, g).next);
}

// Only pair differences reach the balancer, and (a + c) - (b + c) = a - b. That holds
// exactly when the shifted floats are exact, as for these integer-valued gradients.
TEST(CdGrabOrder, OrdersDoNotChangeWhenAllGradientsAreShiftedByOneConstantVector) {
  Random rnd(5);
  const Orders pi = RandomOrders(5, 40, 9);
  const Grads g = rnd.Integers(5, 40, 6);
  Grads shifted = g;
  const std::vector<float> c = {3, -7, 100, 0, -1, 12};
  for (auto& w : shifted)
    for (auto& e : w)
      for (int j = 0; j < 6; ++j) e[j] += c[j];
  EXPECT_EQ(CdGrab(pi, shifted).next, CdGrab(pi, g).next);
  EXPECT_EQ(IdGrab(pi, shifted).next, IdGrab(pi, g).next);
}

// ...but not for arbitrary floats: a shift can round a tiny difference to 0, a tie.
TEST(CdGrabOrder, AShiftCanChangeTheOrderWhereFloatAdditionRounds) {
  const Orders pi = {{0, 1, 2, 3}};
  const Grads g = {{{1.0f}, {0.0f}, {1e-8f}, {0.0f}}};  // d = 1, then 1e-8: <h, d> > 0: -1
  const Grads shifted = {{{2.0f}, {1.0f}, {1.0f + 1e-8f}, {1.0f}}};  // 1 + 1e-8 == 1: d = 0: +1
  EXPECT_EQ(CdGrab(pi, g).next[0], (std::vector<int>{0, 3, 2, 1}));
  EXPECT_EQ(CdGrab(pi, shifted).next[0], (std::vector<int>{0, 2, 3, 1}));
}

TEST(CdGrabOrder, WithOneWorkerCdGrabEqualsIdGrab) {
  Random rnd(6);
  for (int n : {6, 33, 64}) {
    Orders pi = RandomOrders(1, n, n);
    Grads g = rnd.Floats(1, n, 7);
    EXPECT_EQ(CdGrab(pi, g).next, IdGrab(pi, g).next);
    EXPECT_EQ(CdGrab(pi, g).signs, Reference(pi, g, /*shared=*/false).signs);
  }
}

TEST(IdGrabOrder, AWorkersOrderDoesNotDependOnOtherWorkersGradients) {
  Random rnd(7);
  const Orders pi = RandomOrders(4, 30, 10);
  const Grads g = rnd.Floats(4, 30, 5);
  Grads others_changed = rnd.Floats(4, 30, 5);
  others_changed[2] = g[2];
  const Epoch id = IdGrab(pi, g), id_changed = IdGrab(pi, others_changed);
  EXPECT_EQ(id_changed.next[2], id.next[2]);
  EXPECT_EQ(id.signs, Reference(pi, g, /*shared=*/false).signs);
  // CD-GraB does couple them: worker 2's order there follows everyone's gradients.
  EXPECT_NE(CdGrab(pi, others_changed).next[2], CdGrab(pi, g).next[2]);
}

// The effect CD-GraB exists for, on fixed random vectors after a few epochs (m = 8,
// n = 64). It is a property of typical inputs, not of every one: after a single epoch from
// a random order it failed for 1 seed in 20 at this size; after 5 it held for all 20, CD-GraB's
// bound at 0.4-0.6x ID-GraB's and ID-GraB's at 0.3-0.75x D-RR's.
TEST(ParallelHerdingOrder, BoundEndsCdGrabBelowIdGrabBelowDrr) {
  const int m = 8, n = 64, dim = 8, epochs = 5;
  for (uint64_t seed : {1, 2, 3}) {
    Random rnd(seed);
    const Grads g = rnd.Floats(m, n, dim);
    Orders cd = RandomOrders(m, n, seed), id = cd, rr = cd;
    PairBalancer balancer(m, n, dim, seed);
    for (int epoch = 0; epoch < epochs; ++epoch) {
      cd = CdGrab(cd, g, &balancer).next;
      id = IdGrab(id, g).next;
      for (int i = 0; i < m; ++i) rr[i] = DrrOrder(n, seed, i, epoch + 1);
    }
    const double cd_bound = ParallelHerdingBound(cd, g);
    const double id_bound = ParallelHerdingBound(id, g);
    const double rr_bound = ParallelHerdingBound(rr, g);
    EXPECT_LT(cd_bound, id_bound) << "seed " << seed;
    EXPECT_LT(id_bound, rr_bound) << "seed " << seed;
  }
}

// Sends every pair of `g` for orders `pi` in a random interleaving that keeps each worker's
// own pairs in order, checking after each one that exactly the pairs behind the first
// missing one (in processing order) wait, and that no more wait than the lead over the
// slowest worker allows.
Epoch Scrambled(const Orders& pi, const Grads& g, Random* rnd, size_t* peak) {
  const int m = pi.size(), pairs = pi[0].size() / 2;
  PairBalancer b(m, pi[0].size(), g[0][0].size());
  EXPECT_TRUE(b.BeginEpoch(pi).ok());
  std::vector<int> arrivals;
  for (int i = 0; i < m; ++i) arrivals.insert(arrivals.end(), pairs, i);
  rnd->Shuffle(&arrivals);
  std::vector<int> sent(m, 0);
  for (int i : arrivals) {
    std::vector<float> d = Diff(g, i, pi[i], sent[i]);
    EXPECT_TRUE(b.AddPair(i, sent[i]++, d.data(), d.size()).ok());
    int first_missing = pairs * m;  // as k * m + i
    for (int w = 0; w < m; ++w) first_missing = std::min(first_missing, sent[w] * m + w);
    size_t waiting = 0;
    for (int w = 0; w < m; ++w)
      for (int k = 0; k < sent[w]; ++k) waiting += k * m + w > first_missing;
    const int slowest = *std::min_element(sent.begin(), sent.end());
    const int lead = *std::max_element(sent.begin(), sent.end()) - slowest;
    EXPECT_EQ(b.pending_pairs(), waiting);
    EXPECT_LE(b.pending_pairs(), static_cast<size_t>((m - 1) * lead));
    EXPECT_EQ(b.EpochDone(), first_missing == pairs * m);
  }
  *peak = b.peak_pending_pairs();
  return Collect(b);
}

TEST(OrderBalancerArrival, EarlyPairsAreBufferedAndProcessedInOrder) {
  Random rnd(8);
  for (int trial = 0; trial < 30; ++trial) {
    const int m = 1 + rnd.Below(5), n = 1 + 2 * rnd.Below(12) + rnd.Below(2);
    const Orders pi = RandomOrders(m, n, trial);
    const Grads g = rnd.Floats(m, n, 3);
    size_t peak = 0;
    const Epoch scrambled = Scrambled(pi, g, &rnd, &peak);
    EXPECT_EQ(scrambled.next, CdGrab(pi, g).next) << "trial " << trial;
    EXPECT_EQ(scrambled.signs, CdGrab(pi, g).signs) << "trial " << trial;
  }
}

TEST(OrderBalancerArrival, InLockstepAtMostOnePairPerOtherWorkerWaits) {
  const int m = 6, n = 20;
  Random rnd(9);
  const Orders pi = RandomOrders(m, n, 11);
  const Grads g = rnd.Floats(m, n, 4);
  PairBalancer b(m, n, 4);
  ASSERT_TRUE(b.BeginEpoch(pi).ok());
  for (int k = 0; k < n / 2; ++k) {
    std::vector<int> workers = {0, 1, 2, 3, 4, 5};
    rnd.Shuffle(&workers);  // pair k of every worker, in any order
    for (int i : workers) {
      std::vector<float> d = Diff(g, i, pi[i], k);
      ASSERT_TRUE(b.AddPair(i, k, d.data(), d.size()).ok());
    }
    EXPECT_EQ(b.pending_pairs(), 0u);
  }
  EXPECT_LE(b.peak_pending_pairs(), static_cast<size_t>(m - 1));
  EXPECT_EQ(Collect(b).next, CdGrab(pi, g).next);
}

TEST(OrderBalancerArrival, ASlowWorkerHoldsBackThePairsAfterItsFirstMissingOne) {
  const int m = 3, n = 8, pairs = n / 2;
  Random rnd(10);
  const Orders pi = RandomOrders(m, n, 12);
  const Grads g = rnd.Floats(m, n, 2);
  PairBalancer b(m, n, 2);
  ASSERT_TRUE(b.BeginEpoch(pi).ok());
  for (int i : {1, 2}) {
    for (int k = 0; k < pairs; ++k) {
      std::vector<float> d = Diff(g, i, pi[i], k);
      ASSERT_TRUE(b.AddPair(i, k, d.data(), d.size()).ok());
    }
  }
  EXPECT_EQ(b.pending_pairs(), 2u * pairs);
  std::vector<int> order;
  EXPECT_EQ(b.NextOrder(1, &order).code(), Status::Code::kUnavailable);
  for (int k = 0; k < pairs; ++k) {
    std::vector<float> d = Diff(g, 0, pi[0], k);
    ASSERT_TRUE(b.AddPair(0, k, d.data(), d.size()).ok());
    EXPECT_EQ(b.pending_pairs(), 2u * (pairs - 1 - k));
    EXPECT_EQ(b.OrderReady(0), k == pairs - 1);
  }
  EXPECT_TRUE(b.EpochDone());
  EXPECT_EQ(Collect(b).next, CdGrab(pi, g).next);
}

TEST(OrderBalancerArrival, AWorkersOrderIsReadyOnceItsLastPairIsProcessed) {
  const Orders pi = RandomOrders(2, 4, 13);
  const Grads g = Random(11).Floats(2, 4, 2);
  PairBalancer b(2, 4, 2);
  ASSERT_TRUE(b.BeginEpoch(pi).ok());
  for (auto [i, k] : {std::pair{0, 0}, {1, 0}, {0, 1}}) {
    std::vector<float> d = Diff(g, i, pi[i], k);
    ASSERT_TRUE(b.AddPair(i, k, d.data(), d.size()).ok());
  }
  std::vector<int> order;
  EXPECT_TRUE(b.NextOrder(0, &order).ok());
  EXPECT_EQ(order, CdGrab(pi, g).next[0]);
  Status s = b.NextOrder(1, &order);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_NE(s.message().find("worker 1's pair 1"), std::string::npos) << s;
  EXPECT_FALSE(b.EpochDone());
}

TEST(OrderBalancerArrival, RemovingAWorkerUnblocksTheRestAndItsOrderFallsBackToDrr) {
  const int m = 3, n = 10;
  Random rnd(12);
  const Orders pi = RandomOrders(m, n, 14);
  const Grads g = rnd.Floats(m, n, 3);
  PairBalancer b(m, n, 3, /*seed=*/77);
  ASSERT_TRUE(b.BeginEpoch(pi).ok());
  // Worker 1 sends pairs 0..1 and dies; the others send all five.
  for (int k = 0; k < n / 2; ++k) {
    for (int i = 0; i < m; ++i) {
      if (i == 1 && k >= 2) continue;
      std::vector<float> d = Diff(g, i, pi[i], k);
      ASSERT_TRUE(b.AddPair(i, k, d.data(), d.size()).ok());
    }
  }
  EXPECT_FALSE(b.EpochDone());
  EXPECT_GT(b.pending_pairs(), 0u);
  ASSERT_TRUE(b.RemoveWorker(1).ok());
  EXPECT_TRUE(b.RemoveWorker(1).ok());  // a death and a leave may both be reported
  EXPECT_TRUE(b.EpochDone());
  EXPECT_EQ(b.pending_pairs(), 0u);
  EXPECT_FALSE(b.IsActive(1));
  const Epoch got = Collect(b), want = Reference(pi, g, /*shared=*/true, {5, 2, 5});
  EXPECT_EQ(got.next[0], want.next[0]);
  EXPECT_EQ(got.next[2], want.next[2]);
  EXPECT_EQ(got.signs, want.signs);  // worker 1: its two pairs, then 0s
  EXPECT_EQ(got.next[1], DrrOrder(n, 77, 1, b.epoch() + 1));
  std::vector<float> d = Diff(g, 1, pi[1], 2);
  EXPECT_EQ(b.AddPair(1, 2, d.data(), d.size()).code(), Status::Code::kInvalidArgument);

  // Next epoch, an empty order: worker 1 is absent from the start.
  ASSERT_TRUE(b.BeginEpoch({got.next[0], {}, got.next[2]}).ok());
  const Epoch absent = CdGrab({got.next[0], got.next[2]}, {g[0], g[2]});
  for (int k = 0; k < n / 2; ++k) {
    for (int i : {0, 2}) {
      d = Diff(g, i, got.next[i], k);
      ASSERT_TRUE(b.AddPair(i, k, d.data(), d.size()).ok());
    }
  }
  const Epoch second = Collect(b);
  EXPECT_EQ(second.next[0], absent.next[0]);
  EXPECT_EQ(second.next[2], absent.next[1]);
  EXPECT_EQ(second.next[1], DrrOrder(n, 77, 1, 2));
}

TEST(OrderBalancerInput, BadInputIsRefusedWithAStatusAndChangesNothing) {
  const int m = 2, n = 6;
  const Orders pi = RandomOrders(m, n, 15);
  const Grads g = Random(13).Floats(m, n, 3);
  PairBalancer b(m, n, 3);
  std::vector<float> d = Diff(g, 0, pi[0], 0);
  std::vector<int> next;
  auto invalid = [](const Status& s) { return s.code() == Status::Code::kInvalidArgument; };
  EXPECT_TRUE(invalid(b.AddPair(0, 0, d.data(), 3)));  // before BeginEpoch
  EXPECT_TRUE(invalid(b.NextOrder(0, &next)));
  EXPECT_TRUE(invalid(b.BeginEpoch({pi[0]})));                      // one order for two
  EXPECT_TRUE(invalid(b.BeginEpoch({pi[0], {0, 1, 2, 3, 4}})));     // too short
  EXPECT_TRUE(invalid(b.BeginEpoch({pi[0], {0, 1, 2, 3, 4, 4}})));  // repeated
  EXPECT_TRUE(invalid(b.BeginEpoch({pi[0], {0, 1, 2, 3, 4, 6}})));  // out of range
  EXPECT_TRUE(invalid(b.BeginEpoch({pi[0], {0, 1, 2, 3, 4, -1}})));
  EXPECT_EQ(b.epoch(), -1);
  ASSERT_TRUE(b.BeginEpoch(pi).ok());

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> with_nan = {0, nan, 0}, with_inf = {inf, 0, 0};
  EXPECT_TRUE(invalid(b.AddPair(-1, 0, d.data(), 3)));  // no such worker
  EXPECT_TRUE(invalid(b.AddPair(m, 0, d.data(), 3)));
  EXPECT_TRUE(invalid(b.AddPair(0, 1, d.data(), 3)));  // pair 0 comes first
  EXPECT_TRUE(invalid(b.AddPair(0, -1, d.data(), 3)));
  EXPECT_TRUE(invalid(b.AddPair(0, 0, d.data(), 2)));  // wrong dimension
  EXPECT_TRUE(invalid(b.AddPair(0, 0, d.data(), 4)));
  EXPECT_TRUE(invalid(b.AddPair(0, 0, nullptr, 3)));
  EXPECT_TRUE(invalid(b.AddPair(0, 0, with_nan.data(), 3)));
  EXPECT_TRUE(invalid(b.AddPair(0, 0, with_inf.data(), 3)));
  EXPECT_TRUE(invalid(b.RemoveWorker(-1)));
  EXPECT_TRUE(invalid(b.RemoveWorker(m)));
  EXPECT_TRUE(invalid(b.NextOrder(m, &next)));
  EXPECT_EQ(b.pending_pairs(), 0u);
  EXPECT_EQ(b.Sign(0, 0), 0);

  // None of that left a trace: the epoch runs as if it had not happened.
  for (int k = 0; k < n / 2; ++k) {
    for (int i = 0; i < m; ++i) {
      d = Diff(g, i, pi[i], k);
      ASSERT_TRUE(b.AddPair(i, k, d.data(), d.size()).ok());
      EXPECT_TRUE(invalid(b.AddPair(i, k, d.data(), d.size())));  // a duplicate
    }
  }
  EXPECT_TRUE(invalid(b.AddPair(0, n / 2, d.data(), d.size())));  // past the last pair
  const Epoch got = Collect(b), want = CdGrab(pi, g);
  EXPECT_EQ(got.next, want.next);
  EXPECT_EQ(got.signs, want.signs);
}

TEST(OrderBalancerInput, SizesThatMakeNoSenseThrowAtConstruction) {
  EXPECT_THROW(PairBalancer(0, 4, 1), Error);
  EXPECT_THROW(PairBalancer(2, -1, 1), Error);
  EXPECT_THROW(PairBalancer(2, 4, 0), Error);
  EXPECT_THROW(RandomProjection(0, 4, 1), Error);
  EXPECT_THROW(RandomProjection(4, 0, 1), Error);
}

TEST(DrrOrder, IsAPermutationFixedBySeedWorkerAndEpoch) {
  EXPECT_EQ(DrrOrder(50, 1, 2, 3), DrrOrder(50, 1, 2, 3));
  EXPECT_NE(DrrOrder(50, 1, 2, 3), DrrOrder(50, 2, 2, 3));
  EXPECT_NE(DrrOrder(50, 1, 2, 3), DrrOrder(50, 1, 3, 3));
  EXPECT_NE(DrrOrder(50, 1, 2, 3), DrrOrder(50, 1, 2, 4));
  EXPECT_TRUE(IsPermutation(DrrOrder(50, 1, 2, 3), 50));
  EXPECT_TRUE(DrrOrder(0, 1, 2, 3).empty());
  EXPECT_EQ(DrrOrder(1, 1, 2, 3), std::vector<int>{0});
}

// Pinned values: a change to the generator, the mixing or the shuffle shows up here, and so
// would a standard library whose mt19937_64 disagreed (the standard fixes its output).
TEST(DrrOrder, IsTheSameOnEveryStandardLibrary) {
  EXPECT_EQ(DrrOrder(10, 42, 0, 0), (std::vector<int>{9, 2, 4, 8, 5, 7, 1, 0, 6, 3}));
  EXPECT_EQ(DrrOrder(10, 42, 3, 7), (std::vector<int>{0, 2, 7, 4, 6, 9, 5, 1, 8, 3}));
}

TEST(DrrOrder, EveryOrderOfThreeIsAboutEquallyLikely) {
  std::vector<int> count(6, 0);
  const int draws = 60000;
  for (int epoch = 0; epoch < draws; ++epoch) {
    std::vector<int> o = DrrOrder(3, 9, 0, epoch);
    ++count[o[0] * 2 + (o[1] > o[2])];
  }
  for (int c : count) EXPECT_NEAR(c, draws / 6, 400);  // ~4.5 standard deviations
}

TEST(RandomProjectionOrder, IsTheSameForTheSameSeedAndHasEntriesPlusMinusOneOverRootK) {
  const int in = 300, k = 70;  // two 64-bit words per column, the second one partial
  RandomProjection p(in, k, 5), same(in, k, 5), other(in, k, 6);
  std::vector<float> unit(in, 0.0f), a(k), b(k), c(k);
  bool differs = false;
  for (int col : {0, 1, 299}) {
    std::fill(unit.begin(), unit.end(), 0.0f);
    unit[col] = 1;
    ASSERT_TRUE(p.Project(unit.data(), in, a.data(), k).ok());
    ASSERT_TRUE(same.Project(unit.data(), in, b.data(), k).ok());
    ASSERT_TRUE(other.Project(unit.data(), in, c.data(), k).ok());
    EXPECT_EQ(a, b);
    differs |= a != c;
    for (float x : a) EXPECT_FLOAT_EQ(std::fabs(x), 1 / std::sqrt(70.0f));
  }
  EXPECT_TRUE(differs);
}

TEST(RandomProjectionOrder, RoughlyPreservesInnerProductsAndCommutesWithDifferences) {
  const int in = 2000, k = 512;
  Random rnd(14);
  Grads v = rnd.Floats(1, 2, in);
  const std::vector<float>& x = v[0][0];
  const std::vector<float>& y = v[0][1];
  std::vector<float> diff(in), px(k), py(k), pd(k);
  for (int j = 0; j < in; ++j) diff[j] = x[j] - y[j];
  RandomProjection p(in, k, 1);
  ASSERT_TRUE(p.Project(x.data(), in, px.data(), k).ok());
  ASSERT_TRUE(p.Project(y.data(), in, py.data(), k).ok());
  ASSERT_TRUE(p.Project(diff.data(), in, pd.data(), k).ok());
  double norm = 0, pnorm = 0;
  for (int j = 0; j < in; ++j) norm += static_cast<double>(diff[j]) * diff[j];
  for (int r = 0; r < k; ++r) {
    pnorm += static_cast<double>(pd[r]) * pd[r];
    EXPECT_NEAR(pd[r], px[r] - py[r], 1e-4);
  }
  EXPECT_NEAR(pnorm / norm, 1.0, 0.25);  // JL: ~sqrt(2 / k) = 0.06 relative spread
  EXPECT_EQ(p.Project(x.data(), in - 1, px.data(), k).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(p.Project(x.data(), in, px.data(), k + 1).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace ps
