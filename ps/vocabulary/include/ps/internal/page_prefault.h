// PrefaultPages: makes a range of this process's memory resident before it is filled,
// with the work split over a few short-lived threads.
//
// The first write to a page costs a fault, and on a virtual machine whose host backs
// guest memory only when it is first touched (free memory handed back to the host, as
// with free page reporting or a balloon) each fault also waits for the host: there,
// filling 80 MiB of fresh memory took 80-170 ms on one thread and about 30 ms as two
// threads' MADV_POPULATE_WRITE. The runtime's large buffers and shared-memory blocks
// are made resident this way just before they are filled.
//
// Best effort: where the kernel lacks MADV_POPULATE_WRITE (before Linux 5.14: the first
// refusal turns every later call into a no-op), or a thread cannot start, less or
// nothing is done ahead and the writes fault as usual.
// The bytes are not changed. Thread safety: safe from any thread, on any memory this
// process may write (private or shared).
#ifndef PS_INTERNAL_PAGE_PREFAULT_H_
#define PS_INTERNAL_PAGE_PREFAULT_H_

#include <cstddef>

namespace ps {

// Below this many bytes per thread, fewer threads share the range (the caller alone
// for less than twice this): starting a thread costs more than the faults it would
// take over.
constexpr size_t kPrefaultBytesPerThread = size_t{4} << 20;
// The most threads one call uses, the caller's included.
constexpr unsigned kMaxPrefaultThreads = 4;

// Makes the whole pages of [data, data + bytes) resident and writable now; returns when
// they are.
void PrefaultPages(void* data, size_t bytes);

}  // namespace ps

#endif  // PS_INTERNAL_PAGE_PREFAULT_H_
