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
//
// --gap_ms pauses between each push's answer and the end of its clock, while its round
// is open (a test kills a server mid-run: with PS_REPLICATION=2 every pull must still
// find exactly the rounds before it);
// --optimizer=adam checks no values (only that every request succeeds) and --save_dir
// has each server save its keys after ps::Finalize, for a test that compares replicas
// (--settle_ms lets the last rounds' copies land first); --value_len gives each key
// that many values (all alike: a small PS_CHUNK_BYTES puts them in chunks);
// --push_pull pushes with KVWorker::PushPull.
#include <gflags/gflags.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ps/optimizer_server.h"
#include "ps/ps.h"

DEFINE_int32(rounds, 40, "clocks, one aggregation round each");
DEFINE_int32(keys, 50, "keys (shared by all workers)");
DEFINE_int32(leave_rank, -1, "this worker leaves the job after --leave_at clocks");
DEFINE_int32(leave_at, 0, "clocks the leaving worker ends first");
DEFINE_int32(gap_ms, 0, "pause between a push's answer and Clock() (rounds stay open)");
DEFINE_string(optimizer, "sgd", "sgd (values checked) or adam (not checked)");
DEFINE_int32(value_len, 1, "values per key (with a small PS_CHUNK_BYTES, in chunks)");
DEFINE_bool(push_pull, false, "push with KVWorker::PushPull (what it reads is not checked)");
DEFINE_int32(settle_ms, 0, "pause before ps::Finalize (the last rounds' copies land)");
DEFINE_string(save_dir, "", "servers save <dir>/server-<rank>.ckpt after ps::Finalize");
DEFINE_string(marker, "", "ignored; lets a test driver find this run's processes");

namespace {

constexpr double kLr = 0.5;

// Small binary fractions: sums of them are exact in float.
float Gradient(int worker, int round, int key) {
  return 0.25f * static_cast<float>(worker + 1) + 0.5f * static_cast<float>(round % 5) -
         0.125f * static_cast<float>(key % 3);
}

bool Pushes(int worker, int round, int key, int workers) {
  if (worker == FLAGS_leave_rank && round >= FLAGS_leave_at) return false;
  // Longer values: every key in every clock, so that each worker knows each key's length
  // (its chunks) from its own pushes before it pulls.
  return workers == 1 || FLAGS_value_len > 1 || (key + round + worker) % 4 != 0;
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
    std::vector<float> w(keys.size() * static_cast<size_t>(FLAGS_value_len));
    // Nothing is pushed before clock 0: longer values are pulled from clock 1 on.
    ps::Status s = r == 0 && FLAGS_value_len > 1 ? ps::Status::OK() : kv.Wait(kv.Pull(keys, &w));
    if (!s.ok()) {
      std::printf("FAILED: pull in clock %d: %s\n", r, s.ToString().c_str());
      return 1;
    }
    const size_t len = static_cast<size_t>(FLAGS_value_len);
    if (w.size() != keys.size() * len) {
      std::printf("FAILED: pull in clock %d: %zu values, not %zu\n", r, w.size(),
                  keys.size() * len);
      return 1;
    }
    for (int k = 0; k < FLAGS_keys && FLAGS_optimizer == "sgd"; ++k) {
      double expect = Expected(k, r, workers);
      for (size_t j = 0; j < len; ++j) {
        const float got = w[k * len + j];
        double err = std::fabs(got - expect) / std::max(1.0, std::fabs(expect));
        worst = std::max(worst, err);
        if (err > 1e-5 && wrong++ < 5) {
          std::printf("FAILED: clock %d key %d value %zu holds %.6f, expected %.6f\n", r, k, j,
                      got, expect);
        }
      }
    }
    if (r == rounds) break;
    std::vector<ps::Key> mine;
    std::vector<float> g;
    for (int k = 0; k < FLAGS_keys; ++k) {
      if (!Pushes(rank, r, k, workers)) continue;
      mine.push_back(keys[k]);
      g.insert(g.end(), len, Gradient(rank, r, k));
    }
    std::vector<float> read;  // a push-pull's answer: the rounds before this clock
    const int pushed = FLAGS_push_pull ? kv.PushPull(mine, g, &read) : kv.Push(mine, g);
    if (FLAGS_gap_ms > 0) {
      // Answered and in its round, which stays open until every worker ends the clock.
      ps::Status s = kv.Wait(pushed);
      if (!s.ok()) {
        std::printf("FAILED: push in clock %d: %s\n", r, s.ToString().c_str());
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_gap_ms));
    }
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
  if (FLAGS_optimizer != "sgd" && FLAGS_optimizer != "adam") {
    std::fprintf(stderr, "--optimizer is sgd or adam\n");
    return 2;
  }
  ps::Start(0, argv[0]);
  std::unique_ptr<ps::OptimizerServer> server;
  if (ps::IsServer()) {
    ps::OptimizerServerOptions options;
    options.optimizer.kind =
        FLAGS_optimizer == "sgd" ? ps::OptimizerKind::kSgd : ps::OptimizerKind::kAdam;
    options.optimizer.lr = FLAGS_optimizer == "sgd" ? kLr : 0.01;
    options.threads = 2;
    options.sync_aggregation = true;
    server = std::make_unique<ps::OptimizerServer>(0, options);
  }
  int rc = ps::IsWorker() ? RunWorker() : 0;
  if (FLAGS_settle_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_settle_ms));
  bool leaves_early = ps::IsWorker() && ps::MyRank() == FLAGS_leave_rank;
  ps::Finalize(0, /*do_barrier=*/!leaves_early);
  if (server && !FLAGS_save_dir.empty()) {
    std::string path = FLAGS_save_dir + "/server-" + std::to_string(ps::MyRank()) + ".ckpt";
    ps::Status saved = server->SaveCheckpoint(path);
    std::printf("server %d saved %s: %s\n", ps::MyRank(), path.c_str(), saved.ToString().c_str());
    if (!saved.ok()) return 1;
  }
  return rc;
}
