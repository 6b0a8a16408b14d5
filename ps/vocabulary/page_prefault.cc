// PrefaultPages: see the header.
#include "ps/internal/page_prefault.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <system_error>
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

void Populate(uintptr_t begin, uintptr_t end) {
#ifdef MADV_POPULATE_WRITE
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
  (void)begin, (void)end;
#endif
}

}  // namespace

void PrefaultPages(void* data, size_t bytes) {
  if (!data || bytes == 0) return;
  const size_t page = PageBytes();
  // madvise takes a page-aligned start; the pages the range touches are all made
  // resident.
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + bytes;
  const size_t span = end - begin;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads =
      std::min<size_t>({kMaxPrefaultThreads, cores, std::max<size_t>(1, span / kPrefaultBytesPerThread)});
  const size_t each = (span / threads + page - 1) / page * page;
  std::vector<std::thread> helpers;
  helpers.reserve(threads - 1);
  // The caller takes the first piece; each helper one of the rest. A helper that
  // cannot start leaves its piece to the caller.
  std::vector<std::pair<uintptr_t, uintptr_t>> left;
  for (size_t i = 1; i < threads; ++i) {
    const uintptr_t from = begin + i * each;
    if (from >= end) break;
    const uintptr_t to = i + 1 == threads ? end : std::min<uintptr_t>(end, from + each);
    try {
      helpers.emplace_back(Populate, from, to);
    } catch (const std::system_error&) {
      left.emplace_back(from, to);
    }
  }
  Populate(begin, std::min<uintptr_t>(end, begin + each));
  for (const auto& [from, to] : left) Populate(from, to);
  for (std::thread& t : helpers) t.join();
}

}  // namespace ps
