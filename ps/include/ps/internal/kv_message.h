// Packing KVPairs into a Message and unpacking them with validation. A message of a
// KV request or response has the frames: keys (uint64), vals (Val), and optionally
// lens (int32).
#ifndef PS_INTERNAL_KV_MESSAGE_H_
#define PS_INTERNAL_KV_MESSAGE_H_

#include <string>
#include <vector>

#include "ps/internal/message.h"
#include "ps/kv_pairs.h"
#include "ps/status.h"

namespace ps {

// Prefix sums of lens (size n+1): key i's values are [offsets[i], offsets[i+1]).
inline std::vector<size_t> ValueOffsets(const int* lens, size_t n) {
  std::vector<size_t> offsets(n + 1, 0);
  for (size_t i = 0; i < n; ++i) offsets[i + 1] = offsets[i] + static_cast<size_t>(lens[i]);
  return offsets;
}

template <typename Val>
void AppendKVPairs(const KVPairs<Val>& kvs, Message* msg) {
  msg->AddData(kvs.keys);
  msg->AddData(kvs.vals);
  if (!kvs.lens.empty()) msg->AddData(kvs.lens);
}

// Checks frame types and that lens / vals agree with the keys; `need_sorted` also
// checks keys are ascending and unique. Views the frames without copying. Returns
// InvalidArgument saying what is wrong.
template <typename Val>
Status ParseKVPairs(const Message& msg, bool need_sorted, KVPairs<Val>* kvs) {
  const auto& types = msg.meta.data_type;
  size_t frames = msg.data.size();
  if (types.size() != frames) {
    return Status::InvalidArgument("KV message lists " + std::to_string(types.size()) +
                                   " frame types for " + std::to_string(frames) + " frames");
  }
  if (frames < 1 || frames > 3) {
    return Status::InvalidArgument("KV message has " + std::to_string(frames) +
                                   " data frames; expected keys, vals and optional lens");
  }
  if (types[0] != DataType::kUInt64) {
    return Status::InvalidArgument(std::string("keys frame holds ") + DataTypeName(types[0]) +
                                   ", expected uint64");
  }
  if (frames >= 2 && types[1] != DataTypeOf<Val>() && !msg.data[1].empty()) {
    return Status::InvalidArgument(std::string("values are ") + DataTypeName(types[1]) +
                                   " but this node stores " + DataTypeName(DataTypeOf<Val>()) +
                                   "; use the same value type on workers and servers");
  }
  if (frames == 3 && types[2] != DataType::kInt32) {
    return Status::InvalidArgument(std::string("lens frame holds ") + DataTypeName(types[2]) +
                                   ", expected int32");
  }
  if (msg.data[0].size() % sizeof(Key) != 0) {
    return Status::InvalidArgument("keys frame is not a whole number of keys");
  }
  if (frames >= 2 && msg.data[1].size() % sizeof(Val) != 0) {
    return Status::InvalidArgument("values frame is not a whole number of values");
  }
  if (frames == 3 && msg.data[2].size() % sizeof(int) != 0) {
    return Status::InvalidArgument("lens frame is not a whole number of lengths");
  }
  kvs->keys = SArray<Key>(msg.data[0]);
  kvs->vals = frames >= 2 ? SArray<Val>(msg.data[1]) : SArray<Val>();
  kvs->lens = frames == 3 ? SArray<int>(msg.data[2]) : SArray<int>();
  size_t n = kvs->keys.size();
  if (need_sorted) {
    for (size_t i = 1; i < n; ++i) {
      if (kvs->keys[i] <= kvs->keys[i - 1]) {
        return Status::InvalidArgument("keys are not sorted ascending and unique at position " +
                                       std::to_string(i));
      }
    }
  }
  if (!kvs->lens.empty()) {
    if (kvs->lens.size() != n) {
      return Status::InvalidArgument(std::to_string(kvs->lens.size()) + " lens for " +
                                     std::to_string(n) + " keys");
    }
    size_t sum = 0;
    for (int len : kvs->lens) {
      if (len < 0) return Status::InvalidArgument("negative value length");
      sum += static_cast<size_t>(len);
    }
    if (sum != kvs->vals.size()) {
      return Status::InvalidArgument("lens add up to " + std::to_string(sum) + " values but " +
                                     std::to_string(kvs->vals.size()) + " arrived");
    }
  } else if (!kvs->vals.empty() && (n == 0 || kvs->vals.size() % n != 0)) {
    return Status::InvalidArgument(std::to_string(kvs->vals.size()) +
                                   " values do not divide evenly over " + std::to_string(n) +
                                   " keys");
  }
  return Status::OK();
}

}  // namespace ps

#endif  // PS_INTERNAL_KV_MESSAGE_H_
