// NewLargeBuffer: the runtime's own memory for the large arrays it fills at once (the
// parts of a request split over servers, a pulled answer put back in the caller's
// order, frames copied out of shared memory).
//
// A buffer of 8 MiB or more is mapped from the kernel and made resident before it is
// handed out (PrefaultPages: its page faults taken at once, split over a few threads),
// so that filling it is a plain copy: on 10 million keys the faults, not the copies,
// were most of a request's time. The mapping is not marked for transparent huge pages:
// on a virtual machine that hands free memory back to its host, a fresh huge page took
// about twice as long to fault in as its 512 small pages (docs/performance.md). Smaller
// buffers come from operator new. The memory is not zero-filled. Nothing here changes
// the process's allocator settings.
//
// A mapping whose last SArray goes is kept, up to kMaxKeptBytes in all, and handed to
// the next buffer that needs between 4/5 of its size and all of it: its pages are
// already there, so that buffer costs neither page faults nor the kernel's zeroing
// (each fresh page is cleared before use: on 10 million keys per request that was a
// fifth of the worker's time). ReleaseLargeBuffers gives the kept mappings back; an
// idle node does so (PS_IDLE_TRIM_MS).
//
// Thread safety: safe from any thread. Errors: throws std::bad_alloc when the memory
// cannot be had.
#ifndef PS_INTERNAL_LARGE_BUFFER_H_
#define PS_INTERNAL_LARGE_BUFFER_H_

#include <cstddef>

#include "ps/sarray.h"

namespace ps {

// The most bytes of mappings kept for reuse.
constexpr size_t kMaxKeptBytes = size_t{1} << 30;

// An uninitialized buffer of `bytes` bytes (at least one byte of storage when 0),
// freed (or kept for reuse) when its last SArray goes.
SArray<char> NewLargeBuffer(size_t bytes);

// Unmaps every kept mapping; returns their bytes.
size_t ReleaseLargeBuffers();
// The bytes of mappings kept for reuse now.
size_t KeptLargeBufferBytes();

// An uninitialized array of n elements of a trivially copyable V, from NewLargeBuffer.
template <typename V>
SArray<V> NewLargeArray(size_t n) {
  return SArray<V>(NewLargeBuffer(n * sizeof(V)));
}

}  // namespace ps

#endif  // PS_INTERNAL_LARGE_BUFFER_H_
