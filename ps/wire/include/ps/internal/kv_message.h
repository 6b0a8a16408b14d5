// Packing KVPairs into a Message and unpacking them with validation. A message of a
// KV request or response has the frames: keys (uint64), vals (Val), and optionally
// lens (int32).
#ifndef PS_INTERNAL_KV_MESSAGE_H_
#define PS_INTERNAL_KV_MESSAGE_H_

#include <string>
#include <vector>

#include "ps/internal/key_frame.h"
#include "ps/internal/message.h"
#include "ps/kv_pairs.h"
#include "ps/status.h"

namespace ps {

// The status message (code Unimplemented) of a server app that was sent a chunk of a
// large value but takes whole values only (see Meta::chunk_query).
constexpr const char kChunksRefused[] =
    "this server app takes whole values only (its KVServer does not AcceptChunks)";

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

// What ParseKVFrames and DecodeCompressedValues take as the number of keys when the
// keys frame holds them (every message but an answer with meta.keys_as_asked).
constexpr size_t kKeysFromFrame = SIZE_MAX;

// The frames of a KV message, viewed without copying: keys, values as bytes, lens.
struct KVFrames {
  SArray<Key> keys;
  SArray<char> vals;
  SArray<int> lens;
};

// Checks frame types and that lens / vals agree with the keys; `need_sorted` also
// checks keys are ascending and unique. `type` / `elem_size` are the value type the
// receiver stores. Views the frames without copying. Returns InvalidArgument saying
// what is wrong. (Non-template: the typed ParseKVPairs below and the worker's request
// pipeline share it.) An answer with meta.keys_as_asked has an empty keys frame: the
// worker passes `expected_keys`, the count it asked for, to check the values against
// (frames->keys is then empty).
Status ParseKVFrames(const Message& msg, bool need_sorted, DataType type, size_t elem_size,
                     KVFrames* frames, size_t expected_keys = kKeysFromFrame);

// A KV message whose values frame is a compressed frame (meta.compression != 0; see
// ps/internal/codec_frame.h): validates the frame against the message (codec as the
// meta says, the decoded count matching lens or dividing evenly over the keys) and
// replaces it by the decoded float values, so that ParseKVFrames sees a plain message.
// A frame of a few bytes may claim many values, so the decoded values may take at most
// `max_decoded_bytes` (nodes pass PS_MAX_MESSAGE_BYTES: what a raw message may carry).
// InvalidArgument saying what is wrong otherwise (the message is then unchanged).
// A message without compression is left as it is. `expected_keys`: as for ParseKVFrames.
Status DecodeCompressedValues(Message* msg, uint64_t max_decoded_bytes,
                              size_t expected_keys = kKeysFromFrame);

// Replaces the keys frame (frame 0) by its key frame (ps/internal/key_frame.h) and sets
// meta.keys_encoded, when the keys ascend strictly and the frame is shorter; leaves the
// message as it is otherwise. `shape`: what the caller knows of the keys (key_frame.h).
void EncodeKeysFrame(Message* msg, KeyShape shape = KeyShape::kUnknown);

// A message whose meta says keys_encoded: replaces its key frame by the keys it
// encodes, decoding at most `max_keys` (nodes pass what a raw message of
// PS_MAX_MESSAGE_BYTES could carry), so that ParseKVFrames sees a plain message.
// InvalidArgument saying what is wrong otherwise (the message is then unchanged). A
// message without keys_encoded is left as it is.
Status DecodeKeysFrame(Message* msg, uint64_t max_keys);

// Replaces a float values frame (frame 1) by its fp16 frame and sets
// meta.compression; for pull answers that asked for it (meta.pull_compression).
void EncodeValuesAsFp16(Message* msg);

template <typename Val>
Status ParseKVPairs(const Message& msg, bool need_sorted, KVPairs<Val>* kvs) {
  KVFrames frames;
  Status s = ParseKVFrames(msg, need_sorted, DataTypeOf<Val>(), sizeof(Val), &frames);
  if (!s.ok()) return s;
  kvs->keys = frames.keys;
  kvs->vals = SArray<Val>(frames.vals);
  kvs->lens = frames.lens;
  return Status::OK();
}

}  // namespace ps

#endif  // PS_INTERNAL_KV_MESSAGE_H_
