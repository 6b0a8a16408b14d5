#include "optimizer_workload.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include "node_memory.h"
#include "ps/optimizer_server.h"
#include "ps/ps.h"

DEFINE_string(optimizers, "sgd,momentum,nesterov,adagrad,rmsprop,adam,amsgrad,ftrl",
              "optimizer workload: optimizers to measure");
DEFINE_string(server_threads, "1,2", "optimizer workload: shard threads per server to compare");
DEFINE_int32(keys_per_push, 20000, "optimizer workload: keys in one push");
DEFINE_int32(key_space, 200000, "optimizer workload: distinct keys each worker draws from");
DEFINE_bool(sequential_keys, false,
            "optimizer workload: push consecutive blocks of keys, walking the whole key space "
            "(to fill the servers with --key_space keys and measure memory per key)");
DEFINE_int32(push_window, 4, "optimizer workload: pushes in flight per worker");
DEFINE_double(optimizer_seconds, 1.0, "optimizer workload: measuring time per configuration");

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kStatsApp = 1000;  // a plain store where workers leave their counts

struct Config {
  ps::OptimizerKind kind;
  int threads;
};

std::vector<Config> Configs() {
  std::vector<Config> out;
  std::stringstream opts(FLAGS_optimizers);
  for (std::string name; std::getline(opts, name, ',');) {
    ps::OptimizerKind kind;
    ps::Status s = ps::ParseOptimizerKind(name, &kind);
    if (!s.ok()) throw ps::Error("--optimizers: " + s.message());
    std::stringstream threads(FLAGS_server_threads);
    for (std::string t; std::getline(threads, t, ',');) out.push_back({kind, std::stoi(t)});
  }
  return out;
}

struct Servers {
  std::vector<std::unique_ptr<ps::OptimizerServer>> optimizer;
  std::unique_ptr<ps::KVServer<double>> stats;
};

}  // namespace

std::shared_ptr<void> StartOptimizerServers() {
  auto servers = std::make_shared<Servers>();
  std::vector<Config> configs = Configs();
  for (size_t i = 0; i < configs.size(); ++i) {
    ps::OptimizerServerOptions o;
    o.optimizer.kind = configs[i].kind;
    o.optimizer.lr = 0.01;
    o.threads = configs[i].threads;
    servers->optimizer.push_back(
        std::make_unique<ps::OptimizerServer>(static_cast<int>(i) + 1, o));
  }
  servers->stats = std::make_unique<ps::KVServer<double>>(kStatsApp);
  servers->stats->set_request_handle(ps::KVServerDefaultHandle<double>());
  return servers;
}

int RunOptimizerWorkload(bool csv) {
  std::vector<Config> configs = Configs();
  ps::KVWorker<double> stats(kStatsApp, 0);
  int rank = ps::MyRank();
  // Pre-built pushes: sorted random key sets and gradients, so the worker's own cost
  // per push stays small and the server is the bottleneck.
  std::mt19937_64 rng(1234 + rank);
  std::vector<ps::SArray<ps::Key>> batches;
  for (int b = 0; b < 16; ++b) {
    std::set<ps::Key> keys;
    std::uniform_int_distribution<ps::Key> pick(0, FLAGS_key_space - 1);
    while (static_cast<int>(keys.size()) < std::min(FLAGS_keys_per_push, FLAGS_key_space)) {
      keys.insert(pick(rng));
    }
    batches.emplace_back(std::vector<ps::Key>(keys.begin(), keys.end()));
  }
  ps::SArray<float> grads(batches[0].size(), 0.001f);

  if (rank == 0) {
    if (csv) {
      std::printf("optimizer,threads,keys_per_s,speedup_vs_1_thread,pushes\n");
    } else {
      std::printf("%-9s %7s %14s %9s %8s\n", "optimizer", "threads", "keys/s", "speed-up",
                  "pushes");
    }
  }
  std::vector<double> rate_of(configs.size(), 0);
  int failures = 0;
  for (size_t c = 0; c < configs.size(); ++c) {
    ps::KVWorker<float> kv(static_cast<int>(c) + 1, 0);
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
    std::deque<int> in_flight;
    size_t next = 0;
    double keys_done = 0;
    int pushes = 0;
    auto start = Clock::now();
    auto deadline = start + std::chrono::duration<double>(FLAGS_optimizer_seconds);
    while (Clock::now() < deadline || !in_flight.empty()) {
      if (Clock::now() < deadline && static_cast<int>(in_flight.size()) < FLAGS_push_window) {
        ps::SArray<ps::Key> block;
        if (FLAGS_sequential_keys) {
          // Worker r walks its own stride of the key space, block by block.
          block.resize(FLAGS_keys_per_push);
          uint64_t first = (static_cast<uint64_t>(next++) * ps::NumWorkers() + rank) *
                           FLAGS_keys_per_push % static_cast<uint64_t>(FLAGS_key_space);
          for (int i = 0; i < FLAGS_keys_per_push; ++i) block[i] = first + i;
        }
        const auto& keys = FLAGS_sequential_keys ? block : batches[next++ % batches.size()];
        in_flight.push_back(kv.ZPush(keys, grads.segment(0, keys.size())));
        keys_done += static_cast<double>(keys.size());
        ++pushes;
        continue;
      }
      failures += !kv.Wait(in_flight.front()).ok();
      in_flight.pop_front();
    }
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    // Every worker's rate, added up on the stats app under key c.
    stats.Wait(stats.Push({static_cast<ps::Key>(c)}, {keys_done / secs}));
    stats.Wait(stats.Push({static_cast<ps::Key>(c + 100000)}, {static_cast<double>(pushes)}));
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
    if (rank != 0) continue;
    std::vector<double> total;
    stats.Wait(stats.Pull({static_cast<ps::Key>(c), static_cast<ps::Key>(c + 100000)}, &total));
    rate_of[c] = total[0];
    double base = 0;
    for (size_t b = 0; b < c; ++b) {
      if (configs[b].kind == configs[c].kind && configs[b].threads == 1) base = rate_of[b];
    }
    double speedup = base > 0 ? total[0] / base : 1.0;
    if (csv) {
      std::printf("%s,%d,%.0f,%.3f,%.0f\n", ps::OptimizerName(configs[c].kind),
                  configs[c].threads, total[0], speedup, total[1]);
    } else {
      std::printf("%-9s %7d %14.0f %9.2f %8.0f\n", ps::OptimizerName(configs[c].kind),
                  configs[c].threads, total[0], speedup, total[1]);
    }
    std::fflush(stdout);
  }
  if (failures) {
    std::fprintf(stderr, "bench: %d pushes failed (see the log)\n", failures);
    return 1;
  }
  return 0;
}

void ReportOptimizerServerMemory(const std::shared_ptr<void>& handle, double rss_start_mib) {
  auto* servers = static_cast<Servers*>(handle.get());
  size_t keys = 0, payload = 0;
  for (auto& s : servers->optimizer) {
    keys += s->NumKeys();
    payload += s->PayloadBytes();
  }
  double grown = (PeakRssMiB() - rss_start_mib) * 1024 * 1024;
  std::printf(
      "# server %d memory: %zu keys, payload (values + optimizer state) %.1f MiB, peak RSS "
      "growth %.1f MiB, %.1f bytes/key vs %.1f payload bytes/key (%.2fx)\n",
      ps::MyRank(), keys, payload / 1048576.0, grown / 1048576.0, keys ? grown / keys : 0.0,
      keys ? static_cast<double>(payload) / keys : 0.0, payload ? grown / payload : 0.0);
}

}  // namespace bench
