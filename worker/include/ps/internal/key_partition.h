// Splitting a request's keys over the servers that own them.
#ifndef PS_INTERNAL_KEY_PARTITION_H_
#define PS_INTERNAL_KEY_PARTITION_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ps/base.h"
#include "ps/internal/consistent_hash_ring.h"
#include "ps/internal/kv_message.h"
#include "ps/kv_pairs.h"
#include "ps/status.h"

namespace ps {

// For each server rank (index), the positions in the request of the keys it owns, in
// request order (so each part is sorted too).
struct KeyPartition {
  std::vector<std::vector<uint32_t>> positions;
};

// Places keys[0..n) on the ring's servers. `num_servers` bounds the ranks.
KeyPartition PartitionKeys(const ConsistentHashRing& ring, int num_servers, const Key* keys,
                           size_t n);

// Checks that keys are sorted ascending without duplicates and that vals/lens agree
// with them (see KVPairs). `what` names the call in the message ("Push", ...).
// `need_vals` is false for pulls (their vals are the output).
Status ValidateKVPairsShape(const char* what, const Key* keys, size_t num_keys, size_t num_vals,
                            const int* lens, size_t num_lens, bool need_vals);
// The same, without the pass over the keys when the caller knows they ascend strictly
// (`keys_ascend`: IsOneRun said they are one run).
Status ValidateKVPairsShape(const char* what, const Key* keys, size_t num_keys, size_t num_vals,
                            const int* lens, size_t num_lens, bool need_vals, bool keys_ascend);

// The part of `kvs` that `positions` selects (a deep copy of those keys and values).
// `value_offsets` is ValueOffsets(kvs.lens) or empty when every key has `width` values.
template <typename Val>
KVPairs<Val> SelectKVPairs(const KVPairs<Val>& kvs, const std::vector<uint32_t>& positions,
                           const std::vector<size_t>& value_offsets, size_t width) {
  KVPairs<Val> part;
  part.priority = kvs.priority;
  part.keys.resize(positions.size());
  size_t total = 0;
  for (uint32_t p : positions) {
    total += value_offsets.empty() ? width : value_offsets[p + 1] - value_offsets[p];
  }
  if (!kvs.vals.empty()) part.vals.resize(total);
  if (!kvs.lens.empty()) part.lens.resize(positions.size());
  size_t out = 0;
  for (size_t i = 0; i < positions.size(); ++i) {
    uint32_t p = positions[i];
    part.keys[i] = kvs.keys[p];
    size_t begin = value_offsets.empty() ? p * width : value_offsets[p];
    size_t len = value_offsets.empty() ? width : value_offsets[p + 1] - begin;
    if (!kvs.lens.empty()) part.lens[i] = kvs.lens[p];
    if (!kvs.vals.empty() && len) {
      std::copy(kvs.vals.data() + begin, kvs.vals.data() + begin + len, part.vals.data() + out);
    }
    out += len;
  }
  return part;
}

}  // namespace ps

#endif  // PS_INTERNAL_KEY_PARTITION_H_
