#include "training_options.h"

#include <stdexcept>

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

namespace linear {

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
  return o;
}

void ValidateTrainingFlags() {
  if (FLAGS_epochs < 1) throw std::invalid_argument("--epochs must be >= 1");
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
}

}  // namespace linear
