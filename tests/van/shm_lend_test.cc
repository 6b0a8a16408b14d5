// Van::LendSendBuffers on the ZeroMQ van: the first lend to a peer negotiates the ring;
// a lent buffer filled and sent whole goes through the ring without a copy and arrives
// exact; one sent only in part is copied like any frame; one dropped unsent gives its
// block back; nothing is lent under 64 KiB, to an unknown peer, with shm off on either
// side, or when the ring has no room.
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "ps/internal/van.h"
#include "recording_van.h"
#include "shm_frames.h"

namespace ps {
namespace {

// Fills `lent` as Frames(2, _, seed) fills its frames and sends them as one message.
Status SendLent(TestVan& a, const std::vector<SArray<char>>& lent,
                const std::vector<std::pair<size_t, DataType>>& frames, int seed) {
  Message msg;
  msg.meta.sender = 9;
  msg.meta.recipient = 2;
  msg.meta.head = seed;
  for (size_t i = 0; i < lent.size(); ++i) {
    std::memset(lent[i].data(), seed + static_cast<int>(i), lent[i].size());
    msg.data.push_back(lent[i]);
    msg.meta.data_type.push_back(frames[i].second);
  }
  return a->Send(msg, SendMode::kBlocking, Channel::kData);
}

const std::vector<std::pair<size_t, DataType>> kKeysAndValues = {
    {256 << 10, DataType::kUInt64}, {1 << 20, DataType::kFloat}};

TEST(ShmLend, TheFirstLendOffersTheRingAndLentFramesArriveExactWithoutACopy) {
  TestVan a([](VanOptions* o) { o->zmq.shm_offer_wait_ms = 20000; });
  TestVan b;
  a.Reach(2, b);
  std::vector<SArray<char>> lent = a->LendSendBuffers(9, 2, {256 << 10, 1 << 20, 100});
  ASSERT_EQ(lent.size(), 3u);
  EXPECT_EQ(a->stats().shm_accepted_rings, 1u) << "the lend waited for the ring's answer";
  ASSERT_EQ(lent[0].size(), 256u << 10);
  ASSERT_EQ(lent[1].size(), 1u << 20);
  EXPECT_TRUE(lent[2].empty()) << "a frame under 64 KiB is not lent";
  lent.pop_back();
  for (int seed = 1; seed <= 3; ++seed) {
    if (seed > 1) lent = a->LendSendBuffers(9, 2, {256 << 10, 1 << 20});
    ASSERT_FALSE(lent[0].empty() || lent[1].empty());
    ASSERT_TRUE(SendLent(a, lent, kKeysAndValues, seed).ok());
    lent.clear();  // the sender lets go once sent
  }
  ASSERT_EQ(b.WaitFor(3), 3u);
  auto got = b.Take();
  ASSERT_EQ(got.size(), 3u) << "the offer alone is not delivered";
  for (auto& [msg, channel] : got) EXPECT_TRUE(Exact(msg, kKeysAndValues)) << msg.meta.head;
  VanStats sa = a->stats(), sb = b->stats();
  EXPECT_EQ(sa.shm_sent_frames, 6u);
  EXPECT_EQ(sa.shm_lent_frames, 6u) << "written in place, not copied into the ring";
  EXPECT_EQ(sa.shm_fallback_frames, 0u);
  EXPECT_EQ(sb.shm_received_frames, 6u);
  EXPECT_EQ(sb.dropped_messages, 0u);
}

TEST(ShmLend, ALentBufferSentInPartIsCopiedAndOneDroppedUnsentGivesItsBlockBack) {
  TestVan a([](VanOptions* o) {
    o->zmq.shm_offer_wait_ms = 20000;
    o->zmq.shm_bytes = 4 << 20;
  });
  TestVan b;
  a.Reach(2, b);
  const uint64_t big = 5 << 19;  // 2.5 MiB: two never fit the 4 MiB ring, one and a half do
  std::vector<SArray<char>> first = a->LendSendBuffers(9, 2, {big});
  ASSERT_EQ(first[0].size(), big);
  EXPECT_TRUE(a->LendSendBuffers(9, 2, {big})[0].empty()) << "no room while the first is lent";
  // Half of it as a frame: not the lent buffer whole, so copied into the ring.
  const std::vector<std::pair<size_t, DataType>> half = {{big / 2, DataType::kFloat}};
  ASSERT_TRUE(SendLent(a, {first[0].segment(0, big / 2)}, half, 4).ok());
  ASSERT_EQ(b.WaitFor(1), 1u);
  EXPECT_TRUE(Exact(b.Take()[0].first, half));
  EXPECT_EQ(a->stats().shm_sent_frames, 1u);
  EXPECT_EQ(a->stats().shm_lent_frames, 0u);
  first.clear();  // dropped unsent: its block goes back
  std::vector<SArray<char>> again = a->LendSendBuffers(9, 2, {big});
  EXPECT_EQ(again[0].size(), big) << "the dropped loan's block was given back";
}

TEST(ShmLend, NothingIsLentWithShmOffOnEitherSideOrToAnUnknownPeer) {
  {
    TestVan a([](VanOptions* o) { o->zmq.shm = false; });
    TestVan b;
    a.Reach(2, b);
    EXPECT_TRUE(a->LendSendBuffers(9, 2, {1 << 20})[0].empty());
  }
  {
    TestVan a([](VanOptions* o) { o->zmq.shm_offer_wait_ms = 20000; });
    TestVan b([](VanOptions* o) { o->zmq.shm = false; });  // refuses the offer
    a.Reach(2, b);
    EXPECT_TRUE(a->LendSendBuffers(9, 2, {1 << 20})[0].empty());
    EXPECT_EQ(a->stats().shm_refused_rings, 1u);
    EXPECT_TRUE(a->LendSendBuffers(9, 7, {1 << 20})[0].empty()) << "node 7 is not connected";
  }
}

}  // namespace
}  // namespace ps
