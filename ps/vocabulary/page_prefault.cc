// PrefaultPages: see the header.
#include "ps/internal/page_prefault.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <thread>
#include <vector>

namespace ps {
namespace {

size_t PageBytes() {
  static const size_t page = [] {
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : size_t{4096};
  }();
  return page;
}

// Asked once: the threads a large range is split over (std::thread's count of cores
// reads a file on every call, and lent ring blocks come here per message).
size_t MaxThreads() {
  static const size_t threads =
      std::min<size_t>(kMaxPrefaultThreads, std::max(1u, std::thread::hardware_concurrency()));
  return threads;
}

// Cleared once the kernel refuses MADV_POPULATE_WRITE (before Linux 5.14): nothing is
// tried, and no thread started, from then on.
std::atomic<bool> g_kernel_populates{true};

void Populate(uintptr_t begin, uintptr_t end) {
#ifdef MADV_POPULATE_WRITE
  if (end <= begin) return;
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) != 0 &&
      errno == EINVAL) {
    g_kernel_populates.store(false, std::memory_order_relaxed);
  }
#else
  (void)begin, (void)end;
  g_kernel_populates.store(false, std::memory_order_relaxed);
#endif
}

}  // namespace

void PrefaultPages(void* data, size_t bytes) {
  if (!data || bytes == 0 || !g_kernel_populates.load(std::memory_order_relaxed)) return;
  const size_t page = PageBytes();
  // madvise takes a page-aligned start; the pages the range touches are all made
  // resident.
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + bytes;
  const size_t span = end - begin;
  if (span < 2 * kPrefaultBytesPerThread || MaxThreads() == 1) {
    Populate(begin, end);
    return;
  }
  const size_t threads = std::min<size_t>(MaxThreads(), span / kPrefaultBytesPerThread);
  const size_t each = (span / threads + page - 1) / page * page;
  std::vector<std::thread> helpers;
  std::vector<std::pair<uintptr_t, uintptr_t>> left;
  try {
    helpers.reserve(threads - 1);
    left.reserve(threads - 1);
  } catch (...) {
    Populate(begin, end);  // no memory for the bookkeeping: all on this thread
    return;
  }
  // The caller takes the first piece; each helper one of the rest. A helper that
  // cannot start leaves its piece to the caller.
  for (size_t i = 1; i < threads; ++i) {
    const uintptr_t from = begin + i * each;
    if (from >= end) break;
    const uintptr_t to = i + 1 == threads ? end : std::min<uintptr_t>(end, from + each);
    try {
      helpers.emplace_back(Populate, from, to);
    } catch (...) {
      left.emplace_back(from, to);  // reserved: does not throw
    }
  }
  Populate(begin, std::min<uintptr_t>(end, begin + each));
  for (const auto& [from, to] : left) Populate(from, to);
  for (std::thread& t : helpers) t.join();
}

}  // namespace ps
