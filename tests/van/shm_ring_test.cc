// The two ends of a shared-memory ring (van/shm_ring.h, van/shm_mapping.h): how the
// sender's allocator hands out and takes back space, and how the receiver checks each
// descriptor before it reads a byte.
#include "shm_ring.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>  // memfd_create
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "shm_mapping.h"

namespace ps {
namespace {

constexpr uint64_t kRingBytes = 1 << 20;

ShmOfferFields OfferOf(const ShmRing& ring) {
  ShmOfferFields offer;
  offer.ring = ring.id();
  offer.pid = static_cast<int>(getpid());
  offer.fd = ring.fd();
  offer.bytes = ring.bytes();
  offer.token = ring.token();
  return offer;
}

// A ring and the receiver's mapping of it, in one process.
struct RingPair {
  explicit RingPair(uint64_t bytes = kRingBytes,
                    std::chrono::steady_clock::duration stale = std::chrono::minutes(5)) {
    std::unique_ptr<ShmRing> made;
    Status s = ShmRing::Create(bytes, &made, stale);
    EXPECT_TRUE(s.ok()) << s.message();
    ring = std::move(made);
    s = ShmMapping::Open(OfferOf(*ring), &mapping);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  // Allocates, fills with `fill` and publishes a block of `length` bytes.
  ShmRing::Block Send(uint64_t length, char fill = 'x') {
    ShmRing::Block b;
    EXPECT_TRUE(ring->Allocate(length, &b));
    std::memset(b.payload, fill, length);
    ring->Publish(b);
    return b;
  }
  Status Claim(const ShmRing::Block& b, char** payload) {
    return mapping->Claim(ShmFrameRef{0, b.offset, b.serial, b.length}, b.length, payload);
  }
  std::unique_ptr<ShmRing> ring;
  std::shared_ptr<ShmMapping> mapping;
};

TEST(ShmRing, ReceiverSeesThePayloadTheSenderWrote) {
  RingPair p;
  ShmRing::Block b = p.Send(100000, 'q');
  char* payload = nullptr;
  ASSERT_TRUE(p.Claim(b, &payload).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(payload) % 64, 0u) << "payloads are 64-byte aligned";
  for (size_t i = 0; i < 100000; ++i) ASSERT_EQ(payload[i], 'q') << "byte " << i;
  EXPECT_EQ(p.mapping->held_bytes(), 100000u);
  p.mapping->Release(b.offset, b.length);
  EXPECT_EQ(p.mapping->held_bytes(), 0u);
}

TEST(ShmRing, BlocksFreedOutOfOrderAreReusedLowestFirst) {
  RingPair p;
  std::vector<ShmRing::Block> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(p.Send(64 << 10));
  for (const auto& b : blocks) {
    char* payload;
    ASSERT_TRUE(p.Claim(b, &payload).ok());
  }
  // The second and third come back; the first and last stay held (an app keeps them).
  p.mapping->Release(blocks[2].offset, blocks[2].length);
  p.mapping->Release(blocks[1].offset, blocks[1].length);
  EXPECT_EQ(p.ring->used_blocks(), 4u) << "nothing is taken back before it is needed";
  ShmRing::Block again;
  ASSERT_TRUE(p.ring->Allocate(64 << 10, &again));
  EXPECT_EQ(again.offset, blocks[1].offset) << "the lowest freed extent is reused";
  EXPECT_EQ(p.ring->used_blocks(), 3u);
  // The two freed blocks were coalesced: one twice as large fits where they were.
  p.ring->Cancel(again);
  ShmRing::Block twice;
  ASSERT_TRUE(p.ring->Allocate(2 * (64 << 10), &twice));
  EXPECT_EQ(twice.offset, blocks[1].offset);
  EXPECT_NE(twice.serial, blocks[1].serial) << "a reused extent gets a new serial";
}

TEST(ShmRing, AFullRingRefusesUntilTheReceiverFreesABlock) {
  RingPair p;
  std::vector<ShmRing::Block> blocks;
  ShmRing::Block b;
  while (p.ring->Allocate(100 << 10, &b)) {
    p.ring->Publish(b);
    blocks.push_back(b);
  }
  ASSERT_GE(blocks.size(), 8u);
  EXPECT_FALSE(p.ring->Allocate(100 << 10, &b)) << "still full";
  char* payload;
  ASSERT_TRUE(p.Claim(blocks[3], &payload).ok());
  EXPECT_FALSE(p.ring->Allocate(100 << 10, &b)) << "held is not free";
  p.mapping->Release(blocks[3].offset, blocks[3].length);
  ASSERT_TRUE(p.ring->Allocate(100 << 10, &b));
  EXPECT_EQ(b.offset, blocks[3].offset);
}

TEST(ShmRing, AFrameLargerThanTheRingIsRefused) {
  RingPair p;
  ShmRing::Block b;
  EXPECT_FALSE(p.ring->Allocate(p.ring->bytes(), &b));
  EXPECT_FALSE(p.ring->Allocate(p.ring->max_payload() + 1, &b));
  EXPECT_FALSE(p.ring->Allocate(0, &b));
  EXPECT_TRUE(p.ring->Allocate(p.ring->max_payload(), &b)) << "the largest that fits";
}

TEST(ShmRing, ACancelledBlockIsFreeAtOnceAndItsDescriptorIsDead) {
  RingPair p;
  ShmRing::Block b = p.Send(4096);
  p.ring->Cancel(b);
  EXPECT_EQ(p.ring->used_bytes(), 0u);
  char* payload;
  EXPECT_FALSE(p.Claim(b, &payload).ok());
}

TEST(ShmRing, ABlockLostInFlightIsTakenBackWhenTheRingIsFullAndItsDescriptorThenFails) {
  // Stale at once: only fullness decides when a lost block is taken back.
  RingPair p(kRingBytes, std::chrono::seconds(0));
  std::vector<ShmRing::Block> blocks;
  ShmRing::Block b;
  char* payload;
  // The first block is lost in flight; the receiver holds every later one.
  for (;;) {
    ASSERT_TRUE(p.ring->Allocate(200 << 10, &b));
    if (!blocks.empty() && b.offset == blocks[0].offset) break;
    p.ring->Publish(b);
    if (!blocks.empty()) {
      ASSERT_TRUE(p.Claim(b, &payload).ok());
    }
    blocks.push_back(b);
    ASSERT_LT(blocks.size(), 100u) << "the lost block was never taken back";
  }
  EXPECT_GE(blocks.size(), 4u) << "taken back before the ring was full";
  EXPECT_EQ(p.ring->used_blocks(), blocks.size()) << "held blocks stay the receiver's";
  p.ring->Publish(b);
  // The late descriptor of the lost block names a block with another serial now.
  EXPECT_FALSE(p.Claim(blocks[0], &payload).ok());
  EXPECT_TRUE(p.Claim(b, &payload).ok());
}

TEST(ShmMapping, DescriptorsOutsideTheRingOrMisalignedAreRefused) {
  RingPair p;
  ShmRing::Block good = p.Send(1000);
  char* payload;
  const uint64_t bytes = p.ring->bytes();
  struct Case {
    const char* what;
    uint64_t offset, length;
  } cases[] = {
      {"inside the segment header", 0, 1000},
      {"misaligned", good.offset + 8, 1000},
      {"past the end", bytes, 1000},
      {"header at the very end", bytes - 64, 1},
      {"length past the end", good.offset, bytes},
      {"offset + length overflowing", good.offset, ~uint64_t{0} - 10},
      {"huge offset", ~uint64_t{0} - 63, 1000},
      {"zero length", good.offset, 0},
  };
  for (const Case& c : cases) {
    Status s =
        p.mapping->Claim(ShmFrameRef{0, c.offset, good.serial, c.length}, c.length, &payload);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << c.what;
  }
  EXPECT_TRUE(p.Claim(good, &payload).ok()) << "the good block is still in flight";
}

TEST(ShmMapping, ADescriptorWithAnotherSerialOrLengthLeavesTheBlockForItsOwn) {
  RingPair p;
  ShmRing::Block b = p.Send(1000);
  char* payload;
  EXPECT_FALSE(p.mapping->Claim(ShmFrameRef{0, b.offset, b.serial + 1, 1000}, 1000, &payload).ok());
  EXPECT_FALSE(p.mapping->Claim(ShmFrameRef{0, b.offset, b.serial, 999}, 999, &payload).ok());
  EXPECT_FALSE(p.mapping->Claim(ShmFrameRef{0, b.offset, b.serial, 1064}, 1064, &payload).ok());
  EXPECT_TRUE(p.Claim(b, &payload).ok());
}

TEST(ShmMapping, ADescriptorIsGoodOnceAndAnUnpublishedBlockNever) {
  RingPair p;
  ShmRing::Block b = p.Send(1000);
  char* payload;
  ASSERT_TRUE(p.Claim(b, &payload).ok());
  EXPECT_FALSE(p.Claim(b, &payload).ok()) << "used twice";
  p.mapping->Release(b.offset, b.length);
  EXPECT_FALSE(p.Claim(b, &payload).ok()) << "used after it was freed";
  ShmRing::Block writing;
  ASSERT_TRUE(p.ring->Allocate(1000, &writing));
  EXPECT_FALSE(p.Claim(writing, &payload).ok()) << "not published yet";
}

TEST(ShmMapping, ForeignOrTamperedSegmentsAreRefused) {
  std::unique_ptr<ShmRing> ring;
  ASSERT_TRUE(ShmRing::Create(kRingBytes, &ring).ok());
  std::shared_ptr<ShmMapping> m;
  ShmOfferFields offer = OfferOf(*ring);
  ShmOfferFields wrong = offer;
  wrong.token[0] ^= 1;
  EXPECT_FALSE(ShmMapping::Open(wrong, &m).ok()) << "another token";
  wrong = offer;
  wrong.ring ^= 1;
  EXPECT_FALSE(ShmMapping::Open(wrong, &m).ok()) << "another ring id";
  wrong = offer;
  wrong.bytes += 4096;
  EXPECT_FALSE(ShmMapping::Open(wrong, &m).ok()) << "another size";
  wrong = offer;
  wrong.fd = 987654;
  EXPECT_FALSE(ShmMapping::Open(wrong, &m).ok()) << "no such descriptor";
  wrong = offer;
  wrong.pid = 0x3fffffff;
  EXPECT_FALSE(ShmMapping::Open(wrong, &m).ok()) << "no such process";
  wrong = offer;
  wrong.bytes = shm::kMaxRingBytes + 4096;
  Status big = ShmMapping::Open(wrong, &m);
  EXPECT_FALSE(big.ok()) << "larger than any node makes";
  EXPECT_NE(big.message().find("more than any node makes"), std::string::npos) << big.message();

  // Not a ring: a pipe (opening a FIFO would block), an ordinary memfd of another name.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  wrong = offer;
  wrong.fd = pipe_fds[0];
  Status s = ShmMapping::Open(wrong, &m);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a HerdPS ring"), std::string::npos) << s.message();
  close(pipe_fds[0]);
  close(pipe_fds[1]);

  // A segment that could shrink under the mapping is refused before anything is read.
  int unsealed = memfd_create(shm::kSegmentName, MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(ftruncate(unsealed, static_cast<off_t>(offer.bytes)), 0);
  wrong = offer;
  wrong.fd = unsealed;
  s = ShmMapping::Open(wrong, &m);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sealed"), std::string::npos) << s.message();
  close(unsealed);

  EXPECT_TRUE(ShmMapping::Open(offer, &m).ok()) << "the real offer still maps";
}

TEST(ShmMapping, ViewsOutliveTheSenderAndTheReceiversTable) {
  std::unique_ptr<ShmRing> ring;
  ASSERT_TRUE(ShmRing::Create(kRingBytes, &ring).ok());
  std::shared_ptr<ShmMapping> m;
  ASSERT_TRUE(ShmMapping::Open(OfferOf(*ring), &m).ok());
  ShmRing::Block b;
  ASSERT_TRUE(ring->Allocate(5000, &b));
  std::memset(b.payload, 'v', 5000);
  ring->Publish(b);
  char* payload;
  ASSERT_TRUE(m->Claim(ShmFrameRef{0, b.offset, b.serial, 5000}, 5000, &payload).ok());
  ring.reset();  // the sender unmaps and closes its memfd
  for (int i = 0; i < 5000; ++i) ASSERT_EQ(payload[i], 'v');
  m->Release(b.offset, 5000);
}

}  // namespace
}  // namespace ps
