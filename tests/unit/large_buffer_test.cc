// NewLargeBuffer (ps/internal/large_buffer.h): the runtime's large buffers.
#include "ps/internal/large_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace ps {
namespace {

TEST(LargeBuffer, SmallBuffersHoldTheirBytes) {
  SArray<char> empty = NewLargeBuffer(0);
  EXPECT_EQ(empty.size(), 0u);
  SArray<char> small = NewLargeBuffer(1000);
  ASSERT_EQ(small.size(), 1000u);
  std::memset(small.data(), 7, small.size());
  EXPECT_EQ(small[999], 7);
}

TEST(LargeBuffer, LargeBuffersStartOnA2MiBBoundaryAndAreWritableToTheEnd) {
  for (size_t bytes : {size_t{8} << 20, (size_t{8} << 20) + 1, size_t{33} << 20}) {
    SArray<char> big = NewLargeBuffer(bytes);
    ASSERT_EQ(big.size(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % (size_t{2} << 20), 0u) << bytes;
    std::memset(big.data(), 1, bytes);
    big[bytes - 1] = 42;
    EXPECT_EQ(big[0], 1);
    EXPECT_EQ(big[bytes - 1], 42);
  }
}

TEST(LargeBuffer, ABufferLivesWhileAnySArrayHoldsIt) {
  SArray<uint64_t> kept;
  {
    SArray<uint64_t> keys = NewLargeArray<uint64_t>(size_t{3} << 20);  // 24 MiB
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;
    kept = keys;
  }
  EXPECT_EQ(kept.size(), size_t{3} << 20);
  EXPECT_EQ(kept[kept.size() - 1], kept.size() - 1);
  // Many buffers come and go without running out of mappings.
  for (int i = 0; i < 200; ++i) {
    SArray<char> b = NewLargeBuffer(size_t{9} << 20);
    b[0] = static_cast<char>(i);
  }
}

TEST(LargeBuffer, AReleasedMappingServesTheNextBufferOfAboutItsSizeUntilReleased) {
  ReleaseLargeBuffers();
  char* first = nullptr;
  {
    SArray<char> b = NewLargeBuffer(size_t{20} << 20);
    first = b.data();
    std::memset(b.data(), 7, b.size());
  }
  EXPECT_EQ(KeptLargeBufferBytes(), size_t{20} << 20);
  {
    // 18 MiB rounds up to 18: within 4/5 of the kept 20, so it gets that mapping.
    SArray<char> again = NewLargeBuffer(size_t{18} << 20);
    EXPECT_EQ(again.data(), first);
    EXPECT_EQ(KeptLargeBufferBytes(), 0u);
    // One much smaller does not take a large mapping (it would pin its memory).
  }
  {
    SArray<char> small = NewLargeBuffer(size_t{10} << 20);
    EXPECT_NE(small.data(), first);
  }
  EXPECT_EQ(KeptLargeBufferBytes(), size_t{30} << 20);
  EXPECT_EQ(ReleaseLargeBuffers(), size_t{30} << 20);
  EXPECT_EQ(KeptLargeBufferBytes(), 0u);
}

TEST(LargeBuffer, TheKeptMappingsStayWithinTheirBound) {
  ReleaseLargeBuffers();
  std::vector<SArray<char>> live;
  for (size_t i = 0; i < kMaxKeptBytes / (size_t{256} << 20) + 2; ++i) {
    live.push_back(NewLargeBuffer(size_t{256} << 20));
  }
  live.clear();
  EXPECT_LE(KeptLargeBufferBytes(), kMaxKeptBytes);
  EXPECT_GT(KeptLargeBufferBytes(), 0u);
  ReleaseLargeBuffers();
}

}  // namespace
}  // namespace ps
