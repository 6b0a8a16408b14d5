// Coalescing (PS_COALESCE, docs/architecture.md "Coalescing"): small data messages sent
// together in one frame arrive one by one, whole and in order; a server's receive
// thread answers a burst in batches; a large message on the link goes after the batch
// before it; what a user thread coalesced goes when the receive thread runs out of
// input, at the van's deadline when its hint asked for one, or at Stop; off, nothing is
// batched.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "ps/internal/van.h"
#include "recording_van.h"

namespace ps {
namespace {

using Clock = std::chrono::steady_clock;

// A data message to `recipient` with head `head` and a frame of `bytes` bytes whose
// content says which message it is.
Message Sized(int recipient, int head, size_t bytes) {
  Message msg;
  msg.meta.sender = 9;
  msg.meta.recipient = recipient;
  msg.meta.head = head;
  SArray<char> frame(bytes);
  for (size_t i = 0; i < bytes; ++i) frame[i] = static_cast<char>(head + i);
  msg.data.push_back(frame);
  msg.meta.data_type.push_back(DataType::kChar);
  return msg;
}

bool FrameIsIntact(const Message& msg, size_t bytes) {
  if (msg.data.size() != 1 || msg.data[0].size() != bytes) return false;
  for (size_t i = 0; i < bytes; ++i) {
    if (msg.data[0][i] != static_cast<char>(msg.meta.head + i)) return false;
  }
  return true;
}

// Whether `van` received messages with heads 1..n in this order, each frame intact.
void ExpectInOrder(RecordingVan& van, int n, size_t bytes) {
  auto got = van.Received();
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(got[i].first.meta.head, i + 1);
    EXPECT_EQ(got[i].second, Channel::kData);
    EXPECT_TRUE(FrameIsIntact(got[i].first, bytes)) << "message " << i + 1;
  }
}

// A client (node 1 to the server) and a server that answers every message on its
// receive thread (node 2 to it), as a KVServer's handle does.
struct AnsweringPair {
  explicit AnsweringPair(bool coalesce = true)
      : client([coalesce](VanOptions* o) { o->zmq.coalesce = coalesce; }),
        server([coalesce](VanOptions* o) { o->zmq.coalesce = coalesce; },
               [this](const Message& msg) {
                 Message back = Sized(2, msg.meta.head, 24);
                 EXPECT_TRUE(server->Send(back, SendMode::kBlocking, Channel::kData).ok());
               }) {
    EXPECT_TRUE(client.status().ok());
    EXPECT_TRUE(server.status().ok());
    client.Reach(1, server);
    server.Reach(2, client);
  }
  RecordingVan client;
  RecordingVan server;
};

TEST(Coalesce, ABurstGoesInBatchesBothWaysAndArrivesWholeAndInOrder) {
  AnsweringPair pair;
  constexpr int kMessages = 400;
  {
    CoalesceHint hint(true);
    for (int i = 1; i <= kMessages; ++i) {
      ASSERT_TRUE(pair.client->Send(Sized(1, i, 40), SendMode::kBlocking, Channel::kData).ok());
    }
  }
  pair.client->FlushCoalesced();
  ASSERT_EQ(pair.server.WaitFor(kMessages), static_cast<size_t>(kMessages));
  ASSERT_EQ(pair.client.WaitFor(kMessages), static_cast<size_t>(kMessages));
  ExpectInOrder(pair.server, kMessages, 40);
  ExpectInOrder(pair.client, kMessages, 24);
  VanStats c = pair.client->stats(), s = pair.server->stats();
  EXPECT_EQ(c.coalesced_messages, static_cast<uint64_t>(kMessages));
  EXPECT_GE(c.sent_batches, 1u);
  EXPECT_LT(c.sent_batches, static_cast<uint64_t>(kMessages));
  EXPECT_GE(s.received_batches, 1u);
  // The answers to what arrived together went together.
  EXPECT_GE(s.coalesced_messages, 1u);
  EXPECT_LT(s.sent_batches, static_cast<uint64_t>(kMessages));
  EXPECT_EQ(c.dropped_messages + s.dropped_messages, 0u);
}

TEST(Coalesce, ABatchStaysWithinWhatTheReceiverAccepts) {
  auto small_limit = [](VanOptions* o) { o->max_message_bytes = 2048; };
  RecordingVan client(small_limit), server(small_limit);
  client.Reach(1, server);
  constexpr int kMessages = 400;
  {
    CoalesceHint hint(true);
    for (int i = 1; i <= kMessages; ++i) {
      ASSERT_TRUE(client->Send(Sized(1, i, 40), SendMode::kBlocking, Channel::kData).ok());
    }
  }
  client->FlushCoalesced();
  ASSERT_EQ(server.WaitFor(kMessages), static_cast<size_t>(kMessages));
  ExpectInOrder(server, kMessages, 40);
  VanStats c = client->stats(), s = server->stats();
  EXPECT_EQ(c.coalesced_messages, static_cast<uint64_t>(kMessages));
  // About 36 KiB of messages in batches of at most 2 KiB (one batch without the limit).
  EXPECT_GE(c.sent_batches, 15u);
  EXPECT_EQ(s.dropped_messages, 0u);
}

TEST(Coalesce, ALargeMessageGoesAfterTheBatchBeforeIt) {
  RecordingVan client, server;
  client.Reach(1, server);
  {
    CoalesceHint hint(true);
    for (int i = 1; i <= 10; ++i) {
      ASSERT_TRUE(client->Send(Sized(1, i, 100), SendMode::kBlocking, Channel::kData).ok());
    }
  }
  // 8 KiB: not coalesced; it takes the link's batch with it, in front.
  ASSERT_TRUE(client->Send(Sized(1, 11, 8192), SendMode::kBlocking, Channel::kData).ok());
  ASSERT_EQ(server.WaitFor(11), 11u);
  auto got = server.Received();
  for (int i = 0; i < 11; ++i) {
    EXPECT_EQ(got[i].first.meta.head, i + 1);
    EXPECT_TRUE(FrameIsIntact(got[i].first, i < 10 ? 100 : 8192)) << i + 1;
  }
  EXPECT_EQ(client->stats().coalesced_messages, 10u);
}

TEST(Coalesce, TheReceiveThreadSendsWhatAUserThreadCoalescedWhenItRunsOutOfInput) {
  RecordingVan client, server;
  client.Reach(1, server);
  server.Reach(2, client);
  // Any input makes the receive thread flush when it is done with it: the server's
  // connection shows itself first (a probe), so one message on it, received, makes sure
  // that is over before the batch.
  ASSERT_TRUE(server->Send(Sized(2, 99, 8), SendMode::kBlocking, Channel::kData).ok());
  ASSERT_EQ(client.WaitFor(1), 1u);
  {
    CoalesceHint hint(true);
    for (int i = 1; i <= 5; ++i) {
      ASSERT_TRUE(client->Send(Sized(1, i, 8), SendMode::kBlocking, Channel::kData).ok());
    }
  }
  // The batch waits (for an answer on its way, in a worker)...
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(server.count(), 0u);
  // ...which the client's receive thread handles, and then it runs out of input.
  ASSERT_TRUE(server->Send(Sized(2, 100, 8), SendMode::kBlocking, Channel::kData).ok());
  ASSERT_EQ(client.WaitFor(2), 2u);
  ASSERT_EQ(server.WaitFor(5), 5u);
  ExpectInOrder(server, 5, 8);
  EXPECT_EQ(client->stats().sent_batches, 1u);
}

// Waits up to 10 s for the van's deadline flushes to reach `n`.
uint64_t DeadlineFlushesWithin10s(RecordingVan& van, uint64_t n) {
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (van->stats().deadline_flushes < n && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return van->stats().deadline_flushes;
}

TEST(Coalesce, WhatAThreadCoalescedWithADeadlineGoesWithoutAFlush) {
  // Longer than five sends take even on a busy machine: they go in one batch.
  auto delay = [](VanOptions* o) { o->zmq.coalesce_first_delay = std::chrono::milliseconds(50); };
  RecordingVan client(delay), server;
  client.Reach(1, server);
  {
    // The first request of a window: nothing is on its way that would make anyone flush.
    CoalesceHint hint(true, /*deadline=*/true);
    for (int i = 1; i <= 5; ++i) {
      ASSERT_TRUE(client->Send(Sized(1, i, 8), SendMode::kBlocking, Channel::kData).ok());
    }
  }
  ASSERT_EQ(server.WaitFor(5), 5u);
  ExpectInOrder(server, 5, 8);
  ASSERT_GE(DeadlineFlushesWithin10s(client, 1), 1u);
  VanStats c = client->stats();
  EXPECT_EQ(c.coalesced_messages, 5u);
  // Nothing else flushed: every batch went by the deadline (one, unless the sends were
  // held up longer than the delay; the batch is counted before the flush that sent it).
  EXPECT_GE(c.sent_batches, 1u);
  EXPECT_EQ(DeadlineFlushesWithin10s(client, c.sent_batches), c.sent_batches);
}

TEST(Coalesce, AFlushBeforeTheDeadlineDisarmsIt) {
  // A delay long against the pauses below, short for a test.
  auto delay = [](VanOptions* o) { o->zmq.coalesce_first_delay = std::chrono::seconds(1); };
  RecordingVan client(delay), server;
  client.Reach(1, server);
  for (int round = 1; round <= 20; ++round) {
    {
      CoalesceHint hint(true, /*deadline=*/true);
      ASSERT_TRUE(client->Send(Sized(1, round, 8), SendMode::kBlocking, Channel::kData).ok());
    }
    client->FlushCoalesced();  // as a worker's Wait does
  }
  ASSERT_EQ(server.WaitFor(20), 20u);
  ExpectInOrder(server, 20, 8);
  EXPECT_EQ(client->stats().sent_batches, 20u);
  // Had a flush left the first deadline armed, a message coalesced 0.8 s later would go
  // with it, 0.2 s after; disarmed, its own deadline is a full second away. Looked at
  // 0.45 s after it: a sleep that overruns by up to 0.55 s does not fail the test.
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  {
    CoalesceHint hint(true, /*deadline=*/true);
    ASSERT_TRUE(client->Send(Sized(1, 21, 8), SendMode::kBlocking, Channel::kData).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(450));
  EXPECT_EQ(server.count(), 20u);
  EXPECT_EQ(client->stats().deadline_flushes, 0u);
  ASSERT_EQ(server.WaitFor(21), 21u);
  EXPECT_EQ(DeadlineFlushesWithin10s(client, 1), 1u);
}

TEST(Coalesce, WithCoalesceFirstOffAHintWithADeadlineCoalescesNothing) {
  auto first_off = [](VanOptions* o) { o->zmq.coalesce_first = false; };
  RecordingVan client(first_off), server;
  client.Reach(1, server);
  auto send_three = [&](int from) {
    CoalesceHint hint(true, /*deadline=*/true);
    for (int i = from; i < from + 3; ++i) {
      ASSERT_TRUE(client->Send(Sized(1, i, 8), SendMode::kBlocking, Channel::kData).ok());
    }
  };
  send_three(1);
  ASSERT_EQ(server.WaitFor(3), 3u);
  EXPECT_EQ(client->stats().coalesced_messages, 0u);
  // Switched on at run time, the same hint coalesces (and the deadline sends them).
  EXPECT_TRUE(client->SetPath("coalesce_first", true));
  send_three(4);
  ASSERT_EQ(server.WaitFor(6), 6u);
  ExpectInOrder(server, 6, 8);
  EXPECT_EQ(client->stats().coalesced_messages, 3u);
  // A hint without a deadline coalesces either way.
  EXPECT_TRUE(client->SetPath("coalesce_first", false));
  {
    CoalesceHint hint(true);
    ASSERT_TRUE(client->Send(Sized(1, 7, 8), SendMode::kBlocking, Channel::kData).ok());
  }
  client->FlushCoalesced();
  ASSERT_EQ(server.WaitFor(7), 7u);
  EXPECT_EQ(client->stats().coalesced_messages, 4u);
}

TEST(Coalesce, StopSendsWhatWasCoalesced) {
  RecordingVan server;
  auto client = std::make_unique<RecordingVan>();
  client->Reach(1, server);
  {
    CoalesceHint hint(true);
    for (int i = 1; i <= 5; ++i) {
      ASSERT_TRUE((*client)->Send(Sized(1, i, 8), SendMode::kBlocking, Channel::kData).ok());
    }
  }
  client.reset();  // Stop
  ASSERT_EQ(server.WaitFor(5), 5u);
  ExpectInOrder(server, 5, 8);
}

TEST(Coalesce, WithoutAHintOrWithItOffEveryMessageGoesAlone) {
  RecordingVan client, server;
  client.Reach(1, server);
  for (int i = 1; i <= 20; ++i) {
    ASSERT_TRUE(client->Send(Sized(1, i, 8), SendMode::kBlocking, Channel::kData).ok());
  }
  ASSERT_EQ(server.WaitFor(20), 20u);
  EXPECT_EQ(client->stats().coalesced_messages, 0u);

  AnsweringPair off(/*coalesce=*/false);
  {
    CoalesceHint hint(true);
    for (int i = 1; i <= 50; ++i) {
      ASSERT_TRUE(off.client->Send(Sized(1, i, 8), SendMode::kBlocking, Channel::kData).ok());
    }
  }
  ASSERT_EQ(off.client.WaitFor(50), 50u);
  ExpectInOrder(off.server, 50, 8);
  VanStats c = off.client->stats(), s = off.server->stats();
  EXPECT_EQ(c.coalesced_messages + c.sent_batches + c.received_batches, 0u);
  EXPECT_EQ(s.coalesced_messages + s.sent_batches + s.received_batches, 0u);
}

TEST(Coalesce, ControlMessagesAreNeverCoalesced) {
  RecordingVan client, server;
  client.Reach(1, server);
  {
    CoalesceHint hint(true);
    for (int i = 1; i <= 5; ++i) {
      ASSERT_TRUE(client->Send(Sized(1, i, 8), SendMode::kBlocking, Channel::kControl).ok());
    }
  }
  ASSERT_EQ(server.WaitFor(5), 5u);
  EXPECT_EQ(client->stats().coalesced_messages, 0u);
  for (auto& m : server.Received()) EXPECT_EQ(m.second, Channel::kControl);
}

}  // namespace
}  // namespace ps
