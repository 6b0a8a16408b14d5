// Integration: example orders through the public OrderClient (ps/order_client.h), with
// cdgrab through the scheduler's order plugin, and the local baselines.
//
// Worker r has n synthetic examples; the gradient of example e is a fixed pseudo-random
// vector, a function of (r, e) only. Each worker visits its examples in the client's
// order, reports each gradient (with a random pause, so that the workers interleave
// differently every run), and at the end of each epoch checks its next order:
//  - it is a permutation of 0..n-1, and differs from the previous one (except `fixed`);
//  - it equals what this worker computes itself: every worker's gradients and epoch-0
//    orders are known to all, so for cdgrab it runs a PairBalancer over all workers'
//    pairs (the plugin's own rule, fed in processing order), for idgrab one over its own,
//    for rr it takes DrrOrder.
// With --sparse the gradients have zeros and go through ReportSparse; the reference
// balances the same gradients dense, so the orders match only if both report alike.
// First it checks that misuse (a position out of turn, a wrong length, a non-finite
// gradient, NextEpoch too early) is refused and changes nothing.
//
// --leave_rank R --leave_after E --leave_how finish|finalize|kill: worker R stops after
// E epochs (finish: OrderClient::Finish, then waits in Finalize's barrier; finalize:
// leaves the job at once; kill: SIGKILL halfway through epoch E, once its first batches
// are out). The others must run all their epochs, with orders that account for R exactly:
// R counts in the epochs it completed, with the pairs it sent in the one it died in, and
// not after.
#include <gflags/gflags.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ps/internal/order_balancer.h"
#include "ps/order_client.h"
#include "ps/ps.h"

DEFINE_string(algorithm, "cdgrab", "rr | idgrab | cdgrab | fixed");
DEFINE_int32(epochs, 3, "epochs every worker runs");
DEFINE_int32(examples, 64, "examples per worker (n)");
DEFINE_int32(dim, 8, "floats per gradient");
DEFINE_int32(projection, 0, "OrderOptions::projection_dim");
DEFINE_int32(batch_pairs, 16, "OrderOptions::batch_pairs");
DEFINE_uint64(seed, 1, "OrderOptions::seed");
DEFINE_int32(max_delay_us, 300, "each step sleeps up to this long (random per step)");
DEFINE_int32(leave_rank, -1, "this worker stops early (see --leave_how)");
DEFINE_int32(leave_after, 1, "the number of epochs the leaving worker completes");
DEFINE_string(leave_how, "finalize", "finish | finalize | kill");
DEFINE_string(marker, "", "ignored: lets a test runner find its processes");
DEFINE_bool(sparse, false,
            "gradients with about half their entries 0, reported with ReportSparse (the "
            "nonzero entries only, last index first); the reference balances them dense");

namespace {

using Orders = std::vector<std::vector<int>>;                // [worker][position]
using Grads = std::vector<std::vector<std::vector<float>>>;  // [worker][example][dim]

// The gradient of worker r's example e: a function of (r, e) only.
std::vector<float> Gradient(int rank, int example) {
  std::mt19937_64 gen(1000003ULL * rank + example + 17);
  std::vector<float> g(FLAGS_dim);
  for (float& x : g) x = static_cast<float>(static_cast<double>(gen() >> 11) * 0x1.0p-52 - 1);
  if (FLAGS_sparse) {
    for (float& x : g) x = gen() % 2 ? x : 0.0f;
  }
  return g;
}

// Report of `grad`, dense or (--sparse) through ReportSparse with its nonzero entries.
ps::Status ReportGradient(ps::OrderClient* client, int pos, const std::vector<float>& grad) {
  if (!FLAGS_sparse) return client->Report(pos, grad.data(), grad.size());
  std::vector<uint64_t> indices;
  std::vector<float> values;
  for (size_t j = grad.size(); j-- > 0;) {
    if (grad[j] != 0) {
      indices.push_back(j);
      values.push_back(grad[j]);
    }
  }
  return client->ReportSparse(pos, indices.data(), values.data(), indices.size());
}

// What the balancer sees of every example: the gradient, or its projection.
Grads Balanced(int workers) {
  std::unique_ptr<ps::RandomProjection> p;
  if (FLAGS_projection > 0) {
    p = std::make_unique<ps::RandomProjection>(FLAGS_dim, FLAGS_projection, FLAGS_seed);
  }
  Grads out(workers);
  for (int r = 0; r < workers; ++r) {
    for (int e = 0; e < FLAGS_examples; ++e) {
      std::vector<float> g = Gradient(r, e);
      if (p) {
        std::vector<float> sketch(FLAGS_projection);
        p->Project(g.data(), g.size(), sketch.data(), sketch.size());
        g = sketch;
      }
      out[r].push_back(g);
    }
  }
  return out;
}

// One epoch of the balancer over `orders` (an empty row: a worker absent from the epoch),
// fed in processing order; worker i is removed after its first sent[i] pairs.
Orders Balance(const Orders& orders, const Grads& g, const std::vector<int>& sent) {
  const int m = orders.size(), n = FLAGS_examples, dim = g[0][0].size();
  ps::PairBalancer b(m, n, dim, FLAGS_seed);
  ps::Status s = b.BeginEpoch(orders);
  for (int k = 0; s.ok() && k < n / 2; ++k) {
    for (int i = 0; s.ok() && i < m; ++i) {
      if (orders[i].empty() || k > sent[i]) continue;
      if (k == sent[i]) {
        s = b.RemoveWorker(i);
        continue;
      }
      std::vector<float> d(dim);
      for (int j = 0; j < dim; ++j) {
        d[j] = g[i][orders[i][2 * k]][j] - g[i][orders[i][2 * k + 1]][j];
      }
      s = b.AddPair(i, k, d.data(), d.size());
    }
  }
  Orders next(m);
  for (int i = 0; s.ok() && i < m; ++i) {
    if (!orders[i].empty()) s = b.NextOrder(i, &next[i]);
  }
  if (!s.ok()) std::fprintf(stderr, "the reference balancer failed: %s\n", s.ToString().c_str());
  return next;
}

bool IsPermutation(std::vector<int> order, int n) {
  std::sort(order.begin(), order.end());
  for (int e = 0; e < static_cast<int>(order.size()); ++e) {
    if (order[e] != e) return false;
  }
  return static_cast<int>(order.size()) == n;
}

int RunWorker() {
  const int rank = ps::MyRank(), m = ps::NumWorkers(), n = FLAGS_examples;
  ps::OrderOptions options;
  ps::Status s = ps::ParseOrderAlgorithm(FLAGS_algorithm, &options.algorithm);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  options.num_examples = n;
  options.dim = FLAGS_dim;
  options.seed = FLAGS_seed;
  options.batch_pairs = FLAGS_batch_pairs;
  options.projection_dim = FLAGS_projection;
  auto client = std::make_unique<ps::OrderClient>(options);

  const bool leaver = rank == FLAGS_leave_rank;
  const Grads g = Balanced(m);
  Orders all(m);  // every worker's order this epoch, as this worker computes them
  for (int i = 0; i < m; ++i) all[i] = ps::DrrOrder(n, FLAGS_seed, i, 0);
  std::mt19937 rng(FLAGS_seed * 7919 + rank);
  std::uniform_int_distribution<int> delay(0, FLAGS_max_delay_us);
  long checked = 0, mismatches = 0;
  auto expect = [&](bool ok, const std::string& what) {
    ++checked;
    if (ok) return;
    if (mismatches++ < 10) std::fprintf(stderr, "MISMATCH: worker %d: %s\n", rank, what.c_str());
  };

  // Misuse is refused and changes nothing.
  const bool balances = options.algorithm == ps::OrderAlgorithm::kIdGrab ||
                        options.algorithm == ps::OrderAlgorithm::kCdGrab;
  const auto kInvalid = ps::Status::Code::kInvalidArgument;
  std::vector<float> first = Gradient(rank, client->order()[0]);
  expect(client->Report(1, first.data(), first.size()).code() == kInvalid,
         "a position out of turn was accepted");
  expect(client->Report(0, first.data(), first.size() - 1).code() == kInvalid,
         "a gradient of the wrong length was accepted");
  if (FLAGS_sparse) {
    // Refused after setting some entries: they must not leak into later reports (the
    // orders checked below would differ).
    const uint64_t out_of_range[] = {0, static_cast<uint64_t>(FLAGS_dim)};
    const uint64_t twice[] = {1, 2, 1};
    const float values[] = {5, 6, 7};
    expect(client->ReportSparse(0, out_of_range, values, 2).code() == kInvalid,
           "a sparse index out of range was accepted");
    expect(client->ReportSparse(0, twice, values, 3).code() == kInvalid,
           "a repeated sparse index was accepted");
  }
  if (balances) {
    std::vector<float> nan = first;
    nan[0] = std::nanf("");
    expect(client->Report(0, nan.data(), nan.size()).code() == kInvalid,
           "a non-finite gradient was accepted");
    expect(client->NextEpoch().code() == kInvalid, "NextEpoch before the epoch was reported");
  }

  for (int epoch = 0; epoch < FLAGS_epochs; ++epoch) {
    const std::vector<int> order = client->order();
    const std::string at = "epoch " + std::to_string(epoch);
    expect(client->epoch() == epoch,
           at + ": the client is in epoch " + std::to_string(client->epoch()));
    expect(IsPermutation(order, n), at + ": the order is not a permutation");
    expect(order == all[rank], at + ": the order differs from the reference");
    if (leaver && epoch == FLAGS_leave_after && FLAGS_leave_how != "kill") {
      std::printf("worker %d stops after %d epochs (%s)\n", rank, epoch, FLAGS_leave_how.c_str());
      std::fflush(stdout);
      if (FLAGS_leave_how == "finish") {
        s = client->Finish();
        if (!s.ok()) std::fprintf(stderr, "Finish failed: %s\n", s.ToString().c_str());
        return s.ok() ? 0 : 1;  // into Finalize's barrier with the others
      }
      client.reset();  // tells the plugin, like Finish
      return 0;
    }
    for (int pos = 0; pos < n; ++pos) {
      if (leaver && epoch == FLAGS_leave_after && pos == n / 2) {
        std::printf("worker %d stops after %d epochs (kill)\n", rank, epoch);
        std::fflush(stdout);
        // Its sent batches reach the plugin before it dies: the others count them.
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        raise(SIGKILL);
      }
      std::vector<float> grad = Gradient(rank, order[pos]);
      s = ReportGradient(client.get(), pos, grad);
      if (!s.ok()) {
        std::fprintf(stderr, "Report(%d) in epoch %d failed: %s\n", pos, epoch,
                     s.ToString().c_str());
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(delay(rng)));
    }
    auto waited = std::chrono::steady_clock::now();
    s = client->NextEpoch();
    if (!s.ok()) {
      std::fprintf(stderr, "NextEpoch after epoch %d failed: %s\n", epoch, s.ToString().c_str());
      return 1;
    }
    std::printf("worker %d: epoch %d done, next order after %.3f s\n", rank, epoch,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - waited).count());
    std::fflush(stdout);

    // The reference for the next epoch.
    Orders next(m);
    if (options.algorithm == ps::OrderAlgorithm::kCdGrab) {
      Orders taking_part = all;
      std::vector<int> sent(m, n / 2);
      const int r = FLAGS_leave_rank;
      if (r >= 0 && r < m && epoch >= FLAGS_leave_after) {
        if (FLAGS_leave_how != "kill" || epoch > FLAGS_leave_after) {
          taking_part[r].clear();
        } else {
          // Killed halfway: the batches it had filled were sent.
          const int pairs = n / 4;
          sent[r] = pairs - pairs % FLAGS_batch_pairs;
        }
      }
      next = Balance(taking_part, g, sent);
    } else if (options.algorithm == ps::OrderAlgorithm::kIdGrab) {
      next[rank] = Balance({all[rank]}, {g[rank]}, {n / 2})[0];
    } else if (options.algorithm == ps::OrderAlgorithm::kRr) {
      next[rank] = ps::DrrOrder(n, FLAGS_seed, rank, epoch + 1);
    } else {
      next[rank] = all[rank];
    }
    const bool changes = options.algorithm != ps::OrderAlgorithm::kFixed;
    expect((client->order() != order) == changes,
           at + (changes ? ": the order did not change" : ": the fixed order changed"));
    all = next;
  }
  expect(client->order() == all[rank], "the order after the last epoch differs from the reference");
  std::printf("worker %d: %d epochs of %d examples (%s), %ld checks, %ld mismatches\n", rank,
              FLAGS_epochs, n, FLAGS_algorithm.c_str(), checked, mismatches);
  std::fflush(stdout);
  return mismatches == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0, argv[0]);
  int rc = 0;
  if (ps::IsWorker()) {
    try {
      rc = RunWorker();
    } catch (const ps::Error& e) {
      std::fprintf(stderr, "worker %d: %s\n", ps::MyRank(), e.what());
      rc = 1;
    }
  }
  // A worker that leaves early skips the closing barrier: the others are still running.
  const bool leaves_now =
      ps::IsWorker() && ps::MyRank() == FLAGS_leave_rank && FLAGS_leave_how == "finalize";
  ps::Finalize(0, /*do_barrier=*/!leaves_now && rc == 0);
  return rc;
}
