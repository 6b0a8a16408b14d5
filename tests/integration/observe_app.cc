// Integration: what the scheduler tells about a running job (docs/operability.md).
// Driven by observe_test.py, which starts the nodes, reads the scheduler's log and
// scrapes its metrics endpoint. Servers keep sums per key; the scheduler waits in
// ps::Finalize. Modes (--mode), as the workers see them:
//
//  clock_mismatch  Under BSP, worker 0 ends one clock more than the others, then every
//                  worker enters a worker barrier: worker 0 waits in Clock() for the
//                  others, who wait in the barrier for worker 0. The job hangs.
//  push_loop       Each worker pushes one key on every server and waits, for --run_s
//                  (a stopped server then leaves a request waiting).
//  counted         Each worker makes --pushes single-key pushes and then --pulls
//                  single-key pulls, waiting for each (and --pause_ms after each);
//                  says so, and goes on to
//                  ps::Finalize only once the file --hold_file exists.
#include <gflags/gflags.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "app_expect.h"
#include "ps/ps.h"

int failures = 0;  // app_expect.h

DEFINE_string(mode, "counted", "clock_mismatch | push_loop | counted");
DEFINE_double(run_s, 60, "push_loop: how long each worker pushes");
DEFINE_int32(pushes, 40, "counted: pushes per worker");
DEFINE_int32(pulls, 25, "counted: pulls per worker");
DEFINE_string(hold_file, "", "counted: workers finalize once this file exists");
DEFINE_int32(pause_ms, 0, "counted: pause after each request");
DEFINE_string(marker, "", "ignored; lets the test driver find this run's processes");

namespace {

struct Sums {
  std::map<ps::Key, float> sums;  // touched by the receive thread only

  void operator()(const ps::KVMeta& meta, const ps::KVPairs<float>& data,
                  ps::KVServer<float>* server) {
    ps::KVPairs<float> res;
    if (meta.push) {
      for (size_t i = 0; i < data.keys.size(); ++i) sums[data.keys[i]] += data.vals[i];
    }
    if (meta.pull) {
      res.keys = data.keys;
      for (ps::Key k : data.keys) res.vals.push_back(sums[k]);
    }
    server->Response(meta, res);
  }
};

// One key per server (the first key from `base` that each server owns).
std::vector<ps::Key> KeyPerServer(ps::Key base) {
  const auto& ring = ps::Postoffice::Get()->ring();
  std::vector<ps::Key> keys(ps::NumServers(), 0);
  std::vector<bool> found(ps::NumServers(), false);
  int left = ps::NumServers();
  for (ps::Key k = base; left > 0; ++k) {
    int s = ring.ServerOf(k);
    if (!found[s]) {
      found[s] = true;
      keys[s] = k;
      --left;
    }
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

int Worker() {
  const int rank = ps::MyRank();
  ps::KVWorker<float> kv(0, 0);
  if (FLAGS_mode == "clock_mismatch") {
    EXPECT(kv.Wait(kv.Push({1}, {1.0f})).ok(), "first push");
    EXPECT(kv.Clock().ok(), "first clock");
    if (rank == 0) {
      Say("worker 0: ending one clock more than the others");
      EXPECT(kv.Clock().ok(), "second clock");
    }
    Say("worker %d: entering the worker barrier", rank);
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
    Say("worker %d: passed the barrier (unexpected)", rank);
    return 0;
  }
  if (FLAGS_mode == "push_loop") {
    std::vector<ps::Key> keys = KeyPerServer(1000 * (rank + 1));
    std::vector<float> ones(keys.size(), 1.0f);
    Say("worker %d: pushing", rank);
    auto end = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(static_cast<int64_t>(FLAGS_run_s * 1000));
    while (std::chrono::steady_clock::now() < end) {
      ps::Status s = kv.Wait(kv.Push(keys, ones));
      if (!s.ok()) {
        Say("worker %d: push failed: %s", rank, s.ToString().c_str());
        return 1;
      }
    }
    return 0;
  }
  // counted
  const ps::Key key = 100 + static_cast<ps::Key>(rank);
  for (int i = 0; i < FLAGS_pushes; ++i) {
    EXPECT(kv.Wait(kv.Push({key}, {1.0f})).ok(), "push %d", i);
    std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_pause_ms));
  }
  std::vector<float> got;
  for (int i = 0; i < FLAGS_pulls; ++i) {
    EXPECT(kv.Wait(kv.Pull({key}, &got)).ok(), "pull %d", i);
    std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_pause_ms));
  }
  EXPECT(got.size() == 1 && got[0] == static_cast<float>(FLAGS_pushes), "pulled %g",
         got.empty() ? -1.0 : got[0]);
  Say("worker %d: did %d pushes and %d pulls", rank, FLAGS_pushes, FLAGS_pulls);
  while (!FLAGS_hold_file.empty() && access(FLAGS_hold_file.c_str(), F_OK) != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0);
  int rc = 0;
  std::unique_ptr<ps::KVServer<float>> server;
  if (ps::IsServer()) {
    server = std::make_unique<ps::KVServer<float>>(0);
    server->set_request_handle(Sums());
  }
  if (ps::IsWorker()) rc = Worker();
  ps::Finalize(0, true);
  return rc != 0 || failures != 0 ? 1 : 0;
}
