#include "waiters_workload.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "measure.h"
#include "ps/ps.h"
#include "store_handle.h"
#include "workload_end.h"

DEFINE_int32(waiter_threads, 4, "waiters workload: threads of the worker, each waiting on its own");
DEFINE_string(waiter_sizes, "4096", "waiters workload: value sizes in bytes, comma-separated");
DECLARE_int32(rounds);
DECLARE_double(seconds);

namespace bench {
namespace {

constexpr int kApp = 0;

struct WaitersServer {
  std::unique_ptr<ps::KVServer<float>> server;
  StoreHandle store;
};

// Latencies of one setting over all its rounds, and the requests that failed.
struct Latencies {
  std::vector<double> us;
  int failures = 0;
};

// `threads` threads push then pull their own key, one request at a time, for `seconds`.
void MeasureRound(ps::KVWorker<float>* kv, size_t floats, int threads, double seconds,
                  Latencies* out) {
  std::vector<std::vector<double>> times(threads);
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      ps::SArray<ps::Key> key{static_cast<ps::Key>(1000 + t)};
      ps::SArray<float> vals(floats, 1.0f);
      ps::SArray<float> pulled(floats, 0.0f);
      while (Clock::now() < deadline) {
        auto start = Clock::now();
        failures += !kv->Wait(kv->ZPush(key, vals)).ok();
        auto pushed = Clock::now();
        failures += !kv->Wait(kv->ZPull(key, &pulled)).ok();
        auto done = Clock::now();
        times[t].push_back(std::chrono::duration<double, std::micro>(pushed - start).count());
        times[t].push_back(std::chrono::duration<double, std::micro>(done - pushed).count());
      }
    });
  }
  for (auto& w : workers) w.join();
  for (auto& v : times) out->us.insert(out->us.end(), v.begin(), v.end());
  out->failures += failures;
}

}  // namespace

std::shared_ptr<void> StartWaitersServer() {
  auto state = std::make_shared<WaitersServer>();
  state->server = std::make_unique<ps::KVServer<float>>(kApp);
  state->server->set_request_handle(state->store);
  return state;
}

int RunWaitersWorkload(bool csv) {
  if (ps::MyRank() != 0) {
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
    return 0;
  }
  ps::KVWorker<float> kv(kApp, 0);
  ps::Van* van = ps::Postoffice::Get()->van();
  const int threads = std::max(1, FLAGS_waiter_threads);
  const int rounds = std::max(1, FLAGS_rounds);
  int failures = 0;
  if (csv) {
    std::printf("size,threads,in_wait_p50_us,in_wait_p99_us,in_wait_max_us,off_p50_us,"
                "off_p99_us,off_max_us,p99_ratio,requests\n");
  } else {
    std::printf("%9s %7s %12s %12s %12s %12s %12s %12s %9s\n", "size", "threads", "in-wait p50",
                "in-wait p99", "in-wait max", "off p50", "off p99", "off max", "p99 ratio");
  }
  for (const std::string& size_text : SplitList(FLAGS_waiter_sizes)) {
    const size_t floats = std::max<size_t>(1, std::stoull(size_text) / 4);
    Latencies on, off;
    for (int r = 0; r < rounds; ++r) {
      // Alternate which goes first, so neither always follows the other.
      for (int turn = 0; turn < 2; ++turn) {
        const bool in_wait = (turn == 0) == (r % 2 == 0);
        van->SetPath("receive_in_wait", in_wait);
        MeasureRound(&kv, floats, threads, FLAGS_seconds / rounds, in_wait ? &on : &off);
      }
    }
    van->SetPath("receive_in_wait", ps::Postoffice::Get()->config().receive_in_wait);
    failures += on.failures + off.failures;
    std::sort(on.us.begin(), on.us.end());
    std::sort(off.us.begin(), off.us.end());
    const double on_p99 = Percentile(on.us, 0.99), off_p99 = Percentile(off.us, 0.99);
    const double on_max = on.us.empty() ? 0 : on.us.back();
    const double off_max = off.us.empty() ? 0 : off.us.back();
    const double ratio = off_p99 > 0 ? on_p99 / off_p99 : 0;
    const size_t bytes = floats * 4;
    if (csv) {
      std::printf("%zu,%d,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.3f,%zu\n", bytes, threads,
                  Percentile(on.us, 0.5), on_p99, on_max, Percentile(off.us, 0.5), off_p99, off_max,
                  ratio, on.us.size() + off.us.size());
    } else {
      std::printf("%9zu %7d %12.1f %12.1f %12.1f %12.1f %12.1f %12.1f %9.3f\n", bytes, threads,
                  Percentile(on.us, 0.5), on_p99, on_max, Percentile(off.us, 0.5), off_p99, off_max,
                  ratio);
    }
    std::fflush(stdout);
  }
  return EndWorkerRun(failures);
}

}  // namespace bench
