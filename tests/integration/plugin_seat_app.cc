// Integration: the scheduler's plugin seat. A test plugin sums one number per live
// worker per round and notifies every worker of the total; workers talk to it with a
// SimpleApp. It shows that
//  - requests reach the plugin and its answers and notifications reach the workers;
//  - a slow plugin (it sleeps in round 0) delays nothing else: the workers' barriers
//    go on meanwhile;
//  - a malformed request is answered with an error, not a crash;
//  - with --leaver R, worker R exits without Finalize after round 1: the plugin learns
//    from the membership that it is dead and completes the next rounds without it.
#include <gflags/gflags.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <map>
#include <set>
#include <mutex>
#include <string>
#include <thread>

#include "ps/ps.h"
#include "ps/scheduler_plugin.h"
#include "ps/simple_app.h"

DEFINE_int32(rounds, 5, "rounds of sums");
DEFINE_int32(leaver, -1, "this worker rank exits without Finalize after round 1");
DEFINE_int32(slow_ms, 3000, "the plugin sleeps this long in round 0");

namespace {

constexpr int kApp = 50;
constexpr int kMalformed = -1;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
std::atomic<double> barriers_done_at{0};

// Sums each round's numbers, one per live worker, and notifies the workers.
class RoundSumPlugin : public ps::SchedulerPlugin {
 public:
  void OnRequest(const ps::SimpleData& req, ps::PluginContext* ctx) override {
    char* end = nullptr;
    long value = std::strtol(req.body.c_str(), &end, 10);
    if (req.head < 0 || req.body.empty() || *end) {
      ctx->RespondError(req, ps::Status::InvalidArgument("body '" + req.body +
                                                         "' is not a number"));
      return;
    }
    if (req.head == 0 && !slept_) {
      slept_ = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_slow_ms));
    }
    Round& round = rounds_[req.head];
    round.sum += value;
    round.from.insert(req.sender);
    ctx->Respond(req, "");
    MaybeComplete(req.head, ctx);
  }
  void OnMembershipChange(const ps::MembershipView& view, ps::PluginContext* ctx) override {
    std::printf("plugin: membership version %llu, %d live workers\n",
                static_cast<unsigned long long>(view.version),
                view.CountAlive(ps::Node::kWorkerRole));
    std::fflush(stdout);
    for (auto it = rounds_.begin(); it != rounds_.end();) {
      int head = it->first;
      ++it;  // MaybeComplete may erase the current entry
      MaybeComplete(head, ctx);
    }
  }

 private:
  struct Round {
    long sum = 0;
    std::set<int> from;
  };
  void MaybeComplete(int head, ps::PluginContext* ctx) {
    auto it = rounds_.find(head);
    if (it == rounds_.end()) return;
    for (int id : ctx->membership().Ids(ps::kWorkerGroup, /*alive_only=*/true)) {
      if (!it->second.from.count(id)) return;
    }
    ctx->Notify(ps::kWorkerGroup, head, std::to_string(it->second.sum));
    rounds_.erase(it);
  }
  std::map<int, Round> rounds_;
  bool slept_ = false;
};

int Fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  return 1;
}

int RunWorker() {
  int rank = ps::MyRank();
  int workers = ps::NumWorkers();
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, long> sums;
  ps::SimpleApp app(kApp, kApp);
  app.set_request_handle([&](const ps::SimpleData& req, ps::SimpleApp* self) {
    {
      std::lock_guard<std::mutex> lock(mu);
      sums[req.head] = std::atol(req.body.c_str());
    }
    cv.notify_all();
    self->Response(req);
  });

  // A malformed request is refused with an error.
  ps::Status s = app.Wait(app.Request(kMalformed, "not a number", ps::kScheduler));
  if (s.code() != ps::Status::Code::kInvalidArgument) {
    return Fail("malformed request: expected InvalidArgument, got " + s.ToString());
  }

  for (int r = 0; r < FLAGS_rounds; ++r) {
    auto sent = std::chrono::steady_clock::now();
    s = app.Wait(app.Request(r, std::to_string(rank + 1), ps::kScheduler));
    if (!s.ok()) return Fail("round " + std::to_string(r) + ": " + s.ToString());
    if (r == 0) {
      // The plugin slept before answering round 0; the barriers beside it must have
      // finished before that answer came.
      double answered = Now();
      std::printf("worker %d: round 0 answered after %.2f s\n", rank,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count());
      if (barriers_done_at.load() == 0 || barriers_done_at.load() > answered) {
        return Fail("barriers waited for the slow plugin");
      }
    }
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(60), [&] { return sums.count(r) > 0; })) {
      return Fail("no sum for round " + std::to_string(r));
    }
    long expect = 0;
    bool leaver_gone = FLAGS_leaver >= 0 && FLAGS_leaver < workers && r >= 2;
    for (int w = 0; w < workers; ++w) {
      if (!(leaver_gone && w == FLAGS_leaver)) expect += w + 1;
    }
    if (sums[r] != expect) {
      return Fail("round " + std::to_string(r) + ": sum " + std::to_string(sums[r]) +
                  ", expected " + std::to_string(expect));
    }
    lock.unlock();
    std::printf("worker %d: round %d sum %ld OK\n", rank, r, expect);
    std::fflush(stdout);
    if (rank == FLAGS_leaver && r == 1) {
      std::printf("worker %d: exits without Finalize\n", rank);
      std::fflush(stdout);
      std::_Exit(0);
    }
  }
  return 0;
}

// Runs while the plugin sleeps in round 0: barriers among the workers are served by
// the scheduler's control loop, not by the plugin's thread.
void BarriersDuringSlowPlugin() {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) ps::Postoffice::Get()->Barrier(1, ps::kWorkerGroup);
  barriers_done_at = Now();
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("worker %d: 5 barriers in %.3f s while the plugin sleeps\n", ps::MyRank(), took);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::RegisterSchedulerPlugin(kApp, [] { return std::make_unique<RoundSumPlugin>(); });
  ps::Start(0, argv[0]);
  int rc = 0;
  if (ps::IsWorker()) {
    std::thread barriers;
    // Round 0's request keeps the plugin busy; the barriers run beside it.
    barriers = std::thread(BarriersDuringSlowPlugin);
    rc = RunWorker();
    barriers.join();
  }
  ps::Finalize(0, rc == 0);
  return rc;
}
