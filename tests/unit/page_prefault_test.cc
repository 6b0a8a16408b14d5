// PrefaultPages (ps/internal/page_prefault.h): memory made resident ahead of its writes.
#include "ps/internal/page_prefault.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace ps {
namespace {

size_t Page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// How many of the pages of [data, data + bytes) are resident.
size_t ResidentPages(char* data, size_t bytes) {
  std::vector<unsigned char> resident((bytes + Page() - 1) / Page(), 0);
  EXPECT_EQ(mincore(data, bytes, resident.data()), 0) << std::strerror(errno);
  size_t in = 0;
  for (unsigned char r : resident) in += r & 1;
  return in;
}

// Whether the kernel has MADV_POPULATE_WRITE (Linux 5.14 and later); without it
// PrefaultPages does nothing, by contract.
bool KernelPopulates() {
#ifdef MADV_POPULATE_WRITE
  void* p = mmap(nullptr, Page(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  const bool ok = madvise(p, Page(), MADV_POPULATE_WRITE) == 0;
  munmap(p, Page());
  return ok;
#else
  return false;
#endif
}

class Mapping {
 public:
  Mapping(size_t bytes, int flags) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }
  ~Mapping() {
    if (data_) munmap(data_, bytes_);
  }
  char* data() const { return data_; }

 private:
  size_t bytes_;
  char* data_;
};

TEST(PrefaultPages, MakesEveryPageOfALargeRangeResidentAndChangesNoByte) {
  if (!KernelPopulates()) GTEST_SKIP() << "the kernel lacks MADV_POPULATE_WRITE";
  // Larger than kPrefaultBytesPerThread * kMaxPrefaultThreads: every thread takes a piece.
  const size_t bytes = kPrefaultBytesPerThread * kMaxPrefaultThreads * 2 + 3 * Page();
  for (int flags : {MAP_PRIVATE, MAP_SHARED}) {
    Mapping m(bytes, flags);
    ASSERT_NE(m.data(), nullptr);
    // A few bytes written before, in pages each thread's piece would take.
    for (size_t at = 0; at < bytes; at += bytes / 7) m.data()[at] = static_cast<char>(at % 251);
    PrefaultPages(m.data(), bytes);
    EXPECT_EQ(ResidentPages(m.data(), bytes), bytes / Page()) << "flags " << flags;
    for (size_t at = 0; at < bytes; at += bytes / 7) {
      EXPECT_EQ(m.data()[at], static_cast<char>(at % 251)) << at;
    }
    EXPECT_EQ(m.data()[bytes - 1], 0);  // an untouched page reads as zeros
  }
}

TEST(PrefaultPages, AnUnalignedRangeTakesTheWholePagesItTouchesAndNoOthers) {
  if (!KernelPopulates()) GTEST_SKIP() << "the kernel lacks MADV_POPULATE_WRITE";
  const size_t page = Page();
  Mapping m(8 * page, MAP_PRIVATE);
  ASSERT_NE(m.data(), nullptr);
  // From the middle of page 2 to the first byte of page 5.
  PrefaultPages(m.data() + 2 * page + page / 2, 2 * page + page / 2 + 1);
  std::vector<unsigned char> resident(8, 0);
  ASSERT_EQ(mincore(m.data(), 8 * page, resident.data()), 0);
  for (size_t p = 0; p < 8; ++p) {
    EXPECT_EQ(resident[p] & 1, p >= 2 && p <= 5 ? 1 : 0) << "page " << p;
  }
}

TEST(PrefaultPages, NothingToDoIsNothingDone) {
  PrefaultPages(nullptr, 1 << 20);
  Mapping m(Page(), MAP_PRIVATE);
  ASSERT_NE(m.data(), nullptr);
  PrefaultPages(m.data(), 0);
  EXPECT_EQ(ResidentPages(m.data(), Page()), 0u);
}

}  // namespace
}  // namespace ps
