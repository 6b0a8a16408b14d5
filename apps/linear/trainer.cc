#include "trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "clock_pacer.h"
#include "csv_reader.h"
#include "data_error.h"
#include "early_stop.h"
#include "libsvm_reader.h"
#include "logistic.h"
#include "metrics.h"
#include "partition.h"
#include "ps/ps.h"
#include "split.h"
#include "standardizer.h"
#include "step_order.h"
#include "training_options.h"

namespace linear {
namespace {

using Clock = std::chrono::steady_clock;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string FormatOf(const std::string& path) {
  if (!FLAGS_format.empty()) return FLAGS_format;
  return EndsWith(path, ".csv") ? "csv" : "libsvm";
}

Dataset Read(const std::string& path, uint64_t max_features) {
  if (FormatOf(path) == "csv") {
    std::string label = FLAGS_label_column;
    if (label.empty() && path == FLAGS_train && EndsWith(path, "hmda.csv")) label = "deny";
    return ReadCsv(path, label);
  }
  return ReadLibsvm(path, max_features);
}

// Weights of `keys` pulled from the servers (created there on first use).
std::vector<float> PullWeights(ps::KVWorker<float>* kv, const ps::SArray<ps::Key>& keys) {
  ps::SArray<float> w;
  ps::Status s = kv->Wait(kv->ZPull(keys, &w));
  if (!s.ok()) throw std::runtime_error("pull failed: " + s.ToString());
  return std::vector<float>(w.begin(), w.end());
}

// Every weight and the bias, indexed by key.
std::vector<float> PullAllWeights(ps::KVWorker<float>* kv, const TrainingData& data) {
  ps::SArray<ps::Key> all(data.num_features + 1);
  for (uint64_t k = 0; k <= data.num_features; ++k) all[k] = k;
  return PullWeights(kv, all);
}

struct Evaluation {
  double train_loss = NAN, test_loss = NAN, accuracy = NAN, auc = NAN;
};

// Loss of the whole model on the full training set (the objective: mean log-loss plus
// reg_l2/2 ||w||^2), and loss, accuracy and AUC on the test set.
Evaluation Evaluate(ps::KVWorker<float>* kv, const TrainingData& data) {
  std::vector<float> pulled = PullAllWeights(kv, data);
  std::vector<double> w(pulled.begin(), pulled.end() - 1);
  double bias = pulled.back();
  Evaluation e;
  std::vector<double> probs;
  Predict(data.train, w, bias, &probs);
  double penalty = 0;
  for (double x : w) penalty += x * x;
  e.train_loss = LogLoss(data.train.labels, probs) + 0.5 * FLAGS_reg_l2 * penalty;
  if (data.test.rows() > 0) {
    Predict(data.test, w, bias, &probs);
    e.test_loss = LogLoss(data.test.labels, probs);
    e.accuracy = Accuracy(data.test.labels, probs);
    e.auc = Auc(data.test.labels, probs);
  }
  return e;
}

void SaveModel(ps::KVWorker<float>* kv, const TrainingData& data, const std::string& path) {
  std::vector<float> w = PullAllWeights(kv, data);
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write the model to " + path);
  for (uint64_t k = 0; k <= data.num_features; ++k) {
    std::fprintf(f, "%llu %.9g\n", static_cast<unsigned long long>(k), static_cast<double>(w[k]));
  }
  if (std::fclose(f) != 0) throw std::runtime_error("cannot write the model to " + path);
}

// One step: pull the weights of the batch's features, push the batch's mean gradient,
// which stays in *keys and *g (the features' keys, sorted, then the bias).
void Step(ps::KVWorker<float>* kv, const TrainingData& data, const size_t* rows, size_t n,
          std::vector<int64_t>* position, ps::SArray<ps::Key>* keys_out, ps::SArray<float>* g_out) {
  const Dataset& d = data.train;
  // The batch's feature keys, sorted, then the bias.
  std::vector<uint64_t> touched;
  for (size_t r = 0; r < n; ++r) {
    size_t row = rows[r];
    for (uint64_t j = d.row_offsets[row]; j < d.row_offsets[row + 1]; ++j) {
      uint64_t f = d.indices[j];
      if ((*position)[f] < 0) {
        (*position)[f] = 0;
        touched.push_back(f);
      }
    }
  }
  std::sort(touched.begin(), touched.end());
  ps::SArray<ps::Key> keys(touched.size() + 1);
  for (size_t i = 0; i < touched.size(); ++i) {
    keys[i] = touched[i];
    (*position)[touched[i]] = static_cast<int64_t>(i);
  }
  keys[touched.size()] = data.bias_key();
  std::vector<float> pulled = PullWeights(kv, keys);
  std::vector<double> w(pulled.begin(), pulled.end());
  std::vector<double> grad(keys.size(), 0.0);
  const size_t b = touched.size();
  AccumulateGradient(d, rows, n, position->data(), w.data(), w[b], grad.data(), &grad[b]);
  ps::SArray<float> g(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    double mean = grad[i] / static_cast<double>(n);
    if (i < b) mean += FLAGS_reg_l2 * w[i];  // L2 on the weights, not the bias
    g[i] = static_cast<float>(mean);
  }
  for (uint64_t f : touched) (*position)[f] = -1;
  ps::Status s = kv->Wait(kv->ZPush(keys, g));
  if (!s.ok()) throw std::runtime_error("push failed: " + s.ToString());
  *keys_out = keys;
  *g_out = g;
}

// One line per worker at the end: its examples per second after the first epoch (the
// warm-up: connections, first pulls that create the keys), its wall time, and its clocks.
// tracker/consistency reads it; keep the wording.
void PrintThroughput(int rank, size_t local, Clock::time_point start, Clock::time_point warm,
                     Clock::time_point end, const std::string& consistency,
                     const ClockPacer& pacer) {
  const bool warmed = FLAGS_epochs > 1;
  const int epochs = warmed ? FLAGS_epochs - 1 : FLAGS_epochs;
  const double seconds = std::chrono::duration<double>(end - (warmed ? warm : start)).count();
  const double examples = static_cast<double>(local) * epochs;
  std::printf(
      "worker %d: throughput %.1f examples/s (%.0f examples in %.3f s, %s), wall %.3f s, "
      "%s, %lld clocks, slowed on %d (%.3f s)\n",
      rank, seconds > 0 ? examples / seconds : 0.0, examples, seconds,
      warmed ? "after the warm-up epoch" : "no warm-up excluded: 1 epoch",
      std::chrono::duration<double>(end - start).count(), consistency.c_str(),
      static_cast<long long>(pacer.clocks()), pacer.straggler().slowed_clocks(),
      pacer.straggler().delayed_seconds());
  std::fflush(stdout);
}

// With --order other than none, one more line per worker: how often its order changed,
// and the time per step of its training (steps, clocks and the order's end-of-epoch
// exchange; not the evaluation and its barriers) after the warm-up epoch.
// tracker/orders reads it; keep the wording.
void PrintOrderSummary(int rank, const StepOrder& order, const std::string& name, int epochs,
                       double step_seconds, int64_t steps) {
  std::printf(
      "worker %d: order %s, %d slots, changed after %d of %d epochs, %.3f ms per step "
      "(%lld steps in %.3f s, %s)\n",
      rank, name.c_str(), order.slots(), order.changes(), epochs - 1,
      steps > 0 ? 1e3 * step_seconds / static_cast<double>(steps) : 0.0,
      static_cast<long long>(steps), step_seconds,
      epochs > 1 ? "after the warm-up epoch" : "no warm-up excluded: 1 epoch");
  std::fflush(stdout);
}

}  // namespace

TrainingData LoadTrainingData(int rank, int num_workers) {
  TrainingData data;
  Dataset all = Read(FLAGS_train, 0);
  if (all.rows() == 0) throw DataError(FLAGS_train + ": no examples");
  if (FLAGS_test.empty()) {
    SplitTrainTest(all, FLAGS_test_fraction, FLAGS_seed, &data.train, &data.test);
  } else {
    data.train = std::move(all);
    data.test = Read(FLAGS_test, data.train.num_features);
  }
  data.num_features = std::max(data.train.num_features, data.test.num_features);
  if (FormatOf(FLAGS_train) == "csv" && FLAGS_standardize) {
    Standardizer s = Standardizer::Fit(data.train);
    s.Apply(&data.train);
    if (data.test.rows() > 0) s.Apply(&data.test);
  }
  data.my_rows = FLAGS_partition == "label"
                     ? PartitionRowsByLabel(data.train.labels, num_workers, rank)
                     : PartitionRows(data.train.rows(), num_workers, rank);
  return data;
}

// The bytes every worker pushed so far, added up on the stats app: value bytes as
// encoded on the wire, the same values raw, key and length bytes as sent and raw, and
// every byte of the push messages (meta included, ZeroMQ's framing not: the van's
// count, which also holds these reports' own pushes). Each worker adds
// what it pushed since its last call; called by every worker before the evaluation
// barrier, so that after it the totals are the job's.
class PushedBytes {
 public:
  explicit PushedBytes(ps::KVWorker<float>* kv) : kv_(kv), stats_(kStatsApp, 0) {}
  void Report() {
    ps::RequestPipeline::Counters now = kv_->counters();
    const uint64_t wire = ps::Postoffice::Get()->van()->stats().push_request_bytes;
    std::vector<double> delta = {
        static_cast<double>(now.push_value_bytes - last_.push_value_bytes),
        static_cast<double>(now.push_raw_bytes - last_.push_raw_bytes),
        static_cast<double>(now.push_key_bytes - last_.push_key_bytes),
        static_cast<double>(now.push_raw_key_bytes - last_.push_raw_key_bytes),
        static_cast<double>(wire - last_wire_)};
    last_ = now;
    last_wire_ = wire;
    if (unknown_) return;
    ps::Status s = stats_.Wait(stats_.Push(kKeys, delta));
    if (!s.ok()) Lost("cannot report pushed bytes", s);
  }
  // The job's totals, in Report's order (NaN once unknown).
  std::vector<double> Totals() {
    std::vector<double> totals;
    if (!unknown_) {
      ps::Status s = stats_.Wait(stats_.Pull(kKeys, &totals));
      if (!s.ok()) Lost("cannot read pushed bytes", s);
    }
    if (unknown_) totals.assign(kKeys.size(), NAN);
    return totals;
  }

 private:
  // The counts live on one server, unreplicated (a plain KVServer): with
  // PS_REPLICATION >= 2 a dead server may have taken them along, and training goes on
  // without them. Without replication the job ends.
  void Lost(const char* what, const ps::Status& s) {
    if (ps::Postoffice::Get()->replication() < 2) {
      throw std::runtime_error(std::string(what) + ": " + s.ToString());
    }
    std::fprintf(stderr, "%s (%s): the pushed bytes are unknown from now on\n", what,
                 s.ToString().c_str());
    unknown_ = true;
  }

  const std::vector<ps::Key> kKeys = {0, 1, 2, 3, 4};
  bool unknown_ = false;
  ps::KVWorker<float>* kv_;
  ps::KVWorker<double> stats_;
  ps::RequestPipeline::Counters last_;
  uint64_t last_wire_ = 0;
};

int RunWorker(const TrainingData& data, bool* leave) {
  *leave = false;
  ps::KVWorker<float> kv(0, 0);
  kv.set_compression(CompressionFromFlags());
  PushedBytes pushed(&kv);
  const int rank = ps::MyRank();
  const int workers = ps::NumWorkers();
  const bool lead = rank == 0;
  const std::string consistency = ps::Postoffice::Get()->consistency().ToString();
  ClockPacer pacer(&kv, ClockEveryFromFlags(), StragglerOptionsFromFlags(workers), rank);
  std::FILE* metrics = nullptr;
  if (lead && !FLAGS_metrics_csv.empty()) {
    metrics = std::fopen(FLAGS_metrics_csv.c_str(), "w");
    if (!metrics) throw std::runtime_error("cannot write metrics to " + FLAGS_metrics_csv);
    std::fprintf(metrics,
                 "epoch,wall_seconds,train_loss,test_loss,accuracy,auc,consistency,clocks,"
                 "bytes_sent,raw_bytes_sent,key_bytes_sent,raw_key_bytes_sent,push_wire_bytes\n");
  }
  if (lead) {
    std::printf(
        "training on %zu examples (%zu %s), %llu features, %d workers, "
        "batch %d, %s lr=%g, compression %s\n",
        data.train.rows(), data.test.rows(), FLAGS_test.empty() ? "held out" : "in the test file",
        static_cast<unsigned long long>(data.num_features), workers, FLAGS_batch_size,
        FLAGS_optimizer.c_str(), FLAGS_lr, kv.compression().ToString().c_str());
  }
  // Every worker says which rows it trains on, so a run's partitioning is on record.
  if (FLAGS_partition == "label") {
    size_t positives = 0;
    for (size_t row : data.my_rows) positives += data.train.labels[row] > 0.5f ? 1 : 0;
    std::printf("worker %d: %zu training rows of %zu, %zu of them with label 1 (blocks of the "
                "rows sorted by label)\n", rank, data.my_rows.size(), data.train.rows(), positives);
  } else {
    std::printf("worker %d: training rows [%zu, %zu) of %zu (contiguous blocks)\n", rank,
                data.my_rows.empty() ? size_t{0} : data.my_rows.front(),
                data.my_rows.empty() ? size_t{0} : data.my_rows.back() + 1, data.train.rows());
  }
  std::vector<int64_t> position(data.num_features + 1, -1);
  const size_t local = data.my_rows.size();
  const size_t batch = FLAGS_batch_size == 0 ? local : static_cast<size_t>(FLAGS_batch_size);
  // Every worker runs as many step slots per epoch as the one with the most rows, so
  // all end the same number of clocks per epoch: under bsp a worker that ended fewer
  // would sit in the epoch's barrier while the others wait in Clock() for it.
  const size_t most_rows = (data.train.rows() + workers - 1) / workers;
  const size_t steps = FLAGS_batch_size == 0 ? 1 : (most_rows + batch - 1) / batch;
  // The same slots on every worker, so cdgrab's plugin sees the same n everywhere; a
  // slot past this worker's block is an empty step (a zero gradient for the order).
  const OrderChoice order_choice = OrderChoiceFromFlags();
  StepOrder order(order_choice, static_cast<int>(steps), static_cast<int>(data.num_features + 1),
                  OrderSeedFromFlags(), FLAGS_order_projection);
  const EarlyStop stop = EarlyStopFromFlags();
  ps::SArray<ps::Key> step_keys;
  ps::SArray<float> step_grad;
  double step_seconds = 0;  // training time after the warm-up epoch (PrintOrderSummary)
  int64_t timed_steps = 0;
  auto start = Clock::now();
  auto warm = start;  // the end of the warm-up epoch
  Evaluation last;
  std::vector<double> last_bytes(5, 0.0);  // the job's pushed bytes at the last evaluation
  for (int epoch = 1; epoch <= FLAGS_epochs; ++epoch) {
    auto epoch_start = Clock::now();
    if (epoch == 2) warm = epoch_start;
    auto next_report = epoch_start + std::chrono::seconds(2);
    if (lead && !order.none()) {
      std::printf("epoch %d order: slots %s ... (fingerprint %016llx)\n", epoch,
                  order.Head(8).c_str(), static_cast<unsigned long long>(order.Fingerprint()));
      std::fflush(stdout);
    }
    pacer.StartEpoch();
    for (size_t pos = 0; pos < steps; ++pos) {
      if (stop.KillsAt(rank, epoch, static_cast<int>(pos), static_cast<int>(steps))) {
        std::printf("worker %d stops after %d epochs (kill)\n", rank, stop.epoch);
        std::fflush(stdout);
        std::raise(SIGKILL);
      }
      const size_t at = static_cast<size_t>(order.slot(static_cast<int>(pos))) * batch;
      if (at < local) {
        Step(&kv, data, data.my_rows.data() + at, std::min(batch, local - at), &position,
             &step_keys, &step_grad);
        order.Report(static_cast<int>(pos), step_keys, step_grad);
      } else {
        order.ReportEmpty(static_cast<int>(pos));
      }
      pacer.AfterStep();
      if (lead && Clock::now() >= next_report) {  // progress inside long epochs
        std::printf("epoch %d: %3.0f%% of local data\n", epoch,
                    100.0 * std::min((pos + 1) * batch, local) / local);
        std::fflush(stdout);
        next_report = Clock::now() + std::chrono::seconds(2);
      }
    }
    pacer.AfterEpoch();
    // The closing barrier must not wait for a worker that waits in Clock(), nor the
    // plugin for a worker that runs no more epochs.
    if (epoch == FLAGS_epochs) {
      pacer.Finish();
      order.Finish();
    } else {
      order.NextEpoch();
    }
    if (epoch > 1 || FLAGS_epochs == 1) {
      step_seconds += std::chrono::duration<double>(Clock::now() - epoch_start).count();
      timed_steps += static_cast<int64_t>(steps);
    }
    bool evaluate = epoch % FLAGS_eval_every == 0 || epoch == FLAGS_epochs;
    if (!evaluate) continue;
    // Evaluate the model all workers reached at the end of this epoch.
    pushed.Report();
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
    if (lead) {
      const std::vector<double> bytes = pushed.Totals();
      double wall = std::chrono::duration<double>(Clock::now() - start).count();
      last = Evaluate(&kv, data);
      std::printf(
          "epoch %d/%d: train_loss %.6f  test_loss %.6f  accuracy %.4f  auc %.4f  "
          "(%.2f s)\n",
          epoch, FLAGS_epochs, last.train_loss, last.test_loss, last.accuracy, last.auc, wall);
      std::fflush(stdout);
      if (metrics) {
        std::fprintf(metrics, "%d,%.6f,%.9g,%.9g,%.9g,%.9g,%s,%lld,%.0f,%.0f,%.0f,%.0f,%.0f\n",
                     epoch, wall, last.train_loss, last.test_loss, last.accuracy, last.auc,
                     consistency.c_str(), static_cast<long long>(pacer.clocks()), bytes[0],
                     bytes[1], bytes[2], bytes[3], bytes[4]);
        std::fflush(metrics);
      }
      last_bytes = bytes;
    }
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
    if (stop.LeavesAfter(rank, epoch)) {
      std::printf("worker %d stops after %d epochs (leave)\n", rank, epoch);
      std::fflush(stdout);
      pacer.Finish();
      order.Finish();
      *leave = true;
      return 0;
    }
  }
  auto end = Clock::now();
  if (lead) {
    double wall = std::chrono::duration<double>(end - start).count();
    std::printf("final: train_loss %.6f test_loss %.6f accuracy %.4f auc %.4f wall %.2f s\n",
                last.train_loss, last.test_loss, last.accuracy, last.auc, wall);
    std::printf("pushed: %.0f value bytes on the wire for %.0f raw (%.1fx fewer), %.0f key bytes "
                "for %.0f raw, %.0f bytes of push messages in all\n",
                last_bytes[0], last_bytes[1],
                last_bytes[0] > 0 ? last_bytes[1] / last_bytes[0] : 0.0, last_bytes[2],
                last_bytes[3], last_bytes[4]);
    if (!FLAGS_save_model.empty()) {
      SaveModel(&kv, data, FLAGS_save_model);
      std::printf("model written to %s\n", FLAGS_save_model.c_str());
    }
  }
  if (metrics) std::fclose(metrics);
  PrintThroughput(rank, local, start, warm, end, consistency, pacer);
  if (!order.none()) {
    PrintOrderSummary(rank, order, order_choice.name(), FLAGS_epochs, step_seconds, timed_steps);
  }
  return 0;
}

}  // namespace linear
