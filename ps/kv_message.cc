#include "ps/internal/kv_message.h"

namespace ps {

Status ParseKVFrames(const Message& msg, bool need_sorted, DataType type, size_t elem_size,
                     KVFrames* kvs) {
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
  if (frames >= 2 && types[1] != type && !msg.data[1].empty()) {
    return Status::InvalidArgument(std::string("values are ") + DataTypeName(types[1]) +
                                   " but this node stores " + DataTypeName(type) +
                                   "; use the same value type on workers and servers");
  }
  if (frames == 3 && types[2] != DataType::kInt32) {
    return Status::InvalidArgument(std::string("lens frame holds ") + DataTypeName(types[2]) +
                                   ", expected int32");
  }
  if (msg.data[0].size() % sizeof(Key) != 0) {
    return Status::InvalidArgument("keys frame is not a whole number of keys");
  }
  if (frames >= 2 && msg.data[1].size() % elem_size != 0) {
    return Status::InvalidArgument("values frame is not a whole number of values");
  }
  if (frames == 3 && msg.data[2].size() % sizeof(int) != 0) {
    return Status::InvalidArgument("lens frame is not a whole number of lengths");
  }
  kvs->keys = SArray<Key>(msg.data[0]);
  kvs->vals = frames >= 2 ? msg.data[1] : SArray<char>();
  kvs->lens = frames == 3 ? SArray<int>(msg.data[2]) : SArray<int>();
  size_t n = kvs->keys.size();
  size_t num_vals = kvs->vals.size() / elem_size;
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
    if (sum != num_vals) {
      return Status::InvalidArgument("lens add up to " + std::to_string(sum) + " values but " +
                                     std::to_string(num_vals) + " arrived");
    }
  } else if (num_vals != 0 && (n == 0 || num_vals % n != 0)) {
    return Status::InvalidArgument(std::to_string(num_vals) +
                                   " values do not divide evenly over " + std::to_string(n) +
                                   " keys");
  }
  return Status::OK();
}

}  // namespace ps
