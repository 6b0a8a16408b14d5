// Basic types and node-group constants of the public API.
#ifndef PS_BASE_H_
#define PS_BASE_H_

#include <cstdint>
#include <limits>

namespace ps {

// The key type. Keys of one request must be sorted ascending and unique.
using Key = uint64_t;

// The largest key.
static const Key kMaxKey = std::numeric_limits<Key>::max();

// Node ids and groups. A group id is a bit mask of the groups it contains, so
// kServerGroup + kWorkerGroup names every server and worker.
static const int kScheduler = 1;
static const int kServerGroup = 2;
static const int kWorkerGroup = 4;

}  // namespace ps

#endif  // PS_BASE_H_
