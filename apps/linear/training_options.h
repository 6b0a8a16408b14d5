// Flags of apps/linear and the server options they imply. Every node runs the same
// command line, so every server derives identical optimizer options from them.
#ifndef HERDPS_APPS_LINEAR_TRAINING_OPTIONS_H_
#define HERDPS_APPS_LINEAR_TRAINING_OPTIONS_H_

#include <gflags/gflags.h>

#include <string>

#include "ps/compression_policy.h"
#include "ps/consistency.h"
#include "ps/optimizer_server.h"
#include "straggler.h"

DECLARE_string(train);
DECLARE_string(test);
DECLARE_double(test_fraction);
DECLARE_string(format);
DECLARE_string(label_column);
DECLARE_int32(epochs);
DECLARE_int32(batch_size);
DECLARE_string(optimizer);
DECLARE_double(lr);
DECLARE_double(momentum);
DECLARE_double(beta1);
DECLARE_double(beta2);
DECLARE_double(eps);
DECLARE_double(rmsprop_alpha);
DECLARE_double(ftrl_alpha);
DECLARE_double(ftrl_beta);
DECLARE_double(ftrl_l1);
DECLARE_double(ftrl_l2);
DECLARE_double(reg_l2);
DECLARE_string(init);
DECLARE_double(init_scale);
DECLARE_uint64(seed);
DECLARE_bool(standardize);
DECLARE_string(save_model);
DECLARE_string(metrics_csv);
DECLARE_int32(eval_every);
DECLARE_int32(server_threads);
DECLARE_string(partition);
DECLARE_string(clock_every);
DECLARE_int32(straggler);
DECLARE_double(straggler_prob);
DECLARE_double(straggler_factor);
DECLARE_double(straggler_delay_ms);
DECLARE_bool(sync_aggregation);
DECLARE_string(compress);

namespace linear {

// The server options the flags describe. Throws std::invalid_argument naming the
// flag when one is out of range.
ps::OptimizerServerOptions ServerOptionsFromFlags();

// --compress as a policy for the workers' KVWorker. Throws std::invalid_argument.
ps::CompressionPolicy CompressionFromFlags();

// Checks the flags that do not concern the servers. Throws std::invalid_argument.
void ValidateTrainingFlags();

// Where a worker ends its clocks (KVWorker::Clock): after every step or every epoch.
enum class ClockEvery { kBatch, kEpoch };
// --clock_every; valid once ValidateTrainingFlags passed.
ClockEvery ClockEveryFromFlags();

// The straggler flags; valid once ValidateTrainingFlags passed. Throws
// std::invalid_argument when --straggler names no worker of a job of `num_workers`.
StragglerOptions StragglerOptionsFromFlags(int num_workers);

// Throws std::invalid_argument when --sync_aggregation is set and the job's model (known
// once the node has joined) is not bsp.
void CheckSyncAggregation(const ps::ConsistencyModel& job_model);

// --consistency, if given, becomes this process's PS_CONSISTENCY (before ps::Start).
void ApplyConsistencyFlag();

}  // namespace linear

#endif  // HERDPS_APPS_LINEAR_TRAINING_OPTIONS_H_
