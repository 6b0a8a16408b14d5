// NewLargeBuffer: large buffers mapped on huge-page boundaries (see the header).
#include "ps/internal/large_buffer.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace ps {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// Below this a buffer comes from operator new: the huge-page rounding would waste more
// than the faults cost.
constexpr size_t kMapFrom = size_t{8} << 20;

size_t RoundUp(size_t x, size_t to) { return (x + to - 1) / to * to; }

}  // namespace

SArray<char> NewLargeBuffer(size_t bytes) {
  if (bytes < kMapFrom) {
    return SArray<char>(new char[bytes ? bytes : 1], bytes, [](char* p) { delete[] p; });
  }
  const size_t length = RoundUp(bytes, kHugePage);
  // One huge page more than needed, so that an aligned start lies inside; the slack on
  // both sides goes back at once.
  void* raw = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t first = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = RoundUp(first, kHugePage);
  const size_t head = start - first;
  if (head) munmap(raw, head);
  if (kHugePage - head) munmap(reinterpret_cast<char*>(start) + length, kHugePage - head);
  char* data = reinterpret_cast<char*>(start);
  // Advice only: without huge pages the buffer works the same, with small pages.
  (void)madvise(data, length, MADV_HUGEPAGE);
  return SArray<char>(data, bytes, [length](char* p) { munmap(p, length); });
}

}  // namespace ps
