// Integration: synchronous aggregation keyed by clock (PS_CONSISTENCY=bsp). In clock r
// every worker first pulls every key and checks that it holds exactly the rounds of
// clocks 0..r-1 (one SGD step per key and clock with the mean of that clock's pushes,
// nothing of clock r yet), then pushes its gradients of round r (a sparse pattern:
// worker w skips key k in round r when (k + r + w) % 4 == 0, so keys get pushes from
// different numbers of workers) and ends the clock. Pushes must be acknowledged at
// once: Clock() waits for its pushes' acknowledgements, so a server that held them
// back until a round completes would deadlock (and the launcher's timeout would fail
// the test).
//
// --leave_rank R --leave_at D: worker R leaves the job (Finalize) after D clocks; the
// rounds of later clocks are the means over the others.
#include <gflags/gflags.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "ps/optimizer_server.h"
#include "ps/ps.h"

DEFINE_int32(rounds, 40, "clocks, one aggregation round each");
DEFINE_int32(keys, 50, "keys (shared by all workers)");
DEFINE_int32(leave_rank, -1, "this worker leaves the job after --leave_at clocks");
DEFINE_int32(leave_at, 0, "clocks the leaving worker ends first");

namespace {

constexpr double kLr = 0.5;

// Small binary fractions: sums of them are exact in float.
float Gradient(int worker, int round, int key) {
  return 0.25f * static_cast<float>(worker + 1) + 0.5f * static_cast<float>(round % 5) -
         0.125f * static_cast<float>(key % 3);
}

bool Pushes(int worker, int round, int key, int workers) {
  if (worker == FLAGS_leave_rank && round >= FLAGS_leave_at) return false;
  return workers == 1 || (key + round + worker) % 4 != 0;
}

// The value of key k after the rounds of clocks 0..rounds-1.
double Expected(int k, int rounds, int workers) {
  double w = 0;
  for (int r = 0; r < rounds; ++r) {
    double sum = 0;
    int n = 0;
    for (int i = 0; i < workers; ++i) {
      if (Pushes(i, r, k, workers)) sum += Gradient(i, r, k), ++n;
    }
    if (n) w -= kLr * sum / n;
  }
  return w;
}

int RunWorker() {
  ps::KVWorker<float> kv(0, 0);
  int rank = ps::MyRank(), workers = ps::NumWorkers();
  std::vector<ps::Key> keys;
  for (int k = 0; k < FLAGS_keys; ++k) keys.push_back(static_cast<ps::Key>(k) * 7 + 3);
  int failed = 0, wrong = 0;
  double worst = 0;
  int rounds = rank == FLAGS_leave_rank ? FLAGS_leave_at : FLAGS_rounds;
  for (int r = 0; r <= rounds; ++r) {
    std::vector<float> w;
    ps::Status s = kv.Wait(kv.Pull(keys, &w));
    if (!s.ok()) {
      std::printf("FAILED: pull in clock %d: %s\n", r, s.ToString().c_str());
      return 1;
    }
    for (int k = 0; k < FLAGS_keys; ++k) {
      double expect = Expected(k, r, workers);
      double err = std::fabs(w[k] - expect) / std::max(1.0, std::fabs(expect));
      worst = std::max(worst, err);
      if (err > 1e-5 && wrong++ < 5) {
        std::printf("FAILED: clock %d key %d holds %.6f, expected %.6f\n", r, k, w[k], expect);
      }
    }
    if (r == rounds) break;
    std::vector<ps::Key> mine;
    std::vector<float> g;
    for (int k = 0; k < FLAGS_keys; ++k) {
      if (Pushes(rank, r, k, workers)) mine.push_back(keys[k]), g.push_back(Gradient(rank, r, k));
    }
    kv.Push(mine, g);  // Clock() waits for it
    ps::Status ended = kv.Clock();
    if (!ended.ok()) {
      std::printf("FAILED: Clock() in clock %d: %s\n", r, ended.ToString().c_str());
      return 1;
    }
  }
  std::printf("worker %d: %d clocks over %d keys, %d pushes failed, %d wrong values, max "
              "relative error %.2e\n",
              rank, rounds, FLAGS_keys, failed, wrong, worst);
  return failed == 0 && wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0, argv[0]);
  std::unique_ptr<ps::OptimizerServer> server;
  if (ps::IsServer()) {
    ps::OptimizerServerOptions options;
    options.optimizer.kind = ps::OptimizerKind::kSgd;
    options.optimizer.lr = kLr;
    options.threads = 2;
    options.sync_aggregation = true;
    server = std::make_unique<ps::OptimizerServer>(0, options);
  }
  int rc = ps::IsWorker() ? RunWorker() : 0;
  bool leaves_early = ps::IsWorker() && ps::MyRank() == FLAGS_leave_rank;
  ps::Finalize(0, /*do_barrier=*/!leaves_early);
  return rc;
}
