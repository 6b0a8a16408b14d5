// Integration: how a job lives through a slow, frozen, killed or vanished node. Driven by
// liveness_test.py, which starts the nodes, signals them and checks what they print.
//
// Every node prints "liveness_app: <role> <rank> pid <pid> started" once it has joined.
// Modes (--mode), as the workers see them; servers serve and the scheduler waits in
// ps::Finalize:
//
//  slow_handle  Worker 0 sends one request that server app 0 answers only after
//               --slow_ms. Meanwhile both workers run --rounds rounds of a worker
//               barrier and (--own_thread) push/pull round trips to app 1, a second
//               server app on the same node; then worker 0 says whether the slow
//               request was still pending, and waits for it. With --own_thread both
//               server apps run on their own threads; without, app 0 has KVServer's
//               default delivery.
//  workload     Each worker pushes and pulls keys on every server, waiting for each
//               request, for --run_s. The first failed request is printed with the
//               wall-clock time (CLOCK_REALTIME, comparable with the driver's
//               time.time()) and the worker exits 1 (after --linger_ms).
//  rounds       Each worker does --rounds rounds of push, pull (checked) and a worker
//               barrier. Worker --quit_rank exits with code 0 without ps::Finalize
//               after round --quit_after.
//  callbacks    Worker 0 pushes --callbacks times with a callback; server app 0 never
//               answers. When the server dies, every request ends Unavailable and its
//               callback runs on the worker's own thread, where the first blocks
//               --block_ms (so the rest fill that thread's queue). The worker says how
//               many callbacks ran and how many requests ended Unavailable.
//
// A node whose ps::Finalize fails (ps::Error: the scheduler is gone) prints why and
// exits 1.
#include <gflags/gflags.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "app_expect.h"
#include "ps/ps.h"

DEFINE_string(mode, "workload", "slow_handle | workload | rounds | callbacks");
DEFINE_int32(callbacks, 6000, "callbacks: pushes with a callback that server app 0 never answers");
DEFINE_int32(block_ms, 6000, "callbacks: how long the first callback that runs blocks");
DEFINE_int32(slow_ms, 20000, "slow_handle: how long server app 0 holds the marked request");
DEFINE_bool(own_thread, true,
            "slow_handle: server apps run on their own threads (Customer::Delivery::kOwnThread) "
            "and the workers also make round trips to app 1; else app 0 has the default "
            "KVServer delivery and the workers only do barriers");
DEFINE_double(run_s, 30, "workload: how long each worker runs");
DEFINE_int32(linger_ms, 0,
             "workload: a worker whose request failed waits this long before it exits, so "
             "that under the launcher every worker reports before the job is stopped");
DEFINE_int32(rounds, 20, "rounds, slow_handle: rounds per worker");
DEFINE_int32(handle_after_ms, 0,
             "slow_handle: servers set their handles this long after Start, so that the "
             "workers' first requests arrive before them and are held");
DEFINE_int32(round_ms, 100, "rounds, slow_handle: pause between two rounds");
DEFINE_int32(quit_rank, -1, "rounds: this worker exits 0 without ps::Finalize ...");
DEFINE_int32(quit_after, 3, "rounds: ... after this many rounds");
DEFINE_string(marker, "", "ignored; lets the test driver find this run's processes");

namespace {

constexpr int kStoreApp = 0;   // the server app that workers load (and that sleeps)
constexpr int kBeaconApp = 1;  // slow_handle: a second server app on the same node
constexpr int kCmdSlow = 1;    // slow_handle: the request that app 0 answers late

double WallNow() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

const char* RoleName() {
  return ps::IsScheduler() ? "scheduler" : ps::IsServer() ? "server" : "worker";
}

// Prints why and ends the process with code 1 at once: the runtime's threads are not
// in a state to be joined after a failure, and the point is to exit.
[[noreturn]] void Fail(const std::string& why) {
  Say("%s %d: %s", RoleName(), ps::MyRank(), why.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

// A server app: push adds the pushed value to each key, pull returns the sums. A
// request with cmd == kCmdSlow is answered after --slow_ms.
struct Store {
  std::map<ps::Key, uint64_t> sums;  // used by the thread that runs the handle only

  void operator()(const ps::KVMeta& meta, const ps::KVPairs<uint64_t>& data,
                  ps::KVServer<uint64_t>* server) {
    if (meta.cmd == kCmdSlow) {
      Say("server %d: holding the slow request for %d ms", ps::MyRank(), FLAGS_slow_ms);
      std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_slow_ms));
      Say("server %d: answering the slow request", ps::MyRank());
    }
    ps::KVPairs<uint64_t> res;
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

// Sorted keys private to this worker, at least two on every server.
std::vector<ps::Key> KeysOnEveryServer(int rank) {
  const auto& ring = ps::Postoffice::Get()->ring();
  std::vector<int> per_server(ps::NumServers(), 0);
  std::vector<ps::Key> keys;
  for (ps::Key k = 1000 * (rank + 1);; ++k) {
    int& n = per_server[ring.ServerOf(k)];
    if (n < 2) {
      ++n;
      keys.push_back(k);
    }
    bool done = true;
    for (int c : per_server) done = done && c >= 2;
    if (done) return keys;
  }
}

int RunSlowHandleWorker() {
  int rank = ps::MyRank();
  ps::KVWorker<uint64_t> store(kStoreApp, 0);
  std::unique_ptr<ps::KVWorker<uint64_t>> beacon;
  if (FLAGS_own_thread) beacon = std::make_unique<ps::KVWorker<uint64_t>>(kBeaconApp, 1);
  std::atomic<bool> slow_done{false};
  int slow_ts = -1;
  double began = WallNow();
  if (rank == 0) {
    slow_ts = store.Push({1}, {1}, {}, kCmdSlow, [&] { slow_done = true; });
  }
  std::vector<ps::Key> mine = {100 + static_cast<ps::Key>(rank)};
  double last = began, longest_gap = 0;
  for (int r = 0; r < FLAGS_rounds; ++r) {
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
    if (beacon) {
      std::vector<uint64_t> got;
      ps::Status s = beacon->Wait(beacon->Push(mine, {1}));
      if (s.ok()) s = beacon->Wait(beacon->Pull(mine, &got));
      if (!s.ok()) Fail("a request to server app 1 failed: " + s.ToString());
      if (got.size() != 1 || got[0] != static_cast<uint64_t>(r + 1)) {
        Fail("server app 1 lost a push in round " + std::to_string(r));
      }
    }
    double now = WallNow();
    if (now - last > longest_gap) longest_gap = now - last;
    last = now;
    std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_round_ms));
  }
  Say("worker %d: %d rounds of barriers%s in %.2f s; longest gap between rounds %.2f s", rank,
      FLAGS_rounds, beacon ? " and app-1 round trips" : "", last - began, longest_gap);
  if (rank == 0) {
    // Every round counts only if it happened while the handle slept.
    Say("worker 0: the slow request was %s after the rounds",
        slow_done ? "already answered" : "still pending");
    ps::Status s = store.Wait(slow_ts);
    Say("worker 0: the slow request returned %s after %.2f s", s.ToString().c_str(),
        WallNow() - began);
    if (!s.ok()) return 1;
  }
  return 0;
}

int RunWorkloadWorker() {
  int rank = ps::MyRank();
  ps::KVWorker<uint64_t> kv(kStoreApp, 0);
  std::vector<ps::Key> keys = KeysOnEveryServer(rank);
  std::vector<uint64_t> ones(keys.size(), 1), got;
  double began = WallNow(), last_success = began;
  bool announced = false;
  while (WallNow() - began < FLAGS_run_s) {
    ps::Status s = kv.Wait(kv.Push(keys, ones));
    if (s.ok()) s = kv.Wait(kv.Pull(keys, &got));
    double now = WallNow();
    if (!s.ok()) {
      char text[128];
      std::snprintf(text, sizeof(text),
                    "request failed at %.3f, %.2f s after its last success: ", now,
                    now - last_success);
      Say("worker %d: %s%s", rank, text, s.ToString().c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_linger_ms));
      std::_Exit(1);
    }
    last_success = now;
    if (!announced) {
      Say("worker %d: workload running on %zu keys over %d servers", rank, keys.size(),
          ps::NumServers());
      announced = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Say("worker %d: no request failed in %.0f s", rank, FLAGS_run_s);
  return 0;
}

int RunRoundsWorker() {
  int rank = ps::MyRank();
  ps::KVWorker<uint64_t> kv(kStoreApp, 0);
  std::vector<ps::Key> keys = KeysOnEveryServer(rank);
  std::vector<uint64_t> ones(keys.size(), 1), got;
  for (int r = 0; r < FLAGS_rounds; ++r) {
    ps::Status s = kv.Wait(kv.Push(keys, ones));
    if (s.ok()) s = kv.Wait(kv.Pull(keys, &got));
    if (!s.ok()) Fail("round " + std::to_string(r) + " failed: " + s.ToString());
    for (uint64_t v : got) {
      if (v != static_cast<uint64_t>(r + 1)) Fail("round " + std::to_string(r) + ": wrong sum");
    }
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
    Say("worker %d: round %d done", rank, r);
    if (rank == FLAGS_quit_rank && r + 1 == FLAGS_quit_after) {
      Say("worker %d: exiting with code 0 without ps::Finalize", rank);
      std::_Exit(0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_round_ms));
  }
  Say("worker %d: finished %d rounds, all sums correct", rank, FLAGS_rounds);
  return 0;
}

// Worker 0 of --mode=callbacks: --callbacks pushes with callbacks that server app 0
// holds unanswered until the test kills the server; then every request ends early, and
// its callback goes to the worker's own thread, where the first one blocks --block_ms.
int RunCallbacksWorker() {
  ps::KVWorker<uint64_t> kv(kStoreApp, 0);
  std::atomic<int> ran{0};
  std::vector<int> timestamps;
  for (int i = 0; i < FLAGS_callbacks; ++i) {
    timestamps.push_back(kv.Push({static_cast<ps::Key>(i)}, {1}, {}, 0, [&ran] {
      if (ran.fetch_add(1) == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_block_ms));
      }
    }));
  }
  Say("worker 0: %d pushes wait for their answers", FLAGS_callbacks);
  const double began = WallNow();
  while (ran.load() < FLAGS_callbacks && WallNow() - began < 120) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // A customer remembers its newest 4096 failures: those are the ones Wait can tell.
  const size_t told = std::min<size_t>(timestamps.size(), 4096);
  size_t unavailable = 0;
  for (size_t i = timestamps.size() - told; i < timestamps.size(); ++i) {
    unavailable += kv.Wait(timestamps[i]).code() == ps::Status::Code::kUnavailable;
  }
  Say("worker 0: %d of %d callbacks ran; the newest %zu requests: %zu ended Unavailable",
      ran.load(), FLAGS_callbacks, told, unavailable);
  return ran.load() == FLAGS_callbacks && unavailable == told ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_mode != "slow_handle" && FLAGS_mode != "workload" && FLAGS_mode != "rounds" &&
      FLAGS_mode != "callbacks") {
    std::fprintf(stderr, "unknown --mode %s\n", FLAGS_mode.c_str());
    return 2;
  }
  ps::Start(0, argv[0]);
  Say("liveness_app: %s %d pid %d started", RoleName(), ps::MyRank(), static_cast<int>(getpid()));
  std::unique_ptr<ps::KVServer<uint64_t>> store, beacon;
  if (ps::IsServer()) {
    if (FLAGS_mode == "slow_handle" && FLAGS_own_thread) {
      constexpr auto kOwnThread = ps::Customer::Delivery::kOwnThread;
      store = std::make_unique<ps::KVServer<uint64_t>>(kStoreApp, kOwnThread);
      beacon = std::make_unique<ps::KVServer<uint64_t>>(kBeaconApp, kOwnThread);
      beacon->set_request_handle(Store());
    } else {
      store = std::make_unique<ps::KVServer<uint64_t>>(kStoreApp);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_handle_after_ms));
    if (FLAGS_mode == "callbacks") {
      // Holds every request: none is answered.
      store->set_request_handle(
          [](const ps::KVMeta&, const ps::KVPairs<uint64_t>&, ps::KVServer<uint64_t>*) {});
    } else {
      store->set_request_handle(Store());
    }
  }
  int rc = 0;
  if (ps::IsWorker()) {
    rc = FLAGS_mode == "slow_handle" ? RunSlowHandleWorker()
         : FLAGS_mode == "workload"  ? RunWorkloadWorker()
         : FLAGS_mode == "callbacks" ? RunCallbacksWorker()
                                     : RunRoundsWorker();
  }
  try {
    ps::Finalize(0, true);
  } catch (const ps::Error& e) {
    Fail(std::string("ps::Finalize failed: ") + e.what());
  }
  Say("%s %d: finalized", RoleName(), ps::MyRank());
  return rc;
}
