// The bounds a request must fit before the OptimizerServer touches any key: per-key
// value lengths that the store and an answer can hold, a chunk that fits the job's
// chunks, and, under synchronous aggregation, a clock the consistency model allows.
// Each check is a pure function of the request (and of what the server knows), so a
// refused request changes nothing; the message says what was wrong and what to do.
//
// Thread safety: pure functions.
#ifndef HERDPS_SERVER_REQUEST_BOUNDS_H_
#define HERDPS_SERVER_REQUEST_BOUNDS_H_

#include <cstddef>
#include <cstdint>

#include "ps/kv_pairs.h"
#include "ps/status.h"

namespace ps {

// A push's per-key lengths: from lens (one pass), else vals.size() / keys.size() for
// every key, which *width receives (0 with lens). Each must be at most
// kMaxValueLength, and at least 1 unless the push erases (kEraseKeysCmd); else
// InvalidArgument naming the key and the limit. `data` holds at least one key.
Status CheckValueLengths(const KVMeta& meta, const KVPairs<float>& data, size_t* width);

// A chunk request (meta.chunk >= 0) against the job's chunks of `chunk_values` values:
// one key, the chunk's offset and the key's whole length consistent with the chunk
// index, the chunk at most kMaxValueLength values, and a push carrying exactly them.
// Sets *len to the chunk's length.
Status CheckChunkLayout(const KVMeta& meta, const KVPairs<float>& data, uint64_t chunk_values,
                        uint32_t* len);

// Synchronous aggregation: the clock of a request from a server whose shards have all
// been asked to close the rounds below `closing_below` (the minimum it last heard of).
// A push needs a clock (>= 0), and one whose round is not applied yet (>= closing_below);
// a pull has a clock or -1 (none: it waits for nothing). Either may be at most
// `max_ahead` clocks ahead of closing_below (ShardStore::kMaxClocksAhead). Otherwise
// InvalidArgument naming the clock, the sender and the bound.
Status CheckClock(const KVMeta& meta, int64_t closing_below, int64_t max_ahead);

}  // namespace ps

#endif  // HERDPS_SERVER_REQUEST_BOUNDS_H_
