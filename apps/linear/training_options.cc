#include "training_options.h"

#include <stdexcept>
#include <string>

#include "early_stop.h"
#include "ps/environment.h"
#include "step_order.h"

#ifndef HERDPS_LINEAR_DEFAULT_DATA
#define HERDPS_LINEAR_DEFAULT_DATA "apps/linear/data/hmda.csv"
#endif

DEFINE_string(train, HERDPS_LINEAR_DEFAULT_DATA,
              "training data (default: the bundled HMDA mortgage-denial data)");
DEFINE_string(test, "", "test data; empty: hold out --test_fraction of --train");
DEFINE_double(test_fraction, 0.2, "fraction of --train held out as test data (no --test)");
DEFINE_string(format, "", "csv or libsvm; empty: from the file name (.csv is csv)");
DEFINE_string(label_column, "",
              "CSV label column; empty: 'deny' for the bundled data, else the last column");
DEFINE_int32(epochs, 30, "passes over the training data");
DEFINE_int32(batch_size, 64, "examples per step and worker; 0: all local data in one step");
DEFINE_string(optimizer, "adam",
              "sgd, momentum, nesterov, adagrad, rmsprop, adam, amsgrad or ftrl (server-side)");
DEFINE_double(lr, 0.01, "learning rate");
DEFINE_double(momentum, 0.9, "momentum and nesterov: momentum factor");
DEFINE_double(beta1, 0.9, "adam, amsgrad: first-moment decay");
DEFINE_double(beta2, 0.999, "adam, amsgrad: second-moment decay");
DEFINE_double(eps, 1e-8, "adam, amsgrad, rmsprop: epsilon");
DEFINE_double(rmsprop_alpha, 0.99, "rmsprop: smoothing constant");
DEFINE_double(ftrl_alpha, 0.1, "ftrl: alpha");
DEFINE_double(ftrl_beta, 1.0, "ftrl: beta");
DEFINE_double(ftrl_l1, 0.0, "ftrl: L1 strength");
DEFINE_double(ftrl_l2, 0.0, "ftrl: L2 strength");
DEFINE_double(reg_l2, 0.0, "L2 regularisation lambda/2 ||w||^2 on the weights (not the bias)");
DEFINE_string(init, "zeros", "weight initialisation: zeros, uniform or normal");
DEFINE_double(init_scale, 0.01, "uniform: values in [-scale, scale]; normal: stddev");
DEFINE_uint64(seed, 1, "seed of the initialisation and of the train/test split");
DEFINE_bool(standardize, true, "standardise CSV features with the training set's mean and stddev");
DEFINE_string(save_model, "", "write the final model here: one 'key value' line per key");
DEFINE_string(metrics_csv, "", "write per-epoch metrics here (CSV with a header)");
DEFINE_int32(eval_every, 1, "evaluate every N epochs (and always after the last)");
DEFINE_int32(server_threads, 0, "shard threads per server; 0: PS_SERVER_THREADS or cores");
DEFINE_string(partition, "blocks",
              "blocks: each worker trains on a contiguous block of the training rows; label: "
              "on a block of the rows sorted by label (stable), so that each worker holds "
              "mostly one class (non-IID data)");
DEFINE_string(clock_every, "batch",
              "batch or epoch: end a clock (KVWorker::Clock) after every step or every epoch; "
              "the job's model (PS_CONSISTENCY, tracker/launch --consistency) says who waits");
DEFINE_string(consistency, "",
              "bsp, ssp:S or asp: the job's consistency model (every node of the job runs this "
              "app, so the scheduler takes it from here); empty: the job's (PS_CONSISTENCY, "
              "tracker/launch --consistency)");
DEFINE_int32(straggler, -1, "this worker rank is slowed on every clock; -1: none");
DEFINE_double(straggler_prob, 0,
              "each clock, each worker is slowed with this probability (seeded by --seed and "
              "the rank); not with --straggler");
DEFINE_double(straggler_factor, 0,
              "a slowed clock takes this many times its work (sleeps (F-1) x the measured time "
              "of its steps), >= 1; 0: use --straggler_delay_ms");
DEFINE_double(straggler_delay_ms, 0, "a slowed clock sleeps this many milliseconds");
DEFINE_string(compress, "none",
              "codec of the gradients workers push: none, fp16, onebit, topk:RATIO, topk:k=K, "
              "threshold:TAU, randomk:RATIO[:seed=S]; append ',pull=fp16' to pull fp16 "
              "weights too (docs/pipeline.md)");
DEFINE_bool(sync_aggregation, false,
            "servers apply one optimizer step per clock with the mean of that clock's pushes "
            "(synchronous SGD; needs the job to run bsp); docs/optimizers.md");

namespace linear {

ps::CompressionPolicy CompressionFromFlags() {
  ps::CompressionPolicy policy;
  ps::Status s = ps::CompressionPolicy::Parse(FLAGS_compress, &policy);
  if (!s.ok()) throw std::invalid_argument("--compress: " + s.message());
  return policy;
}

ps::OptimizerServerOptions ServerOptionsFromFlags() {
  ps::OptimizerServerOptions o;
  ps::Status s = ps::ParseOptimizerKind(FLAGS_optimizer, &o.optimizer.kind);
  if (!s.ok()) throw std::invalid_argument("--optimizer: " + s.message());
  o.optimizer.lr = FLAGS_lr;
  o.optimizer.momentum = FLAGS_momentum;
  o.optimizer.beta1 = FLAGS_beta1;
  o.optimizer.beta2 = FLAGS_beta2;
  o.optimizer.eps = FLAGS_eps;
  o.optimizer.rmsprop_alpha = FLAGS_rmsprop_alpha;
  o.optimizer.ftrl_alpha = FLAGS_ftrl_alpha;
  o.optimizer.ftrl_beta = FLAGS_ftrl_beta;
  o.optimizer.ftrl_l1 = FLAGS_ftrl_l1;
  o.optimizer.ftrl_l2 = FLAGS_ftrl_l2;
  s = o.optimizer.Validate();
  if (!s.ok()) throw std::invalid_argument(s.message());
  s = ps::ValueInit::ParseKind(FLAGS_init, &o.init.kind);
  if (!s.ok()) throw std::invalid_argument("--init: " + s.message());
  if (!(FLAGS_init_scale >= 0)) throw std::invalid_argument("--init_scale must be >= 0");
  o.init.scale = FLAGS_init_scale;
  o.init.seed = FLAGS_seed;
  if (FLAGS_server_threads < 0) throw std::invalid_argument("--server_threads must be >= 0");
  o.threads = FLAGS_server_threads;
  o.sync_aggregation = FLAGS_sync_aggregation;
  return o;
}

void ValidateTrainingFlags() {
  if (FLAGS_epochs < 1) throw std::invalid_argument("--epochs must be >= 1");
  CompressionFromFlags();
  if (FLAGS_batch_size < 0) throw std::invalid_argument("--batch_size must be >= 0");
  if (FLAGS_eval_every < 1) throw std::invalid_argument("--eval_every must be >= 1");
  if (!(FLAGS_test_fraction >= 0 && FLAGS_test_fraction < 1)) {
    throw std::invalid_argument("--test_fraction must be in [0, 1)");
  }
  if (!(FLAGS_reg_l2 >= 0)) throw std::invalid_argument("--reg_l2 must be >= 0");
  if (!FLAGS_format.empty() && FLAGS_format != "csv" && FLAGS_format != "libsvm") {
    throw std::invalid_argument("--format must be csv or libsvm");
  }
  if (FLAGS_train.empty()) throw std::invalid_argument("--train is required");
  ps::ConsistencyModel model;
  if (!FLAGS_consistency.empty() && !ps::ConsistencyModel::Parse(FLAGS_consistency, &model).ok()) {
    throw std::invalid_argument("--consistency must be bsp, asp or ssp:S (S a whole number from 0 "
                                "to 1000000), not '" + FLAGS_consistency + "'");
  }
  if (FLAGS_partition != "blocks" && FLAGS_partition != "label") {
    throw std::invalid_argument("--partition must be blocks or label, not '" + FLAGS_partition +
                                "'");
  }
  if (FLAGS_clock_every != "batch" && FLAGS_clock_every != "epoch") {
    throw std::invalid_argument("--clock_every must be batch or epoch, not '" + FLAGS_clock_every +
                                "'");
  }
  if (FLAGS_straggler < -1) {
    throw std::invalid_argument("--straggler must be a worker rank, or -1 for none");
  }
  if (!(FLAGS_straggler_prob >= 0 && FLAGS_straggler_prob <= 1)) {
    throw std::invalid_argument("--straggler_prob must be in [0, 1]");
  }
  if (FLAGS_straggler >= 0 && FLAGS_straggler_prob > 0) {
    throw std::invalid_argument(
        "--straggler and --straggler_prob exclude each other: slow one chosen worker on "
        "every clock, or random workers on random clocks");
  }
  if (!(FLAGS_straggler_factor == 0 || FLAGS_straggler_factor >= 1)) {
    throw std::invalid_argument("--straggler_factor must be >= 1 (or 0: unset)");
  }
  if (!(FLAGS_straggler_delay_ms >= 0 && FLAGS_straggler_delay_ms <= 3.6e6)) {
    throw std::invalid_argument("--straggler_delay_ms must be in [0, 3600000]");
  }
  const bool slowed = FLAGS_straggler >= 0 || FLAGS_straggler_prob > 0;
  const bool factor = FLAGS_straggler_factor > 0, delay = FLAGS_straggler_delay_ms > 0;
  if (factor && delay) {
    throw std::invalid_argument(
        "--straggler_factor and --straggler_delay_ms exclude each other: give one");
  }
  if (slowed && !factor && !delay) {
    throw std::invalid_argument(
        "--straggler / --straggler_prob need --straggler_factor F or --straggler_delay_ms D "
        "(how much a slowed clock is slowed)");
  }
  if (!slowed && (factor || delay)) {
    throw std::invalid_argument(
        "--straggler_factor / --straggler_delay_ms need --straggler RANK or "
        "--straggler_prob P (who is slowed)");
  }
  ValidateOrderFlags();
  EarlyStopFromFlags();
}

ClockEvery ClockEveryFromFlags() {
  return FLAGS_clock_every == "epoch" ? ClockEvery::kEpoch : ClockEvery::kBatch;
}

StragglerOptions StragglerOptionsFromFlags(int num_workers) {
  if (FLAGS_straggler >= num_workers) {
    throw std::invalid_argument("--straggler " + std::to_string(FLAGS_straggler) +
                                " names no worker: the job has " + std::to_string(num_workers) +
                                " (ranks 0.." + std::to_string(num_workers - 1) + ")");
  }
  StragglerOptions o;
  o.rank = FLAGS_straggler;
  o.prob = FLAGS_straggler_prob;
  o.factor = FLAGS_straggler_factor;
  o.delay_ms = FLAGS_straggler_delay_ms;
  o.seed = FLAGS_seed;
  return o;
}

void CheckSyncAggregation(const ps::ConsistencyModel& job_model) {
  if (FLAGS_sync_aggregation && job_model.kind != ps::ConsistencyModel::kBsp) {
    throw std::invalid_argument(
        "--sync_aggregation needs the job to run bsp (--consistency bsp or tracker/launch "
        "--consistency bsp); it runs " +
        job_model.ToString());
  }
}

void ApplyConsistencyFlag() {
  if (FLAGS_consistency.empty()) return;
  // The runtime reads its settings through ps::Environment: on the scheduler this sets
  // the job's model, on the other nodes it is the model they expect.
  ps::Environment::Init({{"PS_CONSISTENCY", FLAGS_consistency}});
}

}  // namespace linear
