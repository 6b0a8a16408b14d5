// hello: the smallest useful HerdPS app.
//
// Every worker pushes (rank + 1) to the same keys, waits for all workers to finish
// pushing, pulls the keys back and checks that each holds the sum over all workers,
// 1 + 2 + ... + W, times the number of rounds. Servers keep the values with the
// built-in KVServerDefaultHandle, which adds pushes together.
//
//   tracker/launch -n 4 -s 2 -- build/apps/hello --keys 1000
#include <gflags/gflags.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "ps/ps.h"

DEFINE_int32(keys, 1000, "number of keys each worker pushes and pulls");
DEFINE_int32(rounds, 3, "number of push rounds before the pull");
DEFINE_int32(values_per_key, 4, "values per key");

namespace {

int RunWorker() {
  ps::KVWorker<float> kv(/*app_id=*/0, /*customer_id=*/0);
  int rank = ps::MyRank();
  int workers = ps::NumWorkers();

  // Keys must be sorted and unique within one call. Spreading them out shows that
  // any 64-bit key works; the ring places each on a server.
  std::vector<ps::Key> keys(FLAGS_keys);
  for (int i = 0; i < FLAGS_keys; ++i) keys[i] = static_cast<ps::Key>(i) * 7919 + 1;
  std::vector<float> vals(keys.size() * FLAGS_values_per_key, static_cast<float>(rank + 1));

  int rc = 0;
  for (int r = 0; r < FLAGS_rounds && rc == 0; ++r) {
    // Push is asynchronous; Wait returns once every server involved acknowledged.
    ps::Status s = kv.Wait(kv.Push(keys, vals));
    if (!s.ok()) {
      std::fprintf(stderr, "push failed: %s\n", s.ToString().c_str());
      rc = 1;
    }
  }
  // Every worker has pushed everything once all have passed this barrier. A worker
  // whose push failed still comes here, so that the others are not left waiting.
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
  if (rc) return rc;

  std::vector<float> pulled;
  ps::Status s = kv.Wait(kv.Pull(keys, &pulled));
  if (!s.ok()) {
    std::fprintf(stderr, "pull failed: %s\n", s.ToString().c_str());
    return 1;
  }
  float expect = static_cast<float>(FLAGS_rounds) * workers * (workers + 1) / 2;
  size_t wrong = 0;
  for (float v : pulled) wrong += v != expect;
  if (pulled.size() != vals.size() || wrong) {
    std::fprintf(stderr, "worker %d: %zu of %zu values differ from %g\n", rank, wrong,
                 pulled.size(), expect);
    return 1;
  }
  std::printf("worker %d: pulled %zu keys x %d values, all equal %g: OK\n", rank, keys.size(),
              FLAGS_values_per_key, expect);
  return 0;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::SetUsageMessage("hello: push, pull and check sums (run under tracker/launch)");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  try {
    ps::Start(0, argv[0]);
    // The server object must live until Finalize: it answers requests until then.
    std::unique_ptr<ps::KVServer<float>> server;
    if (ps::IsServer()) {
      server = std::make_unique<ps::KVServer<float>>(0);
      server->set_request_handle(ps::KVServerDefaultHandle<float>());
    }
    int rc = ps::IsWorker() ? RunWorker() : 0;
    ps::Finalize(0, true);
    return rc;
  } catch (const ps::Error& e) {
    std::fprintf(stderr, "hello: %s\n", e.what());
    return 1;
  }
}
