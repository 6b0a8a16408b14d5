#include "ps/internal/key_partition.h"

#include "ps/internal/key_order.h"

namespace ps {

KeyPartition PartitionKeys(const ConsistentHashRing& ring, int num_servers, const Key* keys,
                           size_t n) {
  KeyPartition part;
  part.positions.resize(num_servers);
  for (size_t i = 0; i < n; ++i) {
    part.positions[ring.ServerOf(keys[i])].push_back(static_cast<uint32_t>(i));
  }
  return part;
}

Status ValidateKVPairsShape(const char* what, const Key* keys, size_t num_keys, size_t num_vals,
                            const int* lens, size_t num_lens, bool need_vals) {
  return ValidateKVPairsShape(what, keys, num_keys, num_vals, lens, num_lens, need_vals, false);
}

Status ValidateKVPairsShape(const char* what, const Key* keys, size_t num_keys, size_t num_vals,
                            const int* lens, size_t num_lens, bool need_vals, bool keys_ascend) {
  std::string call(what);
  if (num_keys > UINT32_MAX) return Status::InvalidArgument(call + ": too many keys in one call");
  const size_t i = keys_ascend ? num_keys : FirstUnsortedKey(keys, num_keys);
  if (i < num_keys) {
    return Status::InvalidArgument(
        call + ": keys must be sorted ascending without duplicates, but key[" +
        std::to_string(i - 1) + "]=" + std::to_string(keys[i - 1]) + " and key[" +
        std::to_string(i) + "]=" + std::to_string(keys[i]));
  }
  if (!need_vals) return Status::OK();
  if (num_lens) {
    if (num_lens != num_keys) {
      return Status::InvalidArgument(call + ": " + std::to_string(num_lens) + " lens for " +
                                     std::to_string(num_keys) + " keys; give one per key");
    }
    size_t sum = 0;
    for (size_t i = 0; i < num_lens; ++i) {
      if (lens[i] <= 0) {
        return Status::InvalidArgument(call + ": lens[" + std::to_string(i) + "] is " +
                                       std::to_string(lens[i]) +
                                       "; every pushed key needs at least one value");
      }
      sum += static_cast<size_t>(lens[i]);
    }
    if (sum != num_vals) {
      return Status::InvalidArgument(call + ": lens add up to " + std::to_string(sum) +
                                     " values but " + std::to_string(num_vals) + " were given");
    }
    return Status::OK();
  }
  if (num_keys == 0) {
    if (num_vals) return Status::InvalidArgument(call + ": values without keys");
    return Status::OK();
  }
  if (num_vals == 0) {
    return Status::InvalidArgument(call + ": no values for " + std::to_string(num_keys) +
                                   " keys");
  }
  if (num_vals % num_keys != 0) {
    return Status::InvalidArgument(call + ": " + std::to_string(num_vals) +
                                   " values do not divide evenly over " +
                                   std::to_string(num_keys) + " keys; pass lens");
  }
  return Status::OK();
}

}  // namespace ps
