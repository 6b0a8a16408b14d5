// Integration: synchronous aggregation. Every worker pushes R rounds of gradients to
// the same keys; each server must apply SGD once per round with the mean of the
// workers' gradients. Worker 0 pushes all its rounds and waits for their
// acknowledgements before the others push anything: if a server held acknowledgements
// back until a round completes, this would deadlock (and the launcher's timeout would
// fail the test).
#include <gflags/gflags.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "ps/optimizer_server.h"
#include "ps/ps.h"

DEFINE_int32(rounds, 20, "aggregation rounds");
DEFINE_int32(keys, 50, "keys (shared by all workers)");

namespace {

constexpr double kLr = 0.5;

// Small binary fractions: sums of them are exact in float.
float Gradient(int worker, int round, int key) {
  return 0.25f * static_cast<float>(worker + 1) + 0.5f * static_cast<float>(round % 5) -
         0.125f * static_cast<float>(key % 3);
}

int RunWorker() {
  ps::KVWorker<float> kv(0, 0);
  int rank = ps::MyRank(), workers = ps::NumWorkers();
  std::vector<ps::Key> keys;
  for (int k = 0; k < FLAGS_keys; ++k) keys.push_back(static_cast<ps::Key>(k) * 7 + 3);
  ps::SArray<ps::Key> zkeys(keys);
  auto push_all = [&] {
    std::vector<int> ts;
    for (int r = 0; r < FLAGS_rounds; ++r) {
      ps::SArray<float> g(keys.size());
      for (int k = 0; k < FLAGS_keys; ++k) g[k] = Gradient(rank, r, k);
      ts.push_back(kv.ZPush(zkeys, g));
    }
    int failed = 0;
    for (int t : ts) failed += !kv.Wait(t).ok();
    return failed;
  };
  int failed = 0;
  if (rank == 0) {
    // A key pushed with no values is refused by the worker before anything is sent
    // (the servers refuse such pushes too, for input that does not come from KVWorker).
    try {
      kv.Push({keys[0], keys[1]}, {1.0f}, {0, 1});
      std::printf("FAILED: a push with an empty key was accepted\n");
      ++failed;
    } catch (const ps::Error&) {
    }
    failed += push_all();  // acknowledged before anyone else pushes
  }
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
  if (rank != 0) failed = push_all();
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);

  std::vector<float> w;
  ps::Status s = kv.Wait(kv.Pull(keys, &w));
  double worst = 0;
  for (int k = 0; k < FLAGS_keys && s.ok(); ++k) {
    double expect = 0;
    for (int r = 0; r < FLAGS_rounds; ++r) {
      double mean = 0;
      for (int i = 0; i < workers; ++i) mean += Gradient(i, r, k);
      expect -= kLr * mean / workers;
    }
    worst = std::max(worst, std::fabs(w[k] - expect) / std::max(1.0, std::fabs(expect)));
  }
  std::printf("worker %d: %d rounds over %d keys, %d pushes failed, max relative error %.2e\n",
              rank, FLAGS_rounds, FLAGS_keys, failed, worst);
  return s.ok() && failed == 0 && worst <= 1e-5 ? 0 : 1;
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
  ps::Finalize(0, true);
  return rc;
}
