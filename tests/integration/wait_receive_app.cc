// Integration: a worker thread that waits receives the data channel itself
// (PS_RECEIVE_IN_WAIT, Van::ReceiveWhileWaiting), and every way of using the KV API
// stays exact around it: push/pull with a wait each; pushes whose callbacks nobody waits
// for (their answers reach the receive thread while the socket is parked); four
// threads of one worker, each waiting for its own requests at once; pushes with callbacks interleaved with waited pulls.
// Each worker has its own keys; the servers add (KVServerDefaultHandle), so every
// value is a count of pushes. --expect_in_wait says whether the worker's van must show
// answers received by waiting threads (1) or none (0).
#include <gflags/gflags.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "app_expect.h"
#include "ps/ps.h"

DEFINE_int32(rounds, 200, "requests per phase");
DEFINE_int32(expect_in_wait, 1, "1: some answers must be received by waiting threads; 0: none");

namespace {

int failures = 0;

// Counts callbacks; waits (bounded) for a number of them.
class CallbackCount {
 public:
  std::function<void()> Callback() {
    return [this] {
      std::lock_guard<std::mutex> lock(mu_);
      ++count_;
      cv_.notify_all();
    };
  }
  int WaitFor(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(60), [&] { return count_ >= n; });
    return count_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;
};

double PullOne(ps::KVWorker<double>& kv, ps::Key key) {
  std::vector<double> out;
  ps::Status s = kv.Wait(kv.Pull({key}, &out));
  EXPECT(s.ok() && out.size() == 1, "pull of key %llu: %s",
         static_cast<unsigned long long>(key), s.ToString().c_str());
  return out.empty() ? -1 : out[0];
}

int RunWorker() {
  ps::KVWorker<double> kv(0, 0);
  const int rank = ps::MyRank();
  const int n = FLAGS_rounds;
  // Five keys of this worker, spread over the servers by the ring.
  std::vector<ps::Key> key;
  for (int i = 0; i < 5; ++i) key.push_back((static_cast<ps::Key>(rank) << 40) + i * 7919 + 1);

  // 1. A push and a pull, each waited for.
  for (int i = 1; i <= n; ++i) {
    ps::Status s = kv.Wait(kv.Push({key[0]}, {1.0}));
    EXPECT(s.ok(), "push %d: %s", i, s.ToString().c_str());
    double v = PullOne(kv, key[0]);
    EXPECT(v == i, "round %d: pulled %g", i, v);
  }

  // 2. Pushes with callbacks and no wait: their answers come while no thread waits.
  CallbackCount unwaited;
  for (int i = 0; i < n; ++i) kv.Push({key[1]}, {1.0}, {}, 0, unwaited.Callback());
  int called = unwaited.WaitFor(n);
  EXPECT(called == n, "%d of %d callbacks ran", called, n);
  EXPECT(PullOne(kv, key[1]) == n, "key 1 holds %g", PullOne(kv, key[1]));

  // 3. Four threads of this worker, each waiting for its own pushes and pulls at once
  //    (the hand-over of the socket between waiting threads).
  const int kThreads = 4;
  std::vector<ps::Key> thread_key;
  for (int t = 0; t < kThreads; ++t) {
    thread_key.push_back((static_cast<ps::Key>(rank) << 40) + (t + 1) * 104729 + 3);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 1; i <= n; ++i) {
        ps::Status s = kv.Wait(kv.Push({thread_key[t]}, {1.0}));
        EXPECT(s.ok(), "thread %d push %d: %s", t, i, s.ToString().c_str());
        double v = PullOne(kv, thread_key[t]);
        EXPECT(v == i, "thread %d round %d: pulled %g", t, i, v);
      }
    });
  }
  for (auto& th : threads) th.join();

  // 4. A push with a callback, then a waited pull that must see it (per-key FIFO).
  CallbackCount interleaved;
  for (int i = 1; i <= n; ++i) {
    kv.Push({key[4]}, {1.0}, {}, 0, interleaved.Callback());
    double v = PullOne(kv, key[4]);
    EXPECT(v == i, "interleaved round %d: pulled %g", i, v);
  }
  called = interleaved.WaitFor(n);
  EXPECT(called == n, "%d of %d interleaved callbacks ran", called, n);

  ps::VanStats van = ps::Postoffice::Get()->van()->stats();
  if (FLAGS_expect_in_wait) {
    EXPECT(van.received_in_wait > 0, "no answer was received by a waiting thread");
  } else {
    EXPECT(van.received_in_wait == 0, "%llu answers received by waiting threads",
           static_cast<unsigned long long>(van.received_in_wait));
  }
  if (failures == 0) {
    Say("worker %d: exact; %llu of %llu messages received by waiting threads", rank,
        static_cast<unsigned long long>(van.received_in_wait),
        static_cast<unsigned long long>(van.received_messages));
  }
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0, argv[0]);
  std::unique_ptr<ps::KVServer<double>> server;
  if (ps::IsServer()) {
    server = std::make_unique<ps::KVServer<double>>(0);
    server->set_request_handle(ps::KVServerDefaultHandle<double>());
  }
  int rc = ps::IsWorker() ? RunWorker() : 0;
  ps::Finalize(0, true);
  return rc;
}
