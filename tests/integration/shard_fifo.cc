// Integration: the optimizer server keeps per-key order across its shard threads and
// answers every request exactly once.
//
// Each worker owns a disjoint set of keys and pushes many gradients to them without
// waiting, through an OptimizerServer running momentum (order-sensitive: the same
// gradients in another order give other weights) on T >= 2 shard threads per server.
// The worker replays the same updates locally with the same optimizer, in issue order;
// the pulled weights must equal the replay bit for bit. Each server counts the
// requests it answered and checks the total at the end.
#include <gflags/gflags.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "ps/optimizer_server.h"
#include "ps/ps.h"

DEFINE_int32(pushes, 3000, "asynchronous pushes per worker");
DEFINE_int32(keys, 24, "keys per worker (spread over servers and shards)");
DEFINE_int32(width, 3, "values per key");
DEFINE_int32(threads, 2, "shard threads per server");
DEFINE_string(checkpoint_dir, "", "servers resume from / save to this directory");
DEFINE_bool(save_checkpoint, false, "servers save a checkpoint when the job ends");
DEFINE_int32(skip_pushes, 0,
             "the first N pushes are already in the servers' checkpoint: replay them locally "
             "without sending");

namespace {

ps::OptimizerOptions Momentum() {
  ps::OptimizerOptions o;
  o.kind = ps::OptimizerKind::kMomentum;
  o.lr = 0.05;
  o.momentum = 0.9;
  return o;
}

float Gradient(int seq, int key_index, int j) {
  return static_cast<float>(std::sin(0.013 * seq + 0.7 * key_index + j) + 0.01 * (seq % 7));
}

int RunWorker() {
  ps::KVWorker<float> kv(0, 0);
  int rank = ps::MyRank();
  std::vector<ps::Key> keys;
  for (int i = 0; i < FLAGS_keys; ++i) {
    keys.push_back(static_cast<ps::Key>(rank) * 1000000 + static_cast<ps::Key>(i) * 37);
  }
  ps::SArray<ps::Key> zkeys(keys);
  size_t n = keys.size() * FLAGS_width;
  auto replay = ps::Optimizer::Create(Momentum());
  std::vector<float> w(n, 0.0f), state(n, 0.0f);
  std::vector<int> ts;
  for (int seq = 0; seq < FLAGS_pushes; ++seq) {
    ps::SArray<float> g(n);
    for (size_t k = 0; k < keys.size(); ++k) {
      for (int j = 0; j < FLAGS_width; ++j) {
        g[k * FLAGS_width + j] = Gradient(seq, static_cast<int>(k), j);
      }
    }
    if (seq >= FLAGS_skip_pushes) ts.push_back(kv.ZPush(zkeys, g));
    for (size_t k = 0; k < keys.size(); ++k) {
      replay->Update(&w[k * FLAGS_width], &state[k * FLAGS_width], &g[k * FLAGS_width],
                     FLAGS_width, seq + 1);
    }
  }
  int failed = 0;
  for (int t : ts) failed += !kv.Wait(t).ok();
  std::vector<float> pulled;
  ps::Status s = kv.Wait(kv.Pull(keys, &pulled));
  size_t mismatched = 0;
  for (size_t i = 0; i < n && i < pulled.size(); ++i) mismatched += pulled[i] != w[i];
  std::printf("worker %d: %d pushes, %zu keys, %zu of %zu values differ from the replay, "
              "%d failed, %llu duplicate answers\n",
              rank, FLAGS_pushes, keys.size(), mismatched, n, failed,
              static_cast<unsigned long long>(kv.dropped_answers()));
  bool ok = s.ok() && pulled.size() == n && mismatched == 0 && failed == 0 &&
            kv.dropped_answers() == 0;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0, argv[0]);
  std::unique_ptr<ps::OptimizerServer> server;
  if (ps::IsServer()) {
    ps::OptimizerServerOptions options;
    options.optimizer = Momentum();
    options.threads = FLAGS_threads;
    options.default_length = FLAGS_width;
    options.checkpoint_dir = FLAGS_checkpoint_dir;
    try {
      server = std::make_unique<ps::OptimizerServer>(0, options);
    } catch (const ps::Error& e) {
      std::fprintf(stderr, "server: %s\n", e.what());
      return 1;
    }
  }
  int rc = ps::IsWorker() ? RunWorker() : 0;
  ps::Finalize(0, true);
  if (server && FLAGS_save_checkpoint) {
    ps::Status s = server->SaveCheckpoint();
    std::printf("server %d: checkpoint %s after %llu pushes: %s\n", ps::MyRank(),
                server->CheckpointPath().c_str(),
                static_cast<unsigned long long>(server->pushes_taken()), s.ToString().c_str());
    if (!s.ok()) rc = 1;
  }
  if (server) {
    std::printf("server %d: %d shard threads, %zu keys, %llu requests answered\n", ps::MyRank(),
                server->num_threads(), server->NumKeys(),
                static_cast<unsigned long long>(server->requests_answered()));
  }
  return rc;
}
