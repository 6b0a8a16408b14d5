// NewLargeBuffer: the runtime's own memory for the large arrays it fills at once (the
// parts of a request split over servers, a pulled answer put back in the caller's
// order, frames copied out of shared memory).
//
// A buffer of 8 MiB or more is mapped from the kernel on 2 MiB boundaries and marked
// for transparent huge pages (madvise MADV_HUGEPAGE; where the kernel leaves huge
// pages to the program, as Debian's default does), so that filling it takes one page
// fault per 2 MiB instead of one per 4 KiB: on 10 million keys the faults, not the
// copies, were most of a request's time. Smaller buffers come from operator new. The
// memory is not zero-filled. Nothing here changes the process's allocator settings.
//
// Thread safety: safe from any thread. Errors: throws std::bad_alloc when the memory
// cannot be had.
#ifndef PS_INTERNAL_LARGE_BUFFER_H_
#define PS_INTERNAL_LARGE_BUFFER_H_

#include <cstddef>

#include "ps/sarray.h"

namespace ps {

// An uninitialized buffer of `bytes` bytes (at least one byte of storage when 0),
// freed when its last SArray goes.
SArray<char> NewLargeBuffer(size_t bytes);

// An uninitialized array of n elements of a trivially copyable V, from NewLargeBuffer.
template <typename V>
SArray<V> NewLargeArray(size_t n) {
  return SArray<V>(NewLargeBuffer(n * sizeof(V)));
}

}  // namespace ps

#endif  // PS_INTERNAL_LARGE_BUFFER_H_
