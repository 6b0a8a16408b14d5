// A thread waiting for an answer receives the data channel itself
// (Van::ReceiveWhileWaiting, van/zmq_van_wait.cc): it delivers messages in arrival order
// on its own thread until its condition holds, then leaves the socket parked; input
// that comes while nobody waits still reaches the receive thread, and so does a long
// queue the waiter leaves behind; a wait ends at its
// deadline, when woken, or when the van stops; a wait nested in a delivery and a second
// concurrent waiter return at once; with receive_in_wait off nothing changes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <map>
#include <set>
#include <stdexcept>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "ps/internal/van.h"
#include "recording_van.h"

namespace ps {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kForever = Clock::time_point::max();
// Bounds every wait of a test: far beyond what any step needs, so that only a broken
// van reaches it.
constexpr std::chrono::seconds kBound(20);

Message Small(int recipient, int head) {
  Message msg;
  msg.meta.sender = 9;
  msg.meta.recipient = recipient;
  msg.meta.head = head;
  msg.data.push_back(SArray<char>(16, static_cast<char>(head)));
  msg.meta.data_type.push_back(DataType::kChar);
  return msg;
}

// A client van (node 1 to the server) and a server van that echoes every message back
// to the client (node 2 to it), so that the client can wait for answers.
struct EchoPair {
  explicit EchoPair(bool receive_in_wait = true)
      : client([receive_in_wait](VanOptions* o) { o->receive_in_wait = receive_in_wait; }),
        server(nullptr, [this](const Message& msg) {
          Message back = Small(2, msg.meta.head);
          EXPECT_TRUE(server->Send(back, SendMode::kBlocking, Channel::kData).ok());
        }) {
    EXPECT_TRUE(client.status().ok());
    EXPECT_TRUE(server.status().ok());
    client.Reach(1, server);
    server.Reach(2, client);
  }
  // Sends request `head` and waits, receiving, until `count` answers are in; returns
  // what ReceiveWhileWaiting returned.
  uint64_t Call(int head, size_t count) {
    Status sent = client->Send(Small(1, head), SendMode::kBlocking, Channel::kData);
    EXPECT_TRUE(sent.ok()) << sent.message();
    if (!sent.ok()) return 0;
    return client->ReceiveWhileWaiting([&] { return client.count() >= count; },
                                       Clock::now() + kBound);
  }
  RecordingVan client;
  RecordingVan server;
};

// Whether the answers' heads are 1, 2, ..., n in this order.
bool InOrder(RecordingVan& van, int n) {
  auto got = van.Received();
  if (got.size() != static_cast<size_t>(n)) return false;
  for (int i = 0; i < n; ++i) {
    if (got[i].first.meta.head != i + 1) return false;
  }
  return true;
}

size_t DeliveredOn(RecordingVan& van, std::thread::id thread) {
  size_t n = 0;
  for (const auto& t : van.threads()) n += t == thread;
  return n;
}

// Starts a thread that waits (receiving) until `stop` is set; returns once a message
// has been delivered on that thread, so the caller knows it is receiving. The future
// ends with ReceiveWhileWaiting's result.
std::future<uint64_t> ReceivingWaiter(EchoPair& pair, std::atomic<bool>& stop,
                                      std::thread::id* waiter_thread) {
  std::promise<std::thread::id> started;
  auto id = started.get_future();
  auto result = std::async(std::launch::async, [&pair, &stop, p = std::move(started)]() mutable {
    p.set_value(std::this_thread::get_id());
    return pair.client->ReceiveWhileWaiting([&] { return stop.load(); }, kForever);
  });
  *waiter_thread = id.get();
  // Until one answer is delivered on the waiter's thread (the first ones may still
  // reach the receive thread while the waiter takes the socket over).
  const int base = static_cast<int>(pair.client.count());
  for (int head = base + 1;
       head <= base + 500 && DeliveredOn(pair.client, *waiter_thread) == 0; ++head) {
    EXPECT_TRUE(pair.client->Send(Small(1, head), SendMode::kBlocking, Channel::kData).ok());
    EXPECT_EQ(pair.client.WaitFor(static_cast<size_t>(head)), static_cast<size_t>(head));
  }
  EXPECT_GT(DeliveredOn(pair.client, *waiter_thread), 0u) << "the waiter never received";
  return result;
}

// Whether `wait` ends within kBound. If it does not, stops the van so that it does (the
// future's destructor waits for its thread) and the test fails instead of hanging.
bool EndsInTime(std::future<uint64_t>& wait, RecordingVan& van) {
  if (wait.wait_for(kBound) == std::future_status::ready) return true;
  van->Stop();
  wait.wait();
  return false;
}

TEST(WaitReceive, AnswersAreDeliveredOnTheWaitingThreadInArrivalOrder) {
  EchoPair pair;
  const int kRounds = 300;
  uint64_t in_wait = 0;
  for (int i = 1; i <= kRounds; ++i) in_wait += pair.Call(i, static_cast<size_t>(i));
  ASSERT_TRUE(InOrder(pair.client, kRounds));
  // Answers that came before the waiter had the socket went through the receive
  // thread; the rest were delivered by the waiter, and counted.
  EXPECT_GT(in_wait, 0u);
  EXPECT_EQ(DeliveredOn(pair.client, std::this_thread::get_id()), in_wait);
  EXPECT_EQ(pair.client->stats().received_in_wait, in_wait);
  EXPECT_EQ(pair.client->stats().received_messages, static_cast<uint64_t>(kRounds));
}

TEST(WaitReceive, InputWhileNobodyWaitsReachesTheReceiveThread) {
  EchoPair pair;
  const int kRounds = 50;
  for (int i = 1; i <= kRounds; ++i) pair.Call(i, static_cast<size_t>(i));
  ASSERT_GT(pair.client->stats().received_in_wait, 0u);
  // The socket is parked now. Requests whose answers nobody waits for:
  const int kUnwaited = 100;
  for (int i = kRounds + 1; i <= kRounds + kUnwaited; ++i) {
    ASSERT_TRUE(pair.client->Send(Small(1, i), SendMode::kBlocking, Channel::kData).ok());
  }
  ASSERT_EQ(pair.client.WaitFor(kRounds + kUnwaited), static_cast<size_t>(kRounds + kUnwaited));
  EXPECT_TRUE(InOrder(pair.client, kRounds + kUnwaited));
  auto threads = pair.client.threads();
  for (int i = kRounds; i < kRounds + kUnwaited; ++i) {
    EXPECT_NE(threads[i], std::this_thread::get_id()) << "answer " << i + 1;
  }
  // And a waiter takes the socket back from the receive thread.
  const uint64_t before = pair.client->stats().received_in_wait;
  for (int i = kRounds + kUnwaited + 1; i <= 2 * kRounds + kUnwaited; ++i) {
    pair.Call(i, static_cast<size_t>(i));
  }
  EXPECT_TRUE(InOrder(pair.client, 2 * kRounds + kUnwaited));
  EXPECT_GT(pair.client->stats().received_in_wait, before);
}

// A client whose requests are answered `answers` times at once (heads head, head + 1,
// ...; requests from kOnce on once), and which takes a while over each answer, so that
// answers queue up behind the one a waiter waits for. The server sends each answer on
// its own (PS_COALESCE=0): a batch reaches one receiver whole, and what these tests
// look at is who receives the answers queued behind the first.
struct BurstPair {
  static constexpr int kOnce = 10000;
  explicit BurstPair(int answers)
      : client(nullptr,
               [](const Message&) { std::this_thread::sleep_for(std::chrono::microseconds(200)); }),
        server([](VanOptions* o) { o->zmq.coalesce = false; },
               [this, answers](const Message& msg) {
          for (int i = 0; i < (msg.meta.head >= kOnce ? 1 : answers); ++i) {
            EXPECT_TRUE(server->Send(Small(2, msg.meta.head + i), SendMode::kBlocking,
                                     Channel::kData).ok());
          }
        }) {
    client.Reach(1, server);
    server.Reach(2, client);
  }
  // Sends request `head` and waits, receiving, for `count` answers in all.
  uint64_t Call(int head, size_t count) {
    EXPECT_TRUE(client->Send(Small(1, head), SendMode::kBlocking, Channel::kData).ok());
    return client->ReceiveWhileWaiting([&] { return client.count() >= count; },
                                       Clock::now() + kBound);
  }
  RecordingVan client;
  RecordingVan server;
};

// Long enough for the receive thread to notice that a waiter parked the socket and to
// watch it (it looks after 32 ms at most).
void LetTheReceiveThreadWatch() { std::this_thread::sleep_for(std::chrono::milliseconds(60)); }

TEST(WaitReceive, AWaiterLeavesAQueueToTheReceiveThread) {
  const int kAnswers = 100;
  // From a fresh van (the receive thread holds the socket), and after a parked spell
  // (the receive thread watches it). Whether the waiter or the receive thread gets the
  // first answer is a race, so each is tried until the waiter got it at least once
  // (and then left the rest queued); every try must deliver everything.
  for (bool watching : {false, true}) {
    SCOPED_TRACE(watching ? "receive thread watching" : "receive thread holding");
    bool waiter_got_one = false;
    for (int attempt = 0; attempt < 20 && !waiter_got_one; ++attempt) {
      BurstPair pair(kAnswers);
      if (watching) {
        // A waiter takes the socket over, gets its one answer and parks the socket.
        pair.Call(BurstPair::kOnce, 1);
        ASSERT_EQ(pair.client.Take().size(), 1u);
        LetTheReceiveThreadWatch();
      }
      uint64_t in_wait = pair.Call(1, 1);
      // The rest reach the receive thread (a parked socket would not signal them).
      ASSERT_EQ(pair.client.WaitFor(kAnswers), static_cast<size_t>(kAnswers));
      EXPECT_TRUE(InOrder(pair.client, kAnswers));
      EXPECT_LT(in_wait, static_cast<uint64_t>(kAnswers));
      waiter_got_one = in_wait >= 1;
    }
    EXPECT_TRUE(waiter_got_one);
  }
}

TEST(WaitReceive, StopEndsAWaitWhileTheReceiveThreadWatches) {
  EchoPair pair;
  pair.Call(1, 1);
  LetTheReceiveThreadWatch();
  std::atomic<bool> stop{false};
  std::thread::id waiter;
  auto result = ReceivingWaiter(pair, stop, &waiter);
  auto stopped = std::async(std::launch::async, [&] {
    pair.client->Stop();
    return uint64_t{0};
  });
  ASSERT_TRUE(EndsInTime(result, pair.client));
  ASSERT_EQ(stopped.wait_for(kBound), std::future_status::ready) << "Stop hangs";
}

TEST(WaitReceive, DeadlineEndsAWaitWithNothingToReceive) {
  EchoPair pair;
  pair.Call(1, 1);
  auto wait = std::async(std::launch::async, [&] {
    return pair.client->ReceiveWhileWaiting([] { return false; },
                                            Clock::now() + std::chrono::milliseconds(50));
  });
  ASSERT_TRUE(EndsInTime(wait, pair.client));
  EXPECT_EQ(wait.get(), 0u);
  // Still receiving afterwards, by whichever thread.
  ASSERT_TRUE(pair.client->Send(Small(1, 2), SendMode::kBlocking, Channel::kData).ok());
  EXPECT_EQ(pair.client.WaitFor(2), 2u);
}

TEST(WaitReceive, WakeReceivingWaiterEndsAWaitThatHasNothingToReceive) {
  EchoPair pair;
  std::atomic<bool> stop{false};
  std::thread::id waiter;
  auto result = ReceivingWaiter(pair, stop, &waiter);
  const size_t delivered = pair.client.count();
  stop = true;
  pair.client->WakeReceivingWaiter();
  ASSERT_TRUE(EndsInTime(result, pair.client)) << "the wake-up was lost";
  EXPECT_EQ(result.get(), DeliveredOn(pair.client, waiter));
  EXPECT_EQ(pair.client.count(), delivered);
}

TEST(WaitReceive, StopEndsAWait) {
  EchoPair pair;
  std::atomic<bool> stop{false};
  std::thread::id waiter;
  auto result = ReceivingWaiter(pair, stop, &waiter);
  pair.client->Stop();
  ASSERT_TRUE(EndsInTime(result, pair.client));
  EXPECT_GT(result.get(), 0u);
  // A wait on a stopped van returns at once.
  EXPECT_EQ(pair.client->ReceiveWhileWaiting([] { return false; }, kForever), 0u);
}

// A client whose server answers head h at once, or when h >= kSlowHeads after
// (1 + h - kSlowHeads) * kSlow; it keeps which heads arrived and on which thread.
struct SlowEchoPair {
  static constexpr int kSlowHeads = 1000;
  static constexpr std::chrono::milliseconds kSlow{300};
  SlowEchoPair()
      : client(nullptr,
               [this](const Message& msg) {
                 {
                   std::lock_guard<std::mutex> lock(mu);
                   arrived[msg.meta.head] = std::this_thread::get_id();
                   cv.notify_all();
                 }
                 client->WakeReceivingWaiter();  // the waiters' done() may hold now
               }),
        server(nullptr, [this](const Message& msg) {
          const int head = msg.meta.head;
          auto answer = [this, head] {
            EXPECT_TRUE(server->Send(Small(2, head), SendMode::kBlocking, Channel::kData).ok());
          };
          if (head < kSlowHeads) {
            answer();
            return;
          }
          // Later (each slow head kSlow after the one before it), from a thread of its
          // own, so that quick answers go on meanwhile.
          std::lock_guard<std::mutex> lock(mu);
          later.emplace_back([answer, head] {
            std::this_thread::sleep_for(kSlow * (1 + head - kSlowHeads));
            answer();
          });
        }) {
    client.Reach(1, server);
    server.Reach(2, client);
  }
  ~SlowEchoPair() {
    std::lock_guard<std::mutex> lock(mu);
    for (std::thread& t : later) t.join();
  }
  bool Arrived(int head) {
    std::lock_guard<std::mutex> lock(mu);
    return arrived.count(head) > 0;
  }
  // The thread that delivered `head`, waiting for it up to kBound.
  std::thread::id DeliveredBy(int head) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, kBound, [&] { return arrived.count(head) > 0; });
    return arrived.count(head) ? arrived[head] : std::thread::id();
  }
  // Sends `head` and waits for its answer, receiving; returns the thread it ran on.
  std::future<std::thread::id> Waiter(int head) {
    EXPECT_TRUE(client->Send(Small(1, head), SendMode::kBlocking, Channel::kData).ok());
    return std::async(std::launch::async, [this, head] {
      client->ReceiveWhileWaiting([this, head] { return Arrived(head); }, Clock::now() + kBound);
      return std::this_thread::get_id();
    });
  }
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, std::thread::id> arrived;
  std::vector<std::thread> later;  // the slow answers' threads
  RecordingVan client;
  RecordingVan server;
};

TEST(WaitReceive, ASecondWaiterLeavesItsAnswerToTheReceiveThreadToldWhenTheFirstIsDone) {
  // The first waiter holds the socket for a slow answer; a second starts waiting
  // meanwhile, for an answer that comes after the first is done. Threads that wait at
  // once do not receive (moving the socket between them costs more than it saves): the
  // second returns at once to wait in its caller, and when the first is done the
  // receive thread takes the socket over, told at once (not left to find it parked),
  // and delivers the second's answer.
  SlowEchoPair pair;
  auto first = pair.Waiter(SlowEchoPair::kSlowHeads);
  // Until the first waiter holds the socket (it is the only waiter, so an answer
  // received in a wait is its).
  for (int quick = 1; quick < 500 && pair.client->stats().received_in_wait == 0; ++quick) {
    ASSERT_TRUE(pair.client->Send(Small(1, quick), SendMode::kBlocking, Channel::kData).ok());
    pair.DeliveredBy(quick);
  }
  ASSERT_GT(pair.client->stats().received_in_wait, 0u) << "the first waiter never received";
  const uint64_t received_before = pair.client->stats().received_in_wait;
  auto second = pair.Waiter(SlowEchoPair::kSlowHeads + 1);
  ASSERT_EQ(second.wait_for(kBound), std::future_status::ready);
  EXPECT_FALSE(pair.Arrived(SlowEchoPair::kSlowHeads + 1))
      << "the second waiter waited in the van for its answer";
  ASSERT_EQ(first.wait_for(kBound), std::future_status::ready);
  EXPECT_EQ(pair.DeliveredBy(SlowEchoPair::kSlowHeads), first.get());
  const std::thread::id second_by = pair.DeliveredBy(SlowEchoPair::kSlowHeads + 1);
  ASSERT_NE(second_by, std::thread::id()) << "the second answer never came";
  // A message nobody waits for shows which thread is the receive thread.
  ASSERT_TRUE(pair.client->Send(Small(1, 600), SendMode::kBlocking, Channel::kData).ok());
  EXPECT_EQ(second_by, pair.DeliveredBy(600))
      << "the second answer was not delivered by the receive thread";
  EXPECT_NE(second_by, second.get());
  EXPECT_EQ(pair.client->stats().received_in_wait, received_before + 1)
      << "only the first waiter's own answer is received in a wait meanwhile";
}

TEST(WaitReceive, ADoneThatThrowsHandsTheSocketOn) {
  EchoPair pair;
  pair.Call(1, 1);
  ASSERT_EQ(pair.client.WaitFor(1), 1u);
  // A waiter whose condition throws once its answer is in, while it holds the socket.
  ASSERT_TRUE(pair.client->Send(Small(1, 2), SendMode::kBlocking, Channel::kData).ok());
  auto thrower = std::async(std::launch::async, [&] {
    try {
      pair.client->ReceiveWhileWaiting(
          [&]() -> bool {
            if (pair.client.count() >= 2) throw std::runtime_error("condition failed");
            return false;
          },
          Clock::now() + kBound);
    } catch (const std::runtime_error&) {
      return true;
    }
    return false;
  });
  ASSERT_EQ(thrower.wait_for(kBound), std::future_status::ready);
  EXPECT_TRUE(thrower.get()) << "the exception did not reach the waiter's caller";
  // The socket is received again: by another waiter, and by the receive thread.
  pair.Call(3, 3);
  ASSERT_EQ(pair.client.WaitFor(3), 3u) << "nobody receives the data channel any more";
  ASSERT_TRUE(pair.client->Send(Small(1, 4), SendMode::kBlocking, Channel::kData).ok());
  EXPECT_EQ(pair.client.WaitFor(4), 4u);
}

TEST(WaitReceive, AWaitNestedInADeliveryReturnsAtOnce) {
  std::atomic<Van*> van{nullptr};
  std::atomic<int> nested{0}, nested_received{0}, nested_ran_out{0};
  RecordingVan client(nullptr, [&](const Message&) {
    // Would wait until its deadline if it tried to take the socket its own delivery
    // holds (and could receive nothing).
    auto deadline = Clock::now() + std::chrono::seconds(1);
    nested_received += static_cast<int>(
        van.load()->ReceiveWhileWaiting([] { return false; }, deadline));
    nested_ran_out += Clock::now() >= deadline;
    ++nested;
  });
  van = client.operator->();
  RecordingVan server(nullptr, [&](const Message& msg) {
    EXPECT_TRUE(server->Send(Small(2, msg.meta.head), SendMode::kBlocking, Channel::kData).ok());
  });
  client.Reach(1, server);
  server.Reach(2, client);
  // First deliveries by the receive thread (nobody waits), then by this waiting
  // thread: both nest a wait.
  const int kUnwaited = 5;
  for (int i = 1; i <= kUnwaited; ++i) {
    ASSERT_TRUE(client->Send(Small(1, i), SendMode::kBlocking, Channel::kData).ok());
  }
  ASSERT_EQ(client.WaitFor(kUnwaited), static_cast<size_t>(kUnwaited));
  const int kRounds = 20;
  for (int i = kUnwaited + 1; i <= kRounds; ++i) {
    ASSERT_TRUE(client->Send(Small(1, i), SendMode::kBlocking, Channel::kData).ok());
    client->ReceiveWhileWaiting([&] { return client.count() >= static_cast<size_t>(i); },
                                Clock::now() + kBound);
  }
  ASSERT_EQ(client.WaitFor(kRounds), static_cast<size_t>(kRounds));
  EXPECT_EQ(nested.load(), kRounds);
  EXPECT_EQ(nested_received.load(), 0);
  EXPECT_EQ(nested_ran_out.load(), 0);
  EXPECT_GT(client->stats().received_in_wait, 0u);
}

TEST(WaitReceive, OffLeavesAllReceivingToTheReceiveThread) {
  EchoPair pair(/*receive_in_wait=*/false);
  const int kRounds = 50;
  for (int i = 1; i <= kRounds; ++i) {
    ASSERT_TRUE(pair.client->Send(Small(1, i), SendMode::kBlocking, Channel::kData).ok());
    // Returns at once (it would otherwise wait for good): the caller waits as usual.
    auto wait = std::async(std::launch::async, [&] {
      return pair.client->ReceiveWhileWaiting([] { return false; }, kForever);
    });
    ASSERT_TRUE(EndsInTime(wait, pair.client));
    EXPECT_EQ(wait.get(), 0u);
    ASSERT_EQ(pair.client.WaitFor(static_cast<size_t>(i)), static_cast<size_t>(i));
  }
  EXPECT_TRUE(InOrder(pair.client, kRounds));
  EXPECT_EQ(pair.client->stats().received_in_wait, 0u);
}

// Several threads of one process, each waiting for its own answers: how long each
// call takes, with the waiting threads receiving (receive_in_wait) and without.
struct WaitersPair {
  explicit WaitersPair(bool receive_in_wait)
      : receive_in_wait(receive_in_wait),
        client([receive_in_wait](VanOptions* o) { o->receive_in_wait = receive_in_wait; },
               [this](const Message& msg) {
                 {
                   std::lock_guard<std::mutex> lock(mu);
                   arrived.insert(msg.meta.head);
                   cv.notify_all();
                 }
                 client->WakeReceivingWaiter();  // the waiters' done() may hold now
               }),
        server(nullptr, [this](const Message& msg) {
          Message back = Small(2, msg.meta.head);
          EXPECT_TRUE(server->Send(back, SendMode::kBlocking, Channel::kData).ok());
        }) {
    client.Reach(1, server);
    server.Reach(2, client);
  }
  bool Arrived(int head) {
    std::lock_guard<std::mutex> lock(mu);
    return arrived.count(head) > 0;
  }
  // One request and its wait; returns the microseconds it took.
  double Call(int head) {
    auto start = Clock::now();
    EXPECT_TRUE(client->Send(Small(1, head), SendMode::kBlocking, Channel::kData).ok());
    client->ReceiveWhileWaiting([&] { return Arrived(head); }, Clock::now() + kBound);
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, kBound, [&] { return arrived.count(head) > 0; }))
        << "answer " << head << " never came";
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }
  // `threads` threads make `rounds` calls each; returns every call's time, sorted.
  std::vector<double> Run(int threads, int rounds) {
    std::vector<std::vector<double>> times(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([this, t, rounds, &times] {
        for (int i = 0; i < rounds; ++i) times[t].push_back(Call((t + 1) * 100000 + i));
      });
    }
    for (auto& w : workers) w.join();
    std::vector<double> all;
    for (auto& v : times) all.insert(all.end(), v.begin(), v.end());
    std::sort(all.begin(), all.end());
    return all;
  }
  const bool receive_in_wait;
  std::mutex mu;
  std::condition_variable cv;
  std::set<int> arrived;
  RecordingVan client;
  RecordingVan server;
};

double Percentile(const std::vector<double>& sorted, double p) {
  return sorted.empty() ? 0 : sorted[static_cast<size_t>(p * (sorted.size() - 1))];
}

TEST(WaitReceive, FourWaitingThreadsEachGetTheirAnswersWithItOnAndOff) {
  const int kThreads = 4, kRounds = 400;
  std::vector<double> on, off;
  // Interleaved, so that both see the same machine.
  for (int run = 0; run < 2; ++run) {
    for (bool in_wait : {true, false}) {
      WaitersPair pair(in_wait);
      auto t = pair.Run(kThreads, kRounds);
      std::vector<double>& times = in_wait ? on : off;
      times.insert(times.end(), t.begin(), t.end());
      if (!in_wait) {
        EXPECT_EQ(pair.client->stats().received_in_wait, 0u);
      }
    }
  }
  std::sort(on.begin(), on.end());
  std::sort(off.begin(), off.end());
  std::printf("4 waiting threads: p50 %.0f / %.0f us, p99 %.0f / %.0f us, max %.0f / %.0f us "
              "(receive in wait on / off)\n",
              Percentile(on, 0.5), Percentile(off, 0.5), Percentile(on, 0.99),
              Percentile(off, 0.99), on.back(), off.back());
}

}  // namespace
}  // namespace ps
