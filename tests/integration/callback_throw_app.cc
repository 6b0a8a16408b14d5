// Integration: a request whose callback throws still ends, exactly once, and Wait says
// so: Internal ("request N: its callback threw: ...") when the request itself
// succeeded, its own error when it failed. Run under tracker/launch with 1 worker and
// 1 server and PS_REQUEST_TIMEOUT=2. Every Wait here is bounded (kBound): a request
// left unfinished shows as a failed check, never as a hung test.
//
// The worker checks it where each kind of thread runs the callback:
//   1. pushes nobody waits for yet: the answer reaches the receive thread, which runs
//      the callback; Wait afterwards;
//   2. pushes waited for at once: with PS_RECEIVE_IN_WAIT on, the waiting thread
//      receives the answer and runs the callback (--expect_in_wait=1 asks that it did
//      at least once); with it off (--expect_in_wait=0), never;
//   3. a pull: its values are delivered before the callback throws;
//   4. a pull that fails on the server (a key never pushed): Wait returns NotFound;
//   5. a request without keys: its callback runs at once in Push, which must not throw;
//   6. a request that ends early (the server never answers it; PS_REQUEST_TIMEOUT):
//      the callback runs on the worker's own thread, Wait returns Timeout.
// Pushes are applied whatever their callbacks do: the pulled count shows it.
#include <gflags/gflags.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "app_expect.h"
#include "ps/ps.h"

DEFINE_int32(expect_in_wait, 1, "1: some callback must run on the waiting thread; 0: none may");

namespace {

int failures = 0;

constexpr auto kBound = std::chrono::seconds(10);
constexpr int kNeverAnswerCmd = 7;  // the server holds such requests without answering
constexpr ps::Key kCounted = 11;    // every push adds 1 here

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Callbacks that record where they ran, then throw.
class ThrowingCallbacks {
 public:
  // A callback that throws std::runtime_error(what), or an int when `what` is empty.
  std::function<void()> Make(const std::string& what) {
    return [this, what] {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++ran_;
        if (std::this_thread::get_id() == main_) ++on_main_;
      }
      cv_.notify_all();
      if (what.empty()) throw 42;
      throw std::runtime_error(what);
    };
  }
  // Waits (bounded) until n callbacks ran; returns how many did.
  int WaitFor(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kBound, [&] { return ran_ >= n; });
    return ran_;
  }
  int on_main() {
    std::lock_guard<std::mutex> lock(mu_);
    return on_main_;
  }

 private:
  const std::thread::id main_ = std::this_thread::get_id();
  std::mutex mu_;
  std::condition_variable cv_;
  int ran_ = 0;
  int on_main_ = 0;  // on this (the waiting) thread
};

void ExpectThrowNamed(const ps::Status& s, int ts, const std::string& what, const char* how) {
  const std::string want = "request " + std::to_string(ts) + ": its callback threw: " + what;
  EXPECT(s.code() == ps::Status::Code::kInternal && Contains(s.message(), want),
         "%s: Wait returned %s; want Internal with \"%s\"", how, s.ToString().c_str(),
         want.c_str());
}

int RunWorker() {
  ps::KVWorker<float> kv(0, 0);
  ThrowingCallbacks callbacks;
  int pushes = 0;
  int expected_calls = 0;

  // 1. The receive thread runs the callback: nobody waits until it has.
  for (int i = 0; i < 5; ++i) {
    const std::string what = "receive thread " + std::to_string(i);
    int ts = kv.Push({kCounted}, {1.0f}, {}, 0, callbacks.Make(what));
    ++pushes;
    ++expected_calls;
    EXPECT(callbacks.WaitFor(expected_calls) == expected_calls, "callback %d never ran", i);
    ExpectThrowNamed(kv.Wait(ts, kBound), ts, what, "push whose answer the receive thread got");
    if (failures) break;  // one unfinished request is proof enough; do not wait for more
  }
  EXPECT(callbacks.on_main() == 0, "%d callbacks ran on the thread that was not waiting",
         callbacks.on_main());

  // 2. Waited for at once: a waiting thread may receive the answer and run the callback.
  const int on_main_before = callbacks.on_main();
  for (int i = 0; i < 50; ++i) {
    const std::string what = i % 10 == 9 ? "" : "waited " + std::to_string(i);
    int ts = kv.Push({kCounted}, {1.0f}, {}, 0, callbacks.Make(what));
    ++pushes;
    ++expected_calls;
    ExpectThrowNamed(kv.Wait(ts, kBound), ts,
                     what.empty() ? "something that is not a std::exception" : what,
                     "push waited for at once");
    if (failures) break;
  }
  const int on_waiter = callbacks.on_main() - on_main_before;
  if (FLAGS_expect_in_wait) {
    EXPECT(failures || on_waiter > 0, "no callback of 50 ran on the waiting thread");
  } else {
    EXPECT(on_waiter == 0, "%d callbacks ran on the waiting thread with PS_RECEIVE_IN_WAIT=0",
           on_waiter);
  }

  // 3. A pull: the values reach the caller before its callback throws.
  std::vector<float> got;
  int ts = kv.Pull({kCounted}, &got, nullptr, 0, callbacks.Make("pull"));
  ++expected_calls;
  ExpectThrowNamed(kv.Wait(ts, kBound), ts, "pull", "pull");
  EXPECT(got.size() == 1 && got[0] == static_cast<float>(pushes),
         "pulled %zu values, the first %g; want %d pushes counted", got.size(),
         got.empty() ? -1.0 : got[0], pushes);

  // 4. A failed request keeps its own error.
  got.clear();
  ts = kv.Pull({12345}, &got, nullptr, 0, callbacks.Make("failed pull"));
  ++expected_calls;
  ps::Status s = kv.Wait(ts, kBound);
  EXPECT(s.code() == ps::Status::Code::kNotFound, "pull of a key never pushed: %s",
         s.ToString().c_str());

  // 5. No keys: the request ends inside Push, which runs the callback there.
  try {
    ts = kv.Push({}, {}, {}, 0, callbacks.Make("no keys"));
    ++expected_calls;
    ExpectThrowNamed(kv.Wait(ts, kBound), ts, "no keys", "push without keys");
  } catch (const std::exception& e) {
    EXPECT(false, "a push without keys threw its callback's exception: %s", e.what());
  }

  // 6. Ended early (PS_REQUEST_TIMEOUT): the callback runs on the worker's own thread.
  ts = kv.Push({kCounted + 1}, {1.0f}, {}, kNeverAnswerCmd, callbacks.Make("early end"));
  ++expected_calls;
  s = kv.Wait(ts, kBound);
  EXPECT(s.code() == ps::Status::Code::kTimeout && Contains(s.message(), "PS_REQUEST_TIMEOUT"),
         "request the server never answers: %s; want its own Timeout", s.ToString().c_str());

  EXPECT(callbacks.WaitFor(expected_calls) == expected_calls, "%d callbacks should have run",
         expected_calls);
  EXPECT(kv.NumInFlight() == 0, "%zu requests still in flight", kv.NumInFlight());
  if (failures == 0) {
    Say("worker: %d throwing callbacks, every request ended (%d on the waiting thread)",
        expected_calls, on_waiter);
  }
  return failures ? 1 : 0;
}

// KVServerDefaultHandle, except that requests with kNeverAnswerCmd are never answered.
class Server {
 public:
  Server() : server_(0) {
    server_.set_request_handle(
        [this](const ps::KVMeta& meta, const ps::KVPairs<float>& data, ps::KVServer<float>* s) {
          if (meta.cmd != kNeverAnswerCmd) store_(meta, data, s);
        });
  }

 private:
  ps::KVServerDefaultHandle<float> store_;
  ps::KVServer<float> server_;
};

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0, argv[0]);
  std::unique_ptr<Server> server;
  if (ps::IsServer()) server = std::make_unique<Server>();
  int rc = ps::IsWorker() ? RunWorker() : 0;
  ps::Finalize(0, true);
  return rc;
}
