// The worker side of apps/linear: minibatch logistic regression against the servers.
#ifndef HERDPS_APPS_LINEAR_TRAINER_H_
#define HERDPS_APPS_LINEAR_TRAINER_H_

#include <cstdint>
#include <vector>

#include "dataset.h"

namespace linear {

// The servers' second app: a plain store (KVServerDefaultHandle<double>) where workers
// add up their pushed byte counts, so that worker 0 can report the whole job's.
constexpr int kStatsApp = 1;

// Everything a worker trains and evaluates on. Every worker loads the same files the
// same way, so they agree on the number of features, the standardisation and the
// train/test split without talking; each then trains on its own block of rows.
struct TrainingData {
  Dataset train;                // the whole training set (after standardisation)
  Dataset test;                 // may be empty
  std::vector<size_t> my_rows;  // this worker's training rows
  uint64_t num_features = 0;    // feature keys are 0..num_features-1
  uint64_t bias_key() const { return num_features; }
};

// Reads, splits, standardises and partitions the data as the flags say. Throws
// DataError (bad files) or std::invalid_argument (bad flags).
TrainingData LoadTrainingData(int rank, int num_workers);

// Trains for --epochs; worker 0 evaluates, prints progress and writes the metrics
// and the model. Returns the process exit code. *leave becomes true when this worker
// stopped early (--stop_after_epoch): it must then leave the job without the closing
// barrier, which the others reach only later.
int RunWorker(const TrainingData& data, bool* leave);

}  // namespace linear

#endif  // HERDPS_APPS_LINEAR_TRAINER_H_
