// linear: distributed minibatch logistic regression. Workers compute gradients of the
// mean log-loss on their block of the training data; servers run the optimizer.
//
//   tracker/launch -n 4 -s 2 -- build/apps/linear --epochs 20 --metrics_csv m.csv
//
// Without --train it trains on the bundled HMDA mortgage-denial data (label `deny`).
// Keys: CSV feature i (columns in order, label left out) is key i, a libsvm feature
// keeps its file index, and the bias is the largest feature key + 1.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "dataset.h"
#include "early_stop.h"
#include "ps/optimizer_server.h"
#include "ps/ps.h"
#include "trainer.h"
#include "training_options.h"

int main(int argc, char* argv[]) {
  gflags::SetUsageMessage(
      "distributed logistic regression (run under tracker/launch; see --helpon=training_options)");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::OptimizerServerOptions server_options;
  try {
    server_options = linear::ServerOptionsFromFlags();
    linear::ValidateTrainingFlags();
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "linear: %s\n", e.what());
    return 2;
  }
  try {
    linear::ApplyConsistencyFlag();
    ps::Start(0, argv[0]);
    try {
      // Needs the job's size and model, known only now; every node checks, so all stop
      // alike.
      linear::StragglerOptionsFromFlags(ps::NumWorkers());
      linear::CheckSyncAggregation(ps::Postoffice::Get()->consistency());
      linear::CheckEarlyStopRank(linear::EarlyStopFromFlags(), ps::NumWorkers());
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "linear: %s\n", e.what());
      std::fflush(stderr);
      std::_Exit(2);
    }
    std::unique_ptr<ps::OptimizerServer> server;
    std::unique_ptr<ps::KVServer<double>> stats;  // byte counts the workers add up
    if (ps::IsServer()) {
      server = std::make_unique<ps::OptimizerServer>(0, server_options);
      stats = std::make_unique<ps::KVServer<double>>(linear::kStatsApp);
      stats->set_request_handle(ps::KVServerDefaultHandle<double>());
    }
    int rc = 0;
    bool leave = false;  // a worker stopped early by --stop_after_epoch leaves at once
    if (ps::IsWorker()) {
      linear::TrainingData data = linear::LoadTrainingData(ps::MyRank(), ps::NumWorkers());
      rc = linear::RunWorker(data, &leave);
    }
    ps::Finalize(0, /*do_barrier=*/!leave);
    return rc;
  } catch (const std::exception& e) {
    // Bad data or a failed request: say so and stop this node at once; the launcher
    // then stops the others.
    std::fprintf(stderr, "linear: %s\n", e.what());
    std::fflush(stderr);
    std::_Exit(1);
  }
}
