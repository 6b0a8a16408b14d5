// Integration: an app's own update rule registered with OptimizerServer
// (OptimizerServerOptions::rule), exact against a local replay of the same rule.
//
// The rule keeps one float of state per value, a decaying sum of gradients, and steps
// by it clipped, divided by the key's step count: it reads state, step and gradient, so
// a server that called it otherwise than a built-in optimizer (another state layout,
// a step count off by one, a skipped or repeated update) gives other values.
//
// Every worker pushes `--clocks` gradients of known values to `--keys` keys of 3 values
// each, ending a clock after each push, then pulls every key and compares it, bit for
// bit, with the replay:
//  - default (asp): worker r pushes the keys k with k % W == r only, so each key sees
//    one worker's pushes, in order;
//  - --sync (run with PS_CONSISTENCY=bsp): every worker pushes every key, and the
//    server applies the rule once per clock with the mean of the workers' gradients.
// Then it checks that the server refuses a rule without a name. Prints "update rule:
// N values exact" per worker; exit 1 on a mismatch.
#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "ps/optimizer_server.h"
#include "ps/ps.h"

DEFINE_int32(keys, 40, "keys, 3 values each");
DEFINE_int32(clocks, 25, "pushes per worker");
DEFINE_bool(sync, false, "synchronous aggregation (run the job under bsp)");

namespace {

constexpr int kWidth = 3;
constexpr float kLr = 0.125f;
constexpr float kClip = 1.5f;

// m = m / 2 + g; w -= lr * clamp(m, -clip, clip) / step.
class DecayingClippedStep : public ps::Optimizer {
 public:
  DecayingClippedStep() : ps::Optimizer(ps::OptimizerOptions()) {}
  size_t StateWidth() const override { return 1; }
  void Update(float* w, float* state, const float* g, size_t n, int64_t step) const override {
    for (size_t i = 0; i < n; ++i) {
      state[i] = state[i] / 2 + g[i];
      w[i] -= kLr * std::clamp(state[i], -kClip, kClip) / static_cast<float>(step);
    }
  }
};

ps::Key KeyOf(int k) { return static_cast<ps::Key>(k) * 7919 + 3; }  // spread on the ring

// The gradient worker r pushes to value i of key k in clock c: small, exact in float.
float Gradient(int r, int c, int k, int i) {
  return static_cast<float>(((r + 1) * (c + 3) * (k % 7 + 1) * (i + 1)) % 11 - 5) * 0.25f;
}

bool Pushes(int r, int k, int workers) { return FLAGS_sync || k % workers == r; }

int RunWorker() {
  const int rank = ps::MyRank(), workers = ps::NumWorkers();
  ps::KVWorker<float> kv(0, 0);
  std::vector<int> mine;
  for (int k = 0; k < FLAGS_keys; ++k) {
    if (Pushes(rank, k, workers)) mine.push_back(k);
  }
  for (int c = 0; c < FLAGS_clocks; ++c) {
    std::vector<ps::Key> keys;
    std::vector<float> grads;
    for (int k : mine) {
      keys.push_back(KeyOf(k));
      for (int i = 0; i < kWidth; ++i) grads.push_back(Gradient(rank, c, k, i));
    }
    ps::Status s = kv.Wait(kv.Push(keys, grads));
    if (s.ok()) s = kv.Clock();
    if (!s.ok()) {
      std::fprintf(stderr, "worker %d: clock %d failed: %s\n", rank, c, s.ToString().c_str());
      return 1;
    }
  }
  ps::Status s = kv.FinishClocks();
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);

  // The replay, per key: the rule applied to each clock's gradient (under sync, the
  // mean of the workers' gradients, in float as the server computes it).
  std::vector<ps::Key> keys;
  for (int k = 0; k < FLAGS_keys; ++k) keys.push_back(KeyOf(k));
  std::vector<float> pulled;
  if (s.ok()) s = kv.Wait(kv.Pull(keys, &pulled));
  if (!s.ok()) {
    std::fprintf(stderr, "worker %d: pull failed: %s\n", rank, s.ToString().c_str());
    return 1;
  }
  DecayingClippedStep rule;
  int mismatches = 0;
  for (int k = 0; k < FLAGS_keys; ++k) {
    float w[kWidth] = {0, 0, 0}, m[kWidth] = {0, 0, 0};
    for (int c = 0; c < FLAGS_clocks; ++c) {
      float g[kWidth];
      for (int i = 0; i < kWidth; ++i) {
        float sum = 0;  // exact: the gradients are small multiples of 1/4
        int pushes = 0;
        for (int r = 0; r < workers; ++r) {
          if (!Pushes(r, k, workers)) continue;
          sum += Gradient(r, c, k, i);
          ++pushes;
        }
        g[i] = sum / static_cast<float>(pushes);
      }
      rule.Update(w, m, g, kWidth, c + 1);
    }
    for (int i = 0; i < kWidth; ++i) {
      const float got = pulled[static_cast<size_t>(k) * kWidth + i];
      if (std::memcmp(&got, &w[i], sizeof(float)) != 0 && mismatches++ < 5) {
        std::fprintf(stderr, "worker %d: key %d value %d: %.9g, the replay %.9g\n", rank, k, i,
                     got, w[i]);
      }
    }
  }
  if (mismatches) {
    std::fprintf(stderr, "worker %d: %d values differ from the replay\n", rank, mismatches);
    return 1;
  }
  std::printf("worker %d: update rule: %d values exact\n", rank, FLAGS_keys * kWidth);
  return 0;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0, argv[0]);
  std::unique_ptr<ps::OptimizerServer> server;
  int rc = 0;
  if (ps::IsServer()) {
    ps::OptimizerServerOptions options;
    options.rule = std::make_shared<DecayingClippedStep>();
    options.sync_aggregation = FLAGS_sync;
    options.rule_name = "";
    try {
      ps::OptimizerServer nameless(1, options);
      std::fprintf(stderr, "server: a rule without a name was accepted\n");
      rc = 1;
    } catch (const ps::Error& e) {
      std::printf("server: refused as expected: %s\n", e.what());
    }
    options.rule_name = "decaying_clipped_step";
    server = std::make_unique<ps::OptimizerServer>(0, options);
  }
  if (ps::IsWorker()) rc = RunWorker();
  if (rc != 0) {
    std::fflush(stdout);
    std::_Exit(rc);  // the launcher stops the others
  }
  ps::Finalize(0, true);
  return 0;
}
