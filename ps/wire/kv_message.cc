#include "ps/internal/kv_message.h"

#include <algorithm>
#include <cmath>

#include "ps/internal/codec_frame.h"
#include "ps/internal/key_frame.h"
#include "ps/internal/key_order.h"

namespace ps {

Status ParseKVFrames(const Message& msg, bool need_sorted, DataType type, size_t elem_size,
                     KVFrames* kvs, size_t expected_keys) {
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
  const bool as_asked = expected_keys != kKeysFromFrame;
  if (as_asked && !msg.data[0].empty()) {
    return Status::InvalidArgument("an answer of the keys as asked carries keys");
  }
  kvs->keys = SArray<Key>(msg.data[0]);
  kvs->vals = frames >= 2 ? msg.data[1] : SArray<char>();
  kvs->lens = frames == 3 ? SArray<int>(msg.data[2]) : SArray<int>();
  size_t n = as_asked ? expected_keys : kvs->keys.size();
  size_t num_vals = kvs->vals.size() / elem_size;
  if (need_sorted && !as_asked) {
    const size_t bad = FirstUnsortedKey(kvs->keys.data(), n);
    if (bad < n) {
      return Status::InvalidArgument("keys are not sorted ascending and unique at position " +
                                     std::to_string(bad));
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

Status DecodeCompressedValues(Message* msg, uint64_t max_decoded_bytes, size_t expected_keys) {
  if (msg->meta.compression == 0) return Status::OK();
  const auto& types = msg->meta.data_type;
  const size_t frames = msg->data.size();
  if (types.size() != frames || frames < 2 || frames > 3) {
    return Status::InvalidArgument("compressed KV message has " + std::to_string(frames) +
                                   " data frames; expected keys, a compressed frame and "
                                   "optional lens");
  }
  if (types[0] != DataType::kUInt64 || msg->data[0].size() % sizeof(Key) != 0) {
    return Status::InvalidArgument("compressed KV message: keys frame is not uint64 keys");
  }
  if (frames == 3 && (types[2] != DataType::kInt32 || msg->data[2].size() % sizeof(int) != 0)) {
    return Status::InvalidArgument("compressed KV message: lens frame is not int32");
  }
  const SArray<char>& frame = msg->data[1];
  FrameInfo info;
  Status s = InspectFrame(frame.data(), frame.size(), &info);
  if (!s.ok()) return Status::InvalidArgument("compressed values: " + s.message());
  if (static_cast<int>(info.codec) != msg->meta.compression) {
    return Status::InvalidArgument(std::string("compressed values: the frame is ") +
                                   CodecName(info.codec) + " but the message says codec " +
                                   std::to_string(msg->meta.compression));
  }
  const size_t keys =
      expected_keys != kKeysFromFrame ? expected_keys : msg->data[0].size() / sizeof(Key);
  if (frames == 3) {
    SArray<int> lens(msg->data[2]);
    uint64_t sum = 0;
    for (int len : lens) sum += len < 0 ? UINT64_MAX / 2 : static_cast<uint64_t>(len);
    if (lens.size() != keys || sum != info.count) {
      return Status::InvalidArgument("compressed values: the frame decodes to " +
                                     std::to_string(info.count) +
                                     " values, which the lens do not describe");
    }
  } else if (keys == 0 ? info.count != 0 : info.count % keys != 0) {
    return Status::InvalidArgument("compressed values: " + std::to_string(info.count) +
                                   " values do not divide evenly over " +
                                   std::to_string(keys) + " keys");
  }
  // A frame of a dozen bytes may claim billions of values: the decoded values may take
  // no more than a raw message could carry.
  if (info.count > max_decoded_bytes / sizeof(float)) {
    return Status::InvalidArgument("compressed values: the frame decodes to " +
                                   std::to_string(info.count) + " values, over the " +
                                   std::to_string(max_decoded_bytes) +
                                   " bytes a message may carry (PS_MAX_MESSAGE_BYTES)");
  }
  SArray<float> decoded(static_cast<size_t>(info.count));
  s = DecodeFrame(frame.data(), frame.size(), decoded.data(), decoded.size());
  if (!s.ok()) return Status::InvalidArgument("compressed values: " + s.message());
  msg->data[1] = SArray<char>(decoded);
  msg->meta.data_type[1] = DataType::kFloat;
  msg->meta.compression = 0;
  return Status::OK();
}

void EncodeKeysFrame(Message* msg, KeyShape shape) {
  if (msg->data.empty() || msg->meta.data_type.empty() ||
      msg->meta.data_type[0] != DataType::kUInt64) {
    return;
  }
  const SArray<Key> keys(msg->data[0]);
  SArray<char> frame;
  if (!EncodeKeyFrame(keys.data(), keys.size(), &frame, shape)) return;
  msg->data[0] = frame;
  msg->meta.data_type[0] = DataType::kChar;
  msg->meta.keys_encoded = true;
}

Status DecodeKeysFrame(Message* msg, uint64_t max_keys) {
  if (!msg->meta.keys_encoded) return Status::OK();
  if (msg->data.empty() || msg->meta.data_type.size() != msg->data.size() ||
      msg->meta.data_type[0] != DataType::kChar) {
    return Status::InvalidArgument("the message says its keys are encoded but has no key frame");
  }
  SArray<Key> keys;
  Status s = DecodeKeyFrame(msg->data[0].data(), msg->data[0].size(), max_keys, &keys);
  if (!s.ok()) return s;
  msg->data[0] = SArray<char>(keys);
  msg->meta.data_type[0] = DataType::kUInt64;
  msg->meta.keys_encoded = false;
  return Status::OK();
}

void EncodeValuesAsFp16(Message* msg) {
  if (msg->data.size() < 2 || msg->meta.data_type[1] != DataType::kFloat) return;
  // Finite values beyond the half range are sent as +-65504, as the fp16 codec does,
  // not as infinity.
  SArray<float> vals(msg->data[1]);
  SArray<char> frame;
  char* body = BeginFrame(Codec::kFp16, vals.size(), vals.size() * sizeof(uint16_t), &frame);
  for (size_t i = 0; i < vals.size(); ++i) {
    float v = vals[i];
    if (std::isfinite(v)) v = std::max(-65504.0f, std::min(65504.0f, v));
    StoreLE(FloatToHalf(v), body + i * sizeof(uint16_t));
  }
  msg->data[1] = frame;
  msg->meta.data_type[1] = DataType::kChar;
  msg->meta.compression = static_cast<int>(Codec::kFp16);
}

}  // namespace ps
