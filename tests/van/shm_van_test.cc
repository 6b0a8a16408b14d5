// Two vans in one process over the shared-memory path (VanOptions::shm): large frames
// go through the sender's ring once the receiver has accepted it, arrive exact, are
// views (values) or copies (everything else); a receiver or sender with shm off keeps
// everything on the socket; forged or reused descriptors are dropped and counted,
// never fatal, and free what they held.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zmq.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "meta_codec.h"
#include "ps/internal/van.h"
#include "recording_van.h"
#include "shm_frames.h"
#include "shm_ring.h"

namespace ps {
namespace {

const std::vector<std::pair<size_t, DataType>> kMixed = {
    {80 << 10, DataType::kUInt64},  // keys: large enough for the ring, copied out
    {1 << 20, DataType::kFloat},    // values: a view of the ring
    {128 << 10, DataType::kDouble},
    {100, DataType::kChar},  // small: on the socket
};

TEST(ShmVan, LargeFramesTravelThroughSharedMemoryOnceThePeerAccepts) {
  for (const char* transport : {"tcp", "ipc"}) {
    SCOPED_TRACE(transport);
    TestVan a([&](VanOptions* o) { o->transport = transport; });
    TestVan b([&](VanOptions* o) { o->transport = transport; });
    ASSERT_TRUE(a.status().ok() && b.status().ok());
    a.Reach(2, b);
    int before = SendUntilShm(a, kMixed);
    const int more = 20;
    for (int i = 0; i < more; ++i) {
      ASSERT_TRUE(a->Send(Frames(2, kMixed, i), SendMode::kBlocking, Channel::kData).ok());
    }
    ASSERT_EQ(b.WaitFor(before + more), static_cast<size_t>(before + more));
    for (auto& [msg, channel] : b.Take()) {
      EXPECT_EQ(channel, Channel::kData);
      EXPECT_TRUE(Exact(msg, kMixed)) << "message " << msg.meta.head;
    }
    VanStats sa = a->stats(), sb = b->stats();
    EXPECT_EQ(sa.shm_accepted_rings, 1u);
    // Every message after the first through shared memory has its three large frames there.
    EXPECT_EQ(sa.shm_sent_frames, 3u * (more + 1));
    EXPECT_EQ(sb.shm_received_frames, sa.shm_sent_frames);
    EXPECT_EQ(sb.shm_received_bytes, sa.shm_sent_bytes);
    EXPECT_EQ(sa.shm_sent_bytes, (more + 1) * ((80u << 10) + (1u << 20) + (128u << 10)));
    // Only the keys were copied out; the values were handed over in place.
    EXPECT_EQ(sb.shm_copied_bytes, (more + 1) * (80u << 10));
    EXPECT_EQ(sa.shm_fallback_frames, 0u);
    EXPECT_EQ(sb.dropped_messages, 0u);
  }
}

TEST(ShmVan, TheFirstLargeMessageTakesTheRingWhoseOfferWentAloneAheadOfIt) {
  // The first message between two processes is often the largest (a model's first
  // push): it waits for the answer to the offer sent just ahead of it (here as long as
  // need be, so that a loaded machine cannot make it miss), and the offer alone is
  // never delivered.
  TestVan a([](VanOptions* o) { o->zmq.shm_offer_wait_ms = 20000; });
  TestVan b;
  a.Reach(2, b);
  ASSERT_TRUE(a->Send(Frames(2, kMixed, 1), SendMode::kBlocking, Channel::kData).ok());
  VanStats sa = a->stats();
  EXPECT_EQ(sa.shm_accepted_rings, 1u);
  EXPECT_EQ(sa.shm_sent_frames, 3u) << "the first message's large frames went in the ring";
  EXPECT_EQ(sa.shm_fallback_frames, 0u);
  const std::vector<std::pair<size_t, DataType>> small = {{100, DataType::kChar}};
  ASSERT_TRUE(a->Send(Frames(2, small, 2), SendMode::kBlocking, Channel::kData).ok());
  ASSERT_EQ(b.WaitFor(2), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto got = b.Take();
  ASSERT_EQ(got.size(), 2u) << "only the two messages sent arrive";
  EXPECT_TRUE(Exact(got[0].first, kMixed));
  EXPECT_TRUE(Exact(got[1].first, small));
  EXPECT_EQ(b->stats().shm_received_frames, 3u);
  EXPECT_EQ(b->stats().dropped_messages, 0u);
}

TEST(ShmVan, AFirstMessageWhoseOfferIsNotAnsweredInTimeTakesTheSocket) {
  TestVan a([](VanOptions* o) { o->zmq.shm_offer_wait_ms = 0; });
  TestVan b;
  a.Reach(2, b);
  ASSERT_TRUE(a->Send(Frames(2, kMixed, 1), SendMode::kBlocking, Channel::kData).ok());
  EXPECT_EQ(a->stats().shm_sent_frames, 0u);
  int sent = 1 + SendUntilShm(a, kMixed);
  ASSERT_EQ(b.WaitFor(sent), static_cast<size_t>(sent));
  for (auto& [msg, channel] : b.Take()) EXPECT_TRUE(Exact(msg, kMixed));
  EXPECT_EQ(a->stats().shm_accepted_rings, 1u);
  EXPECT_EQ(b->stats().dropped_messages, 0u);
}

TEST(ShmVan, AnAppKeepingEveryViewNeverFillsTheSendersRing) {
  TestVan a([](VanOptions* o) { o->zmq.shm_bytes = 4 << 20; });
  TestVan b;  // keeps every message it receives (and so every view)
  a.Reach(2, b);
  const std::vector<std::pair<size_t, DataType>> values = {{1 << 20, DataType::kFloat}};
  int sent = SendUntilShm(a, values);
  // One at a time: the ring holds three such frames, so a burst would find it full of
  // frames in flight (and rightly go on the socket); what matters here is held views.
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(a->Send(Frames(2, values, i), SendMode::kBlocking, Channel::kData).ok());
    ASSERT_EQ(b.WaitFor(sent + i + 1), static_cast<size_t>(sent + i + 1));
  }
  VanStats sa = a->stats(), sb = b->stats();
  EXPECT_EQ(sa.shm_sent_frames, 31u) << "every frame found room in the ring";
  EXPECT_EQ(sa.shm_fallback_frames, 0u);
  // Views stop at half the ring; the rest were copied out and their blocks freed.
  EXPECT_GE(sb.shm_copied_bytes, 25u << 20);
  EXPECT_LE(sb.shm_copied_bytes, 30u << 20);
  for (auto& [msg, channel] : b.Take()) EXPECT_TRUE(Exact(msg, values));
}

TEST(ShmVan, AFrameLargerThanTheRingGoesOnTheSocketAndIsCounted) {
  TestVan a([](VanOptions* o) { o->zmq.shm_bytes = 1 << 20; });
  TestVan b;
  a.Reach(2, b);
  const std::vector<std::pair<size_t, DataType>> small = {{256 << 10, DataType::kFloat}};
  const std::vector<std::pair<size_t, DataType>> large = {{2 << 20, DataType::kFloat}};
  int sent = SendUntilShm(a, small);
  ASSERT_TRUE(a->Send(Frames(2, large, 7), SendMode::kBlocking, Channel::kData).ok());
  ASSERT_EQ(b.WaitFor(sent + 1), static_cast<size_t>(sent + 1));
  EXPECT_EQ(a->stats().shm_fallback_frames, 1u);
  EXPECT_TRUE(Exact(b.Take().back().first, large));
}

TEST(ShmVan, AReceiverWithShmOffRefusesAndEverythingTravelsOnTheSocket) {
  TestVan a;
  TestVan b([](VanOptions* o) { o->zmq.shm = false; });
  a.Reach(2, b);
  int sent = 0;
  ASSERT_TRUE(WaitUntil([&] {
    EXPECT_TRUE(a->Send(Frames(2, kMixed, sent++), SendMode::kBlocking, Channel::kData).ok());
    return a->stats().shm_refused_rings == 1;
  }));
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(a->Send(Frames(2, kMixed, i), SendMode::kBlocking, Channel::kData).ok());
  }
  ASSERT_EQ(b.WaitFor(sent + 5), static_cast<size_t>(sent + 5));
  for (auto& [msg, channel] : b.Take()) EXPECT_TRUE(Exact(msg, kMixed));
  EXPECT_EQ(a->stats().shm_sent_frames, 0u);
  EXPECT_EQ(a->stats().shm_accepted_rings, 0u);
  EXPECT_EQ(b->stats().shm_received_frames, 0u);
}

TEST(ShmVan, ASenderWithShmOffNeverOffers) {
  TestVan a([](VanOptions* o) { o->zmq.shm = false; });
  TestVan b;
  a.Reach(2, b);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(a->Send(Frames(2, kMixed, i), SendMode::kBlocking, Channel::kData).ok());
  }
  EXPECT_TRUE(a->SetPath("shm", true));  // cannot turn on what the options left off
  ASSERT_TRUE(a->Send(Frames(2, kMixed, 5), SendMode::kBlocking, Channel::kData).ok());
  ASSERT_EQ(b.WaitFor(6), 6u);
  VanStats sa = a->stats();
  EXPECT_EQ(sa.shm_sent_frames + sa.shm_accepted_rings + sa.shm_refused_rings, 0u);
}

TEST(ShmVan, SetPathShmSwitchesWhatTheSenderSendsThroughSharedMemory) {
  TestVan a, b;
  a.Reach(2, b);
  int sent = SendUntilShm(a, kMixed);
  uint64_t frames = a->stats().shm_sent_frames;
  EXPECT_TRUE(a->SetPath("shm", false));
  ASSERT_TRUE(a->Send(Frames(2, kMixed, 1), SendMode::kBlocking, Channel::kData).ok());
  EXPECT_EQ(a->stats().shm_sent_frames, frames);
  EXPECT_TRUE(a->SetPath("shm", true));
  ASSERT_TRUE(a->Send(Frames(2, kMixed, 2), SendMode::kBlocking, Channel::kData).ok());
  EXPECT_EQ(a->stats().shm_sent_frames, frames + 3);
  ASSERT_EQ(b.WaitFor(sent + 2), static_cast<size_t>(sent + 2));
  for (auto& [msg, channel] : b.Take()) EXPECT_TRUE(Exact(msg, kMixed));
}

TEST(ShmVan, SetPathRefusesAPathThisVanDoesNotHave) {
  TestVan a;
  EXPECT_FALSE(a->SetPath("rdma", true));
  EXPECT_FALSE(a->SetPath("", false));
}

TEST(ShmVan, AMessageSentTwiceGetsTwoBlocksAndArrivesTwice) {
  TestVan a, b;
  a.Reach(2, b);
  int sent = SendUntilShm(a, kMixed);
  Message again = Frames(2, kMixed, 3);  // as the resend outbox does: the same message
  uint64_t frames = a->stats().shm_sent_frames;
  ASSERT_TRUE(a->Send(again, SendMode::kBlocking, Channel::kData).ok());
  ASSERT_TRUE(a->Send(again, SendMode::kBlocking, Channel::kData).ok());
  EXPECT_EQ(a->stats().shm_sent_frames, frames + 6);
  ASSERT_EQ(b.WaitFor(sent + 2), static_cast<size_t>(sent + 2));
  auto got = b.Take();
  EXPECT_TRUE(Exact(got[got.size() - 1].first, kMixed));
  EXPECT_TRUE(Exact(got[got.size() - 2].first, kMixed));
  EXPECT_EQ(b->stats().dropped_messages, 0u);
}

TEST(ShmVan, AReconnectedPeerGetsANewRing) {
  TestVan a, b, c;
  a.Reach(2, b);
  int to_b = SendUntilShm(a, kMixed);
  a.Reach(2, c);  // node 2 is now at c's endpoints
  int to_c = 0;
  ASSERT_TRUE(WaitUntil([&] {
    EXPECT_TRUE(a->Send(Frames(2, kMixed, to_c++), SendMode::kBlocking, Channel::kData).ok());
    return a->stats().shm_accepted_rings == 2 && c->stats().shm_received_frames > 0;
  }));
  ASSERT_EQ(b.WaitFor(to_b), static_cast<size_t>(to_b));
  ASSERT_EQ(c.WaitFor(to_c), static_cast<size_t>(to_c));
  for (auto& [msg, channel] : c.Take()) EXPECT_TRUE(Exact(msg, kMixed));
  EXPECT_EQ(c->stats().dropped_messages, 0u);
}

// A peer that speaks the wire format by hand: a DEALER with its own ring.
class ForgingPeer {
 public:
  explicit ForgingPeer(const std::string& endpoint) {
    context_ = zmq_ctx_new();
    socket_ = zmq_socket(context_, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(socket_, ZMQ_LINGER, &linger, sizeof(linger));
    int timeout = 10000;
    zmq_setsockopt(socket_, ZMQ_RCVTIMEO, &timeout, sizeof(timeout));
    zmq_setsockopt(socket_, ZMQ_ROUTING_ID, "forger", 6);
    EXPECT_EQ(zmq_connect(socket_, endpoint.c_str()), 0);
    std::unique_ptr<ShmRing> made;
    EXPECT_TRUE(ShmRing::Create(4 << 20, &made).ok());
    ring = std::move(made);
  }
  ~ForgingPeer() {
    zmq_close(socket_);
    zmq_ctx_term(context_);
  }
  // Sends meta + frames (each frame's bytes as given, empty for ring frames).
  void Send(const Message& msg, const ShmFields& shm, const std::vector<std::string>& wire) {
    std::string meta;
    ASSERT_TRUE(EncodeMeta(msg, shm, &meta).ok());
    zmq_send(socket_, meta.data(), meta.size(), wire.empty() ? 0 : ZMQ_SNDMORE);
    for (size_t i = 0; i < wire.size(); ++i) {
      zmq_send(socket_, wire[i].data(), wire[i].size(), i + 1 < wire.size() ? ZMQ_SNDMORE : 0);
    }
  }
  // Offers the ring and returns the answer.
  ShmAnswerFields Offer() {
    ShmFields shm;
    shm.has_offer = true;
    shm.offer = {ring->id(), static_cast<int>(getpid()), ring->fd(), ring->bytes(), ring->token()};
    Message msg = Frames(2, {{8, DataType::kChar}}, 1);
    Send(msg, shm, {std::string(8, '\1')});
    char buf[4096];
    int n = zmq_recv(socket_, buf, sizeof(buf), 0);
    ShmAnswerFields answer;
    EXPECT_GT(n, 0);
    if (n > 0) {
      EXPECT_TRUE(DecodeShmAnswer(buf, static_cast<size_t>(n), &answer).ok());
    }
    return answer;
  }
  // A block of `bytes` bytes of `fill`, published, and its descriptor for frame 0.
  ShmFrameRef Block(size_t bytes, char fill) {
    ShmRing::Block b;
    EXPECT_TRUE(ring->Allocate(bytes, &b));
    std::memset(b.payload, fill, bytes);
    ring->Publish(b);
    return {0, b.offset, b.serial, bytes};
  }
  std::unique_ptr<ShmRing> ring;

 private:
  void* context_;
  void* socket_;
};

TEST(ShmVan, ForgedOrReusedDescriptorsAreDroppedCountedAndFreeWhatTheyHeld) {
  TestVan b;
  ASSERT_TRUE(b.status().ok());
  ForgingPeer peer(b->endpoint());
  ShmAnswerFields answer = peer.Offer();
  ASSERT_TRUE(answer.accepted) << answer.reason;
  ASSERT_EQ(b.WaitFor(1), 1u);
  b.Take();
  const size_t kBytes = 256 << 10;
  auto one_frame = [](int seed) { return Frames(2, {{256 << 10, DataType::kFloat}}, seed); };
  auto in_ring = [&](std::vector<ShmFrameRef> refs, uint64_t ring) {
    ShmFields shm;
    shm.ring = ring;
    shm.frames = std::move(refs);
    return shm;
  };
  const uint64_t ring = peer.ring->id();

  // A good descriptor: delivered, exact.
  ShmFrameRef good = peer.Block(kBytes, 'g');
  peer.Send(one_frame(0), in_ring({good}, ring), {""});
  ASSERT_EQ(b.WaitFor(1), 1u);
  auto got = b.Take();
  ASSERT_EQ(got[0].first.data.size(), 1u);
  EXPECT_EQ(got[0].first.data[0].size(), kBytes);
  EXPECT_EQ(got[0].first.data[0][kBytes - 1], 'g');

  uint64_t dropped = b->stats().dropped_messages;
  auto expect_dropped = [&](const char* what) {
    EXPECT_TRUE(WaitUntil([&] { return b->stats().dropped_messages == dropped + 1; }, 10)) << what;
    dropped = b->stats().dropped_messages;
  };
  // The same descriptor again, while the view of it is still held, and after.
  peer.Send(one_frame(1), in_ring({good}, ring), {""});
  expect_dropped("a descriptor used twice");
  got.clear();
  peer.Send(one_frame(1), in_ring({good}, ring), {""});
  expect_dropped("a descriptor used after its block was freed");
  ShmFrameRef outside = good;
  outside.offset = peer.ring->bytes() + 4096;
  peer.Send(one_frame(2), in_ring({outside}, ring), {""});
  expect_dropped("a block outside the ring");
  ShmFrameRef other = peer.Block(kBytes, 'o');
  ShmFrameRef wrong_serial = other;
  wrong_serial.serial += 1000;
  peer.Send(one_frame(3), in_ring({wrong_serial}, ring), {""});
  expect_dropped("another serial");
  peer.Send(one_frame(4), in_ring({other}, ring + 1), {""});
  expect_dropped("a ring never offered");
  peer.Send(one_frame(5), in_ring({other}, ring), {std::string(16, 'x')});
  expect_dropped("a ring frame that also carries bytes");

  // One good and one bad descriptor: dropped, and the good block is free again.
  Message two = Frames(2, {{kBytes, DataType::kFloat}, {kBytes, DataType::kFloat}}, 6);
  ShmFrameRef second = other;
  second.index = 1;
  second.serial += 77;
  size_t used = peer.ring->used_blocks();
  peer.Send(two, in_ring({other, second}, ring), {"", ""});
  expect_dropped("a message with one bad descriptor");
  ShmRing::Block probe;
  ASSERT_TRUE(peer.ring->Allocate(64, &probe));  // takes back what was freed
  EXPECT_EQ(peer.ring->used_blocks(), used) << "the good block of the dropped message is free";
  peer.ring->Cancel(probe);

  // Still serving: a good message after all that arrives.
  ShmFrameRef last = peer.Block(kBytes, 'l');
  peer.Send(one_frame(7), in_ring({last}, ring), {""});
  ASSERT_EQ(b.WaitFor(1), 1u);
  EXPECT_EQ(b.Take()[0].first.data[0][0], 'l');
}

}  // namespace
}  // namespace ps
