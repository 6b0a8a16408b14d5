// Integration: the consistency guarantees of BSP, SSP(s) and ASP, checked by the
// workers themselves through the public API only (KVWorker::Clock, CurrentClock,
// FinishClocks, and PS_CONSISTENCY set for the scheduler).
//
// Worker w owns key w, a vector with one slot per clock. In clock c it pushes 1 to
// slot c of its key (a tagged update: which worker, which clock), sleeps a random
// while, pulls every worker's key and checks what it sees:
//  - read guarantee: every slot c' <= c-s-1 of every counted worker is 1 (BSP: s = 0;
//    SSP(s); ASP: none), and every slot <= c of its own key (read-my-writes);
//  - clock gap: no worker is more than s clocks ahead of this one, so no slot beyond
//    c+s is set anywhere (it would be a push of a worker s+1 clocks ahead);
//  - nothing is counted twice: every slot is 0 or 1.
// Then it calls Clock() and checks that CurrentClock() moved by one.
//
// --leave_rank R --leave_at D --leave_how finish|finalize|exit|kill: worker R stops
// after ending D clocks (it finishes its clocks and idles, leaves the job, exits 0
// without Finalize, or kills itself); the others must still end all their clocks,
// and their checks of R's key stop at clock D-1.
#include <gflags/gflags.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ps/ps.h"

DEFINE_int32(clocks, 1000, "clocks every worker runs");
DEFINE_int32(staleness, -1, "the bound to check: 0 for bsp, S for ssp:S, -1 for asp");
DEFINE_int32(max_delay_us, 300, "each clock sleeps up to this long (random per clock)");
DEFINE_double(slow_prob, 0.02, "probability that a clock sleeps 20x longer");
DEFINE_int32(seed, 1, "random seed (each worker adds its rank)");
DEFINE_int32(leave_rank, -1, "this worker stops early (see --leave_how)");
DEFINE_int32(leave_at, 0, "the number of clocks the leaving worker ends first");
DEFINE_string(leave_how, "finish", "finish | finalize | exit | kill");
DEFINE_string(marker, "", "ignored: lets a test runner find its processes");

namespace {

long violations = 0;
long checks = 0;

void Violation(const char* what, int rank, int64_t clock, int other, int slot, float seen) {
  if (violations < 20) {
    std::fprintf(stderr, "VIOLATION (%s): worker %d at clock %lld sees worker %d slot %d = %g\n",
                 what, rank, static_cast<long long>(clock), other, slot, seen);
  }
  ++violations;
}

int RunWorker() {
  ps::KVWorker<float> kv(0, 0);
  const int rank = ps::MyRank();
  const int workers = ps::NumWorkers();
  const int slots = FLAGS_clocks;
  const int s = FLAGS_staleness;
  std::mt19937 rng(FLAGS_seed + 1000 * rank);
  std::uniform_int_distribution<int> delay(0, FLAGS_max_delay_us);
  std::bernoulli_distribution slow(FLAGS_slow_prob);

  std::vector<ps::Key> all_keys;
  for (int w = 0; w < workers; ++w) all_keys.push_back(static_cast<ps::Key>(w));
  const bool leaver = rank == FLAGS_leave_rank;
  // Every key exists (all zeros) before anyone pulls.
  kv.Wait(kv.Push({static_cast<ps::Key>(rank)}, std::vector<float>(slots, 0.0f)));
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
  for (int64_t c = 0; c < FLAGS_clocks; ++c) {
    if (leaver && c == FLAGS_leave_at) {
      std::printf("worker %d stops after %lld clocks (%s)\n", rank, static_cast<long long>(c),
                  FLAGS_leave_how.c_str());
      std::fflush(stdout);
      if (FLAGS_leave_how == "kill") raise(SIGKILL);
      if (FLAGS_leave_how == "exit") _exit(0);
      if (FLAGS_leave_how == "finish") {
        ps::Status f = kv.FinishClocks();
        if (!f.ok()) {
          std::fprintf(stderr, "FinishClocks failed: %s\n", f.ToString().c_str());
          return 1;
        }
      }
      // finish: stays in the job, ending no clocks, until the others are done (the
      // closing barrier in Finalize); finalize: leaves now.
      return 0;
    }
    if (kv.CurrentClock() != c) {
      std::fprintf(stderr, "CurrentClock() = %lld, expected %lld\n",
                   static_cast<long long>(kv.CurrentClock()), static_cast<long long>(c));
      return 1;
    }
    std::vector<float> tag(slots, 0.0f);
    tag[c] = 1.0f;
    kv.Wait(kv.Push({static_cast<ps::Key>(rank)}, tag));
    int us = delay(rng) * (slow(rng) ? 20 : 1);
    std::this_thread::sleep_for(std::chrono::microseconds(us));

    std::vector<float> seen;
    ps::Status pulled = kv.Wait(kv.Pull(all_keys, &seen));
    if (!pulled.ok() || seen.size() != static_cast<size_t>(workers) * slots) {
      std::fprintf(stderr, "pull at clock %lld failed: %s\n", static_cast<long long>(c),
                   pulled.ToString().c_str());
      return 1;
    }
    for (int w = 0; w < workers; ++w) {
      // A worker that stopped early ended clocks 0 .. leave_at-1 only.
      int64_t ended_limit = w == FLAGS_leave_rank ? FLAGS_leave_at : slots;
      for (int slot = 0; slot < slots; ++slot) {
        float v = seen[static_cast<size_t>(w) * slots + slot];
        ++checks;
        if (v != 0.0f && v != 1.0f) Violation("counted twice", rank, c, w, slot, v);
        bool must = w == rank ? slot <= c
                              : (s >= 0 && slot <= c - s - 1 && slot < ended_limit);
        if (must && v != 1.0f) Violation("missing push", rank, c, w, slot, v);
        if (s >= 0 && slot > c + s && v != 0.0f) Violation("clock gap", rank, c, w, slot, v);
      }
    }
    ps::Status ended = kv.Clock();
    if (!ended.ok()) {
      std::fprintf(stderr, "Clock() at %lld failed: %s\n", static_cast<long long>(c),
                   ended.ToString().c_str());
      return 1;
    }
  }
  if (kv.CurrentClock() != FLAGS_clocks) {
    std::fprintf(stderr, "CurrentClock() = %lld after %d clocks\n",
                 static_cast<long long>(kv.CurrentClock()), FLAGS_clocks);
    return 1;
  }
  std::printf("worker %d: %d clocks, %ld checks, %ld violations\n", rank, FLAGS_clocks, checks,
              violations);
  return violations == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_clocks < 1 || FLAGS_clocks > 100000) {
    std::fprintf(stderr, "--clocks must be in [1, 100000]\n");
    return 2;
  }
  ps::Start(0, argv[0]);
  std::unique_ptr<ps::KVServer<float>> server;
  if (ps::IsServer()) {
    server = std::make_unique<ps::KVServer<float>>(0);
    server->set_request_handle(ps::KVServerDefaultHandle<float>());
  }
  int rc = 0;
  if (ps::IsWorker()) rc = RunWorker();
  // A worker that leaves early skips the closing barrier: the others are still running.
  const bool leaves_now =
      ps::IsWorker() && ps::MyRank() == FLAGS_leave_rank && FLAGS_leave_how == "finalize";
  ps::Finalize(0, /*do_barrier=*/!leaves_now);
  return rc;
}
