// Customer (ps/internal/customer.h): request tracking and the own thread, on customers
// that are never opened, so no job is running: Postoffice::Get()->config() is a default
// Config (PS_REQUEST_TIMEOUT 300 s).
//
// No assertion here bounds how fast anything happens (the machine may be loaded): waits
// for something to happen give up only after kPatience.
#include "ps/internal/customer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "ps/internal/postoffice.h"

namespace ps {
namespace {

using Clock = Customer::Clock;
using std::chrono::milliseconds;

constexpr auto kPatience = std::chrono::seconds(10);
constexpr int kServer0 = 8;
constexpr int kServer1 = 10;

// True once `future` is ready, false if that takes longer than kPatience.
template <typename T>
bool Happens(const std::future<T>& future) {
  return future.wait_for(kPatience) == std::future_status::ready;
}

// A customer that is not registered with the Postoffice (no job needed).
std::shared_ptr<Customer> Unopened() {
  return std::make_shared<Customer>(/*app_id=*/0, /*customer_id=*/0, [](Message&) {},
                                    /*open_now=*/false);
}

// WaitRequest(ts) on a thread of its own that shares `c`, so a waiter that is never woken
// fails the test instead of hanging it.
std::future<Status> WaitInBackground(std::shared_ptr<Customer> c, int ts,
                                     milliseconds timeout = milliseconds::max()) {
  std::packaged_task<Status()> wait([c, ts, timeout] {
    return timeout == milliseconds::max() ? c->WaitRequest(ts) : c->WaitRequest(ts, timeout);
  });
  std::future<Status> result = wait.get_future();
  std::thread(std::move(wait)).detach();
  return result;
}

// How request `ts` ended: WaitRequest(ts), which should return at once here; an
// Internal status if it is still blocked after kPatience.
Status Outcome(const std::shared_ptr<Customer>& c, int ts) {
  std::future<Status> waited = WaitInBackground(c, ts);
  if (waited.wait_for(kPatience) != std::future_status::ready) {
    return Status::Internal("WaitRequest(" + std::to_string(ts) + ") still blocked after " +
                            std::to_string(kPatience.count()) + " s");
  }
  return waited.get();
}

Node NodeWithId(int id) {
  Node n;
  n.id = id;
  n.role = Node::kServerRole;
  return n;
}

// One call of the abort handle.
struct Aborted {
  int timestamp;
  uint64_t request_id;
  Status status;
};

// Installs an abort handle that records its calls and, like the real owners, finishes
// the request with the status it was given.
class AbortRecorder {
 public:
  explicit AbortRecorder(Customer* c) {
    c->set_abort_handle([this, c](int ts, uint64_t id, const Status& s) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        calls_.push_back({ts, id, s});
      }
      c->FinishRequest(ts, s);
    });
  }
  std::vector<Aborted> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::vector<Aborted> calls_;
};

TEST(Customer, ExistsWithoutAJobWhenNotOpened) {
  ASSERT_FALSE(Postoffice::Get()->started());
  auto c = Unopened();
  EXPECT_EQ(c->app_id(), 0);
  EXPECT_EQ(c->NumInFlight(), 0u);
  EXPECT_EQ(Postoffice::Get()->config().request_timeout_s, 300);
}

TEST(Customer, ASecondOfTheSameAppAndIdThrowsInsteadOfHanging) {
  // Open used to run Close while holding the lock Close takes: the process hung.
  Customer::Options own_thread;
  own_thread.delivery = Customer::Delivery::kOwnThread;
  Customer first(55, 0, [](Message&) {}, /*open_now=*/true, own_thread);
  auto second = std::async(std::launch::async, [&] {
    try {
      Customer again(55, 0, [](Message&) {}, /*open_now=*/true, own_thread);
      return std::string("opened");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  });
  ASSERT_EQ(second.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "opening a second customer of app 55, customer 0 hangs";
  EXPECT_NE(second.get().find("app 55 customer 0"), std::string::npos);
  first.Close();
  Customer third(55, 0, [](Message&) {}, /*open_now=*/true, own_thread);  // free again
}

TEST(Customer, TimestampsStartAtZeroAndCountUp) {
  auto c = Unopened();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(c->NewRequest(), i);
  EXPECT_EQ(c->NumInFlight(), 100u);
}

TEST(Customer, RequestIdsAreUniqueSixtyFourBitAndNamedByTheirTimestamp) {
  static_assert(std::is_same<decltype(&Customer::RequestIdOf), uint64_t (Customer::*)(int)>::value,
                "request ids are 64-bit");
  auto c = Unopened();
  std::set<uint64_t> ids;
  for (int i = 0; i < 1000; ++i) {
    uint64_t id = 0;
    int ts = c->NewRequest({kServer0}, &id);
    EXPECT_NE(id, 0u);  // 0 means "no request" to RequestIdOf
    EXPECT_TRUE(ids.insert(id).second) << "id " << id << " issued twice";
    EXPECT_EQ(c->RequestIdOf(ts), id);
  }
}

TEST(Customer, ConcurrentNewRequestsGetDistinctIdsAndTimestamps) {
  auto c = Unopened();
  constexpr int kThreads = 4, kEach = 2000;
  std::vector<std::vector<std::pair<int, uint64_t>>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        uint64_t id = 0;
        int ts = c->NewRequest({}, &id);
        got[t].emplace_back(ts, id);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<int> timestamps;
  std::set<uint64_t> ids;
  for (const auto& v : got) {
    for (const auto& [ts, id] : v) {
      timestamps.insert(ts);
      ids.insert(id);
    }
  }
  EXPECT_EQ(timestamps.size(), size_t{kThreads * kEach});
  EXPECT_EQ(ids.size(), size_t{kThreads * kEach});
  EXPECT_EQ(*timestamps.begin(), 0);
  EXPECT_EQ(*timestamps.rbegin(), kThreads * kEach - 1);
}

TEST(Customer, RequestIdOfIsZeroForAFinishedOrNeverIssuedTimestamp) {
  auto c = Unopened();
  EXPECT_EQ(c->RequestIdOf(0), 0u);
  int ts = c->NewRequest();
  EXPECT_NE(c->RequestIdOf(ts), 0u);
  EXPECT_EQ(c->RequestIdOf(ts + 1), 0u);
  c->FinishRequest(ts, Status::OK());
  EXPECT_EQ(c->RequestIdOf(ts), 0u);
}

TEST(Customer, WaitingOnANeverIssuedTimestampIsInvalidArgumentAtOnce) {
  auto c = Unopened();
  Status s = Outcome(c, 0);  // nothing issued yet
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("no request has this timestamp"), std::string::npos) << s;
  for (int i = 0; i < 3; ++i) c->NewRequest();
  for (int ts : {3, 1000, -1, kEmpty}) {
    EXPECT_EQ(Outcome(c, ts).code(), Status::Code::kInvalidArgument) << ts;
    EXPECT_EQ(c->WaitRequest(ts, milliseconds(1)).code(), Status::Code::kInvalidArgument) << ts;
  }
}

TEST(Customer, WaitOnAFinishedRequestReturnsAtOnce) {
  auto c = Unopened();
  int ts = c->NewRequest();
  c->FinishRequest(ts, Status::OK());
  EXPECT_TRUE(Outcome(c, ts).ok());
  EXPECT_TRUE(c->WaitRequest(ts, milliseconds(0)).ok());
  EXPECT_EQ(c->NumInFlight(), 0u);
}

TEST(Customer, FinishRequestWakesAWaiterOnAnotherThread) {
  auto c = Unopened();
  int ts = c->NewRequest();
  std::future<Status> waited = WaitInBackground(c, ts);
  EXPECT_EQ(waited.wait_for(milliseconds(50)), std::future_status::timeout)
      << "the wait returned before the request finished";
  c->FinishRequest(ts, Status::OK());
  ASSERT_TRUE(Happens(waited));
  EXPECT_TRUE(waited.get().ok());
}

// FinishRequest notifies only when a waiter sleeps. Answers that come before the wait,
// while the waiter is about to sleep, or long after it fell asleep must all end the
// wait, and none may be lost: a ping-pong with varying delays covers each case.
TEST(Customer, EveryFinishEndsItsWaitWhetherTheWaiterSleepsYetOrNot) {
  auto c = Unopened();
  constexpr int kRounds = 3000;
  std::atomic<int> issued{-1};
  std::atomic<bool> stop{false};
  std::thread answerer([&] {
    for (int i = 0; i < kRounds && !stop; ++i) {
      while (issued.load() != i && !stop) std::this_thread::yield();
      if (i % 3 == 1) std::this_thread::sleep_for(std::chrono::microseconds(20));
      if (i % 3 == 2) std::this_thread::sleep_for(std::chrono::microseconds(300));
      c->FinishRequest(i, i % 7 == 0 ? Status::NotFound("n") : Status::OK());
    }
  });
  int done = 0;
  for (int i = 0; i < kRounds; ++i) {
    int ts = c->NewRequest();
    ASSERT_EQ(ts, i);
    issued.store(ts);
    // A lost wake-up shows as a wait that ends only at its deadline (finished by then).
    auto began = std::chrono::steady_clock::now();
    Status s = c->WaitRequest(ts, kPatience);
    if (std::chrono::steady_clock::now() - began >= kPatience) {
      ADD_FAILURE() << "round " << i << " was not woken by its finish";
      break;
    }
    EXPECT_EQ(s.ok(), i % 7 != 0) << i;
    ++done;
  }
  stop = true;
  answerer.join();
  EXPECT_EQ(done, kRounds);
  EXPECT_EQ(c->NumInFlight(), 0u);
}

TEST(Customer, FinishingOneRequestWakesOnlyItsOwnWaiter) {
  auto c = Unopened();
  int first = c->NewRequest();
  int second = c->NewRequest();
  std::future<Status> w1 = WaitInBackground(c, first);
  std::future<Status> w2 = WaitInBackground(c, second);
  c->FinishRequest(second, Status::NotFound("gone"));
  ASSERT_TRUE(Happens(w2));
  EXPECT_EQ(w2.get().code(), Status::Code::kNotFound);
  EXPECT_EQ(w1.wait_for(milliseconds(50)), std::future_status::timeout);
  c->FinishRequest(first, Status::OK());
  ASSERT_TRUE(Happens(w1));
  EXPECT_TRUE(w1.get().ok());
}

TEST(Customer, TwoThreadsWaitingForTheSameRequestAreBothWoken) {
  auto c = Unopened();
  int other = c->NewRequest();
  int ts = c->NewRequest();
  std::future<Status> w1 = WaitInBackground(c, ts);
  std::future<Status> w2 = WaitInBackground(c, ts);
  std::future<Status> w3 = WaitInBackground(c, other);
  // Asleep by now, most likely: the finish must wake them, not find them before sleeping.
  EXPECT_EQ(w1.wait_for(milliseconds(50)), std::future_status::timeout);
  EXPECT_EQ(w2.wait_for(milliseconds(50)), std::future_status::timeout);
  c->FinishRequest(ts, Status::OK());
  ASSERT_TRUE(Happens(w1));
  ASSERT_TRUE(Happens(w2));
  EXPECT_TRUE(w1.get().ok());
  EXPECT_TRUE(w2.get().ok());
  EXPECT_EQ(w3.wait_for(milliseconds(50)), std::future_status::timeout);
  c->FinishRequest(other, Status::OK());
  ASSERT_TRUE(Happens(w3));
}

TEST(Customer, AWaiterThatGaveUpLeavesAnotherOnTheSameRequestToBeWoken) {
  auto c = Unopened();
  int ts = c->NewRequest();
  std::future<Status> forever = WaitInBackground(c, ts);
  std::future<Status> timed = WaitInBackground(c, ts, milliseconds(30));
  ASSERT_TRUE(Happens(timed));
  EXPECT_EQ(timed.get().code(), Status::Code::kTimeout);
  EXPECT_EQ(forever.wait_for(milliseconds(50)), std::future_status::timeout);
  c->FinishRequest(ts, Status::OK());
  ASSERT_TRUE(Happens(forever));
  EXPECT_TRUE(forever.get().ok());
}

TEST(Customer, ASecondFinishOfTheSameRequestIsIgnored) {
  auto c = Unopened();
  int failed = c->NewRequest();
  c->FinishRequest(failed, Status::Unavailable("server 0 is dead"));
  c->FinishRequest(failed, Status::OK());
  EXPECT_EQ(Outcome(c, failed).code(), Status::Code::kUnavailable);

  int succeeded = c->NewRequest();
  c->FinishRequest(succeeded, Status::OK());
  c->FinishRequest(succeeded, Status::Timeout("late"));
  EXPECT_TRUE(Outcome(c, succeeded).ok());
  EXPECT_EQ(c->NumInFlight(), 0u);
}

TEST(Customer, FinishingAnUnknownTimestampChangesNothing) {
  auto c = Unopened();
  int ts = c->NewRequest();
  c->FinishRequest(ts + 1, Status::OK());
  c->FinishRequest(-1, Status::OK());
  EXPECT_EQ(c->NumInFlight(), 1u);
  EXPECT_NE(c->RequestIdOf(ts), 0u);
}

TEST(Customer, AFailureIsReturnedByEveryLaterWait) {
  auto c = Unopened();
  int ts = c->NewRequest();
  c->FinishRequest(ts, Status::DataLoss("frame 2 truncated"));
  for (int i = 0; i < 3; ++i) {
    Status s = Outcome(c, ts);
    EXPECT_EQ(s.code(), Status::Code::kDataLoss);
    EXPECT_EQ(s.message(), "frame 2 truncated");
  }
}

TEST(Customer, OnlyTheNewestFailuresAreRememberedAnEvictedOneReadsOk) {
  auto c = Unopened();
  const int n = static_cast<int>(Customer::kMaxRememberedFailures) + 1;
  std::vector<int> ts;
  for (int i = 0; i < n; ++i) ts.push_back(c->NewRequest());
  for (int i = 0; i < n; ++i) {
    c->FinishRequest(ts[i], Status::Internal("failure " + std::to_string(i)));
  }
  EXPECT_TRUE(Outcome(c, ts[0]).ok()) << "the oldest failure should have been evicted";
  EXPECT_EQ(Outcome(c, ts[1]).message(), "failure 1");
  EXPECT_EQ(Outcome(c, ts[n - 1]).message(), "failure " + std::to_string(n - 1));
}

TEST(Customer, SuccessesDoNotEvictFailures) {
  auto c = Unopened();
  int failed = c->NewRequest();
  c->FinishRequest(failed, Status::Internal("kept"));
  for (size_t i = 0; i < Customer::kMaxRememberedFailures + 10; ++i) {
    c->FinishRequest(c->NewRequest(), Status::OK());
  }
  EXPECT_EQ(Outcome(c, failed).message(), "kept");
}

TEST(Customer, TimedWaitGivesUpWithTimeoutAndTheRequestGoesOn) {
  auto c = Unopened();
  uint64_t id = 0;
  int ts = c->NewRequest({kServer0}, &id);
  Clock::time_point start = Clock::now();
  Status s = c->WaitRequest(ts, milliseconds(30));
  EXPECT_GE(Clock::now() - start, milliseconds(30));
  EXPECT_EQ(s.code(), Status::Code::kTimeout) << s;
  EXPECT_NE(s.message().find("it goes on"), std::string::npos) << s;
  EXPECT_EQ(c->NumInFlight(), 1u);
  EXPECT_EQ(c->RequestIdOf(ts), id);

  std::future<Status> waited = WaitInBackground(c, ts, std::chrono::hours(1));
  c->FinishRequest(ts, Status::OK());
  ASSERT_TRUE(Happens(waited));
  EXPECT_TRUE(waited.get().ok());
}

TEST(Customer, AbortRequestsWaitingForANodeEndsOnlyThoseViaTheAbortHandle) {
  auto c = Unopened();
  AbortRecorder recorder(c.get());
  uint64_t id_a = 0, id_b = 0;
  int a = c->NewRequest({kServer0}, &id_a);
  int b = c->NewRequest({kServer1, kServer0}, &id_b);
  int other = c->NewRequest({kServer1}, nullptr);
  int none = c->NewRequest({}, nullptr);

  const Status dead = Status::Unavailable("server 0 (node 8) is dead");
  c->AbortRequestsWaitingFor(NodeWithId(kServer0), dead);

  std::vector<Aborted> calls = recorder.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].timestamp, a);
  EXPECT_EQ(calls[0].request_id, id_a);
  EXPECT_EQ(calls[1].timestamp, b);
  EXPECT_EQ(calls[1].request_id, id_b);
  for (const Aborted& call : calls) {
    EXPECT_EQ(call.status.code(), Status::Code::kUnavailable);
    EXPECT_EQ(call.status.message(), dead.message());
  }
  EXPECT_EQ(Outcome(c, a).message(), dead.message());
  EXPECT_EQ(Outcome(c, b).message(), dead.message());
  EXPECT_EQ(c->NumInFlight(), 2u);
  EXPECT_NE(c->RequestIdOf(other), 0u);
  EXPECT_NE(c->RequestIdOf(none), 0u);
}

TEST(Customer, AbortBoundedByARequestIdEndsOnlyTheRequestsRegisteredBeforeIt) {
  // A node replaced by a new process: what was registered before this node knew of the
  // new process ends, what it sent the new process since goes on.
  auto c = Unopened();
  AbortRecorder recorder(c.get());
  uint64_t id_old = 0, id_new = 0;
  int old_request = c->NewRequest({kServer0}, &id_old);
  const uint64_t bound = c->NextRequestId();
  EXPECT_EQ(bound, id_old + 1);
  int new_request = c->NewRequest({kServer0}, &id_new);
  EXPECT_EQ(id_new, bound);

  c->AbortRequestsWaitingFor(NodeWithId(kServer0), Status::Unavailable("replaced"), bound);

  std::vector<Aborted> calls = recorder.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].timestamp, old_request);
  EXPECT_EQ(calls[0].request_id, id_old);
  EXPECT_NE(c->RequestIdOf(new_request), 0u) << "a request to the new process goes on";
}

TEST(Customer, AbortForANodeNoRequestWaitsForDoesNothing) {
  auto c = Unopened();
  AbortRecorder recorder(c.get());
  c->NewRequest({kServer0}, nullptr);
  c->AbortRequestsWaitingFor(NodeWithId(9), Status::Unavailable("worker gone"));
  EXPECT_TRUE(recorder.calls().empty());
  EXPECT_EQ(c->NumInFlight(), 1u);
}

TEST(Customer, TheAbortHandleDecidesWhenTheRequestEnds) {
  auto c = Unopened();
  std::vector<int> told;
  c->set_abort_handle([&](int ts, uint64_t, const Status&) { told.push_back(ts); });
  int ts = c->NewRequest({kServer0}, nullptr);
  c->AbortRequestsWaitingFor(NodeWithId(kServer0), Status::Unavailable("dead"));
  EXPECT_EQ(told, std::vector<int>{ts});
  EXPECT_EQ(c->NumInFlight(), 1u) << "the owner, not the customer, finishes an aborted request";
  EXPECT_EQ(c->WaitRequest(ts, milliseconds(0)).code(), Status::Code::kTimeout);
}

TEST(Customer, WithoutAnAbortHandleAnAbortFinishesTheRequestItself) {
  auto c = Unopened();
  int ts = c->NewRequest({kServer0}, nullptr);
  c->AbortRequestsWaitingFor(NodeWithId(kServer0), Status::Unavailable("dead"));
  EXPECT_EQ(c->NumInFlight(), 0u);
  EXPECT_EQ(Outcome(c, ts).code(), Status::Code::kUnavailable);
}

TEST(Customer, AbortAllRequestsEndsEveryRequestWithTheStatus) {
  auto c = Unopened();
  AbortRecorder recorder(c.get());
  std::vector<int> ts = {c->NewRequest({kServer0}, nullptr), c->NewRequest({kServer1}, nullptr),
                         c->NewRequest({}, nullptr)};
  int done = c->NewRequest();
  c->FinishRequest(done, Status::OK());
  const Status gone = Status::Unavailable("the scheduler at tcp://127.0.0.1:1 has been silent");
  c->AbortAllRequests(gone);
  EXPECT_EQ(recorder.calls().size(), ts.size()) << "a finished request is not aborted";
  EXPECT_EQ(c->NumInFlight(), 0u);
  for (int t : ts) EXPECT_EQ(Outcome(c, t).message(), gone.message());
  EXPECT_TRUE(Outcome(c, done).ok());
}

TEST(Customer, ExpireRequestsEndsOnlyRequestsPastTheirDeadlineWithTimeout) {
  auto c = Unopened();
  AbortRecorder recorder(c.get());
  int old_request = c->NewRequest({kServer0}, nullptr);
  std::this_thread::sleep_for(milliseconds(5));
  Clock::time_point between = Clock::now();
  std::this_thread::sleep_for(milliseconds(5));
  int new_request = c->NewRequest({kServer0}, nullptr);

  c->ExpireRequests(Clock::now());  // nothing is 300 s old
  EXPECT_TRUE(recorder.calls().empty());
  EXPECT_EQ(c->NumInFlight(), 2u);

  // The old request's deadline is before between + 300 s, the new one's after.
  c->ExpireRequests(between + std::chrono::seconds(300));
  std::vector<Aborted> calls = recorder.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].timestamp, old_request);
  Status s = Outcome(c, old_request);
  EXPECT_EQ(s.code(), Status::Code::kTimeout) << s;
  EXPECT_NE(s.message().find("PS_REQUEST_TIMEOUT=300"), std::string::npos) << s;
  EXPECT_NE(c->RequestIdOf(new_request), 0u);

  c->ExpireRequests(Clock::now() + std::chrono::seconds(301));
  EXPECT_EQ(recorder.calls().size(), 2u);
  EXPECT_EQ(Outcome(c, new_request).code(), Status::Code::kTimeout);
  EXPECT_EQ(c->NumInFlight(), 0u);
}

TEST(Customer, IncarnationsOfCustomersDiffer) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 16; ++i) {
    uint64_t incarnation = Unopened()->incarnation();
    EXPECT_NE(incarnation, 0u);
    EXPECT_TRUE(seen.insert(incarnation).second) << "incarnation " << incarnation << " repeated";
  }
  auto c = Unopened();
  EXPECT_EQ(c->incarnation(), c->incarnation());
}

TEST(Customer, RunOnOwnThreadRunsInOrderOnOneThreadThatIsNotTheCallers) {
  constexpr int kTasks = 1000;
  std::vector<int> order;  // written only by the own thread
  std::set<std::thread::id> threads;
  std::promise<void> done;
  auto c = Unopened();  // after what its tasks use: closed first
  for (int i = 0; i < kTasks; ++i) {
    c->RunOnOwnThread([&, i] {
      order.push_back(i);
      threads.insert(std::this_thread::get_id());
      if (i == kTasks - 1) done.set_value();
    });
  }
  ASSERT_TRUE(Happens(done.get_future()));
  ASSERT_EQ(order.size(), size_t{kTasks});
  for (int i = 0; i < kTasks; ++i) ASSERT_EQ(order[i], i);
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_NE(*threads.begin(), std::this_thread::get_id());
  c->Close();
}

TEST(Customer, RunOnOwnThreadKeepsTheOrderOfSeveralPostingThreads) {
  constexpr int kThreads = 3, kEach = 500;
  std::vector<std::vector<int>> seen(kThreads);  // written only by the own thread
  // After what its tasks use: closed first.
  auto c = Unopened();
  std::vector<std::thread> posters;
  for (int t = 0; t < kThreads; ++t) {
    posters.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) c->RunOnOwnThread([&, t, i] { seen[t].push_back(i); });
    });
  }
  for (auto& p : posters) p.join();
  c->Close();  // runs what is queued
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(seen[t].size(), size_t{kEach}) << t;
    for (int i = 0; i < kEach; ++i) ASSERT_EQ(seen[t][i], i);
  }
}

TEST(Customer, CloseRunsWhatIsQueuedThenLaterTasksRunOnTheCaller) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> ran{0};
  auto c = Unopened();  // after what its tasks use: closed first
  std::thread releaser([&] {
    std::this_thread::sleep_for(milliseconds(20));
    release.set_value();
  });
  c->RunOnOwnThread([gate] { gate.wait(); });  // holds the own thread for a while
  for (int i = 0; i < 50; ++i) c->RunOnOwnThread([&] { ++ran; });
  c->Close();
  releaser.join();
  EXPECT_EQ(ran.load(), 50) << "Close returned before the queued tasks ran";

  std::thread::id ran_on;
  c->RunOnOwnThread([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  c->Close();  // idempotent
}

TEST(Customer, ATaskThatThrowsDoesNotStopTheOwnThread) {
  std::promise<void> after;
  auto c = Unopened();  // after what its tasks use: closed first
  c->RunOnOwnThread([] { throw std::runtime_error("app bug"); });
  c->RunOnOwnThread([&] { after.set_value(); });
  EXPECT_TRUE(Happens(after.get_future()));
}

TEST(Customer, ATaskThatThrowsSomethingNotAnExceptionDoesNotStopTheOwnThread) {
  std::promise<void> after;
  auto c = Unopened();
  c->RunOnOwnThread([] { throw 42; });  // an app may throw anything
  c->RunOnOwnThread([&] { after.set_value(); });
  EXPECT_TRUE(Happens(after.get_future()));
}

}  // namespace
}  // namespace ps
