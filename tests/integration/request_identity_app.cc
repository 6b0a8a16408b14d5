// Integration: what a request becomes when it cannot be delivered as asked. Run under
// tracker/launch with 1 worker and 1 server; --scenario picks one:
//
//   too_large           (needs PS_MAX_MESSAGE_BYTES=1048576 on every node) a push of
//                       ~2.4 MB fails at the caller with InvalidArgument naming
//                       PS_MAX_MESSAGE_BYTES, nothing of it reaches the server, and a
//                       normal push afterwards works (with PS_RESEND=1 too: the push's
//                       sequence must not leave a gap the server waits on).
//   missing_app         (run with PS_HEARTBEAT_INTERVAL=0, so nothing else moves) one
//                       pull to an app id no server runs, and nothing else: the server
//                       holds it 10 s, then Wait returns NotFound naming the app.
//   recreated_customer  a KVWorker(0, 7) is destroyed with 300 requests in flight on a
//                       slow server; a new KVWorker(0, 7) then gets exactly its own 300
//                       answers, and counts the earlier one's as stale.
#include <gflags/gflags.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ps/ps.h"

DEFINE_string(scenario, "", "too_large | missing_app | recreated_customer");

namespace {

using Clock = std::chrono::steady_clock;

int failures = 0;
#define EXPECT(cond, ...)                         \
  do {                                            \
    if (!(cond)) {                                \
      std::printf("FAILED %s: ", #cond);          \
      std::printf(__VA_ARGS__);                   \
      std::printf("\n");                          \
      std::fflush(stdout);                        \
      ++failures;                                 \
    }                                             \
  } while (0)

constexpr auto kBound = std::chrono::seconds(60);  // no Wait in these tests may hang

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<ps::Key> Range(ps::Key from, ps::Key to) {
  std::vector<ps::Key> keys;
  for (ps::Key k = from; k < to; ++k) keys.push_back(k);
  return keys;
}

void TooLarge() {
  ps::KVWorker<float> kv(0, 0);
  // 200,000 keys of 8 bytes and values of 4: 2.4 MB against a 1 MiB limit.
  std::vector<ps::Key> big = Range(0, 200000);
  std::vector<float> ones(big.size(), 1.0f);
  auto t0 = Clock::now();
  int ts = kv.Push(big, ones);
  ps::Status s = kv.Wait(ts, kBound);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("too large push: %s (after %.3f s)\n", s.ToString().c_str(), secs);
  EXPECT(s.code() == ps::Status::Code::kInvalidArgument, "expected InvalidArgument, got %s",
         s.ToString().c_str());
  EXPECT(Contains(s.message(), "PS_MAX_MESSAGE_BYTES"), "the error does not name the limit");

  // Nothing of it was applied: the server has never seen key 0.
  std::vector<float> out;
  s = kv.Wait(kv.Pull({0}, &out), kBound);
  std::printf("pull of a key of the refused push: %s\n", s.ToString().c_str());
  EXPECT(s.code() == ps::Status::Code::kNotFound, "the refused push reached the server: %s",
         s.ToString().c_str());

  std::vector<ps::Key> small = Range(0, 1000);
  std::vector<float> vals;
  for (ps::Key k : small) vals.push_back(static_cast<float>(k) + 0.5f);
  s = kv.Wait(kv.Push(small, vals), kBound);
  EXPECT(s.ok(), "a normal push after the refused one failed: %s", s.ToString().c_str());
  s = kv.Wait(kv.Pull(small, &out), kBound);
  EXPECT(s.ok() && out == vals, "a pull after the refused push: %s, %zu values",
         s.ToString().c_str(), out.size());
  std::printf("normal push and pull after it: %s, %zu values\n", s.ToString().c_str(),
              out.size());
}

void MissingApp() {
  constexpr int kMissingApp = 3;  // the server runs app 0 only
  ps::KVWorker<float> kv(kMissingApp, kMissingApp);
  std::vector<float> out;
  auto t0 = Clock::now();
  int ts = kv.Pull({1, 2, 3}, &out);
  ps::Status s = kv.Wait(ts, kBound);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("request for app %d answered after %.2f s: %s\n", kMissingApp, secs,
              s.ToString().c_str());
  EXPECT(s.code() == ps::Status::Code::kNotFound, "expected NotFound, got %s",
         s.ToString().c_str());
  EXPECT(Contains(s.message(), "app " + std::to_string(kMissingApp)),
         "the error does not name the app");
  // Held for the 10 s grace, answered by the timer soon after (generous margin).
  EXPECT(secs >= 9.5 && secs <= 15.0, "answered after %.2f s, expected 10-15 s", secs);
}

void RecreatedCustomer() {
  const std::vector<ps::Key> pushed = Range(0, 100);  // pushed (k+1) by each push
  const std::vector<ps::Key> other = Range(1000, 1100);  // holds 7777, pulled by the old
  {
    ps::KVWorker<float> setup(0, 1);
    EXPECT(setup.Wait(setup.Push(other, std::vector<float>(other.size(), 7777.0f)), kBound).ok(),
           "setup push");
  }
  std::vector<float> increments;
  for (ps::Key k : pushed) increments.push_back(static_cast<float>(k + 1));

  constexpr int kOldRequests = 300;  // half pushes, half pulls
  std::vector<std::vector<float>> old_outs(kOldRequests);  // outlive the old worker
  size_t in_flight = 0;
  {
    ps::KVWorker<float> old_worker(0, 7);
    for (int i = 0; i < kOldRequests; ++i) {
      if (i % 2 == 0) {
        old_worker.Push(pushed, increments);
      } else {
        old_worker.Pull(other, &old_outs[i]);
      }
    }
    in_flight = old_worker.NumInFlight();
  }  // destroyed here, its answers still on their way (1 ms per request on the server)
  std::printf("old KVWorker(0, 7) destroyed with %zu of %d requests in flight\n", in_flight,
              kOldRequests);
  EXPECT(in_flight > 0, "no request was in flight: the test shows nothing");

  ps::KVWorker<float> fresh(0, 7);
  constexpr int kPulls = 300;
  std::vector<std::vector<float>> outs(kPulls);
  std::vector<int> stamps;
  for (int i = 0; i < kPulls; ++i) stamps.push_back(fresh.Pull(pushed, &outs[i]));
  int wrong = 0, failed = 0;
  for (int i = 0; i < kPulls; ++i) {
    ps::Status s = fresh.Wait(stamps[i], kBound);
    if (!s.ok()) {
      if (failed++ < 3) std::printf("pull %d: %s\n", i, s.ToString().c_str());
      continue;
    }
    bool same = outs[i].size() == pushed.size();
    for (size_t j = 0; same && j < pushed.size(); ++j) {
      same = outs[i][j] == (kOldRequests / 2) * increments[j];
    }
    wrong += !same;
  }
  std::printf("new KVWorker(0, 7): %d pulls, %d failed, %d wrong; stale_answers=%llu "
              "dropped_answers=%llu\n",
              kPulls, failed, wrong, static_cast<unsigned long long>(fresh.stale_answers()),
              static_cast<unsigned long long>(fresh.dropped_answers()));
  EXPECT(failed == 0 && wrong == 0, "answers for the old worker reached the new one");
  EXPECT(fresh.stale_answers() > 0, "no stale answer was counted");
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_scenario != "too_large" && FLAGS_scenario != "missing_app" &&
      FLAGS_scenario != "recreated_customer") {
    std::fprintf(stderr, "--scenario must be too_large, missing_app or recreated_customer\n");
    return 2;
  }
  ps::Start(0, argv[0]);
  std::unique_ptr<ps::KVServer<float>> server;
  if (ps::IsServer()) {
    server = std::make_unique<ps::KVServer<float>>(0);
    ps::KVServerDefaultHandle<float> store;
    bool slow = FLAGS_scenario == "recreated_customer";
    server->set_request_handle([store, slow](const ps::KVMeta& m, const ps::KVPairs<float>& d,
                                             ps::KVServer<float>* srv) mutable {
      if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      store(m, d, srv);
    });
  }
  if (ps::IsWorker()) {
    if (FLAGS_scenario == "too_large") TooLarge();
    if (FLAGS_scenario == "missing_app") MissingApp();
    if (FLAGS_scenario == "recreated_customer") RecreatedCustomer();
  }
  ps::Finalize(0, true);
  return failures ? 1 : 0;
}
