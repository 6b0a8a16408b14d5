// NewLargeBuffer: large buffers mapped on huge-page boundaries, kept for reuse (see the
// header).
#include "ps/internal/large_buffer.h"

#include <sys/mman.h>

#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

namespace ps {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// Below this a buffer comes from operator new: the huge-page rounding would waste more
// than the faults cost.
constexpr size_t kMapFrom = size_t{8} << 20;

size_t RoundUp(size_t x, size_t to) { return (x + to - 1) / to * to; }

// Mappings whose buffers are gone, kept mapped (and so already faulted in) for the next
// buffer of about their size.
class FreeMappings {
 public:
  // A kept mapping of `length` to `length * 5 / 4` bytes (the smallest), or null.
  char* Take(size_t length, size_t* got) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i) {
      const size_t l = free_[i].length;
      const bool fits = l >= length && l <= length + length / 4;
      if (fits && (best == free_.size() || l < free_[best].length)) best = i;
    }
    if (best == free_.size()) return nullptr;
    char* data = free_[best].data;
    *got = free_[best].length;
    kept_bytes_ -= *got;
    free_[best] = free_.back();
    free_.pop_back();
    return data;
  }
  // Keeps the mapping if the kept ones stay within the bound, else unmaps it.
  void Give(char* data, size_t length) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (kept_bytes_ + length <= kMaxKeptBytes) {
        free_.push_back({data, length});
        kept_bytes_ += length;
        return;
      }
    }
    munmap(data, length);
  }
  size_t ReleaseAll() {
    std::vector<Mapping> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      all.swap(free_);
      kept_bytes_ = 0;
    }
    size_t bytes = 0;
    for (const Mapping& m : all) {
      munmap(m.data, m.length);
      bytes += m.length;
    }
    return bytes;
  }
  size_t kept_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return kept_bytes_;
  }

 private:
  struct Mapping {
    char* data;
    size_t length;
  };
  std::mutex mu_;
  std::vector<Mapping> free_;
  size_t kept_bytes_ = 0;
};

// Never destroyed: buffers may outlive static destruction (an app's SArray at exit).
FreeMappings& Free() {
  static FreeMappings* free = new FreeMappings();
  return *free;
}

char* MapHugeAligned(size_t length) {
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
  return data;
}

}  // namespace

SArray<char> NewLargeBuffer(size_t bytes) {
  if (bytes < kMapFrom) {
    return SArray<char>(new char[bytes ? bytes : 1], bytes, [](char* p) { delete[] p; });
  }
  size_t length = RoundUp(bytes, kHugePage);
  char* data = Free().Take(length, &length);
  if (!data) data = MapHugeAligned(length);
  return SArray<char>(data, bytes, [length](char* p) { Free().Give(p, length); });
}

size_t ReleaseLargeBuffers() { return Free().ReleaseAll(); }

size_t KeptLargeBufferBytes() { return Free().kept_bytes(); }

}  // namespace ps
