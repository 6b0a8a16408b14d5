// NewLargeBuffer: large buffers mapped from the kernel, made resident up front and kept
// for reuse (see the header).
#include "ps/internal/large_buffer.h"

#include <sys/mman.h>

#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#include "ps/internal/page_prefault.h"

namespace ps {
namespace {

// Mappings are made in steps of this, so that a kept one fits buffers of nearby sizes.
constexpr size_t kMapStep = size_t{2} << 20;
// Below this a buffer comes from operator new: the rounding would waste more than the
// faults cost.
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

char* MapFresh(size_t length) {
  void* data = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) throw std::bad_alloc();
  PrefaultPages(data, length);
  return static_cast<char*>(data);
}

}  // namespace

SArray<char> NewLargeBuffer(size_t bytes) {
  if (bytes < kMapFrom) {
    return SArray<char>(new char[bytes ? bytes : 1], bytes, [](char* p) { delete[] p; });
  }
  size_t length = RoundUp(bytes, kMapStep);
  char* data = Free().Take(length, &length);
  if (!data) data = MapFresh(length);
  return SArray<char>(data, bytes, [length](char* p) { Free().Give(p, length); });
}

size_t ReleaseLargeBuffers() { return Free().ReleaseAll(); }

size_t KeptLargeBufferBytes() { return Free().kept_bytes(); }

}  // namespace ps
