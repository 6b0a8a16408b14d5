// NewLargeBuffer (ps/internal/large_buffer.h): the runtime's large buffers.
#include "ps/internal/large_buffer.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
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

// Whether the kernel has MADV_POPULATE_WRITE, which PrefaultPages needs.
bool KernelPopulates() {
#ifdef MADV_POPULATE_WRITE
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  const bool ok = madvise(p, page, MADV_POPULATE_WRITE) == 0;
  munmap(p, page);
  return ok;
#else
  return false;
#endif
}

// Resident before the caller writes a byte (PrefaultPages), so filling it faults no more.
TEST(LargeBuffer, LargeBuffersAreResidentWhenHandedOutAndWritableToTheEnd) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t bytes : {size_t{8} << 20, (size_t{8} << 20) + 1, size_t{33} << 20}) {
    SArray<char> big = NewLargeBuffer(bytes);
    ASSERT_EQ(big.size(), bytes);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(big.data()) % page, 0u) << bytes;
    const size_t pages = (bytes + page - 1) / page;
    std::vector<unsigned char> resident(pages, 0);
    ASSERT_EQ(mincore(big.data(), bytes, resident.data()), 0) << std::strerror(errno);
    size_t in = 0;
    for (unsigned char r : resident) in += r & 1;
    // Without the call (before Linux 5.14) pages come as they are written.
    if (KernelPopulates()) {
      EXPECT_EQ(in, pages) << bytes;
    }
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
