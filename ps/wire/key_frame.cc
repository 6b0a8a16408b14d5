#include "ps/internal/key_frame.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "ps/internal/codec_frame.h"
#include "ps/internal/large_buffer.h"

namespace ps {
namespace {

// VarintBytes without the call: once or twice per key on the encoder's path.
inline size_t VarintLength(uint64_t v) {
  return 1 + static_cast<size_t>((63 - __builtin_clzll(v | 1)) / 7);
}

Status Bad(size_t at, const std::string& what) {
  return Status::InvalidArgument("key frame, byte " + std::to_string(at) + ": " + what);
}

// The runs of equal steps in keys[0..n) (ascending strictly), in order: each run's
// step and repeat go to `emit`.
template <typename Emit>
void ForEachRun(const Key* keys, size_t n, Emit emit) {
  Key step = 0;
  uint64_t repeat = 0;
  for (size_t i = 1; i < n; ++i) {
    const Key s = keys[i] - keys[i - 1];
    if (repeat && s == step) {
      ++repeat;
      continue;
    }
    if (repeat) emit(step, repeat);
    step = s;
    repeat = 1;
  }
  if (repeat) emit(step, repeat);
}

// A frame is written only at half the raw size or less: the encoder's pass and the
// decoder's array cost more than the bytes a smaller gain saves on a fast link.
constexpr size_t kMaxBytesPerKey = sizeof(Key) / 2;
constexpr size_t kProbeKeys = 1024;

// PlanKeyFrame's pass; with `give_up`, it stops (bytes 0) once the first 1024 keys
// cost more than kMaxBytesPerKey each in both forms: such a list (ps-lite's strided
// keys split between servers, say) would not shrink enough to pay for the passes.
KeyFramePlan Plan(const Key* keys, size_t n, bool give_up) {
  KeyFramePlan plan;
  const size_t head = 2 + VarintLength(n) + (n ? VarintLength(keys[0]) : 0);
  size_t steps = 0, runs = 0;
  Key step = 0;
  uint64_t repeat = 0;
  for (size_t i = 1; i < n; ++i) {
    if (keys[i] <= keys[i - 1]) return plan;
    if (give_up && i == kProbeKeys && steps > kProbeKeys * kMaxBytesPerKey &&
        runs > kProbeKeys * kMaxBytesPerKey) {
      return plan;
    }
    const Key s = keys[i] - keys[i - 1];
    steps += VarintLength(s - 1);
    if (repeat && s == step) {
      ++repeat;
      continue;
    }
    if (repeat) runs += VarintLength(step - 1) + VarintLength(repeat - 1);
    step = s;
    repeat = 1;
  }
  if (repeat) runs += VarintLength(step - 1) + VarintLength(repeat - 1);
  plan.form = runs < steps ? KeyForm::kRuns : KeyForm::kSteps;
  plan.bytes = head + (runs < steps ? runs : steps);
  return plan;
}

// The bitmap form, from its header on (DecodeKeyFrame has checked the marker and form).
// Two passes over the bitmap: its set bits are counted against the count before the
// keys are allocated and written.
Status DecodeBitmap(const char* data, size_t size, uint64_t max_keys, SArray<Key>* keys) {
  size_t pos = 2;
  uint64_t count = 0, first = 0, step = 0;
  if (!ParseVarint(data, size, &pos, &count)) {
    return Bad(pos, "the count varint is truncated, over 64 bits or not in its shortest form");
  }
  if (count == 0) return Bad(2, "a bitmap frame of no keys");
  if (count > max_keys) {
    return Bad(2, "the frame claims " + std::to_string(count) + " keys, over the " +
                      std::to_string(max_keys) + " a message may carry (PS_MAX_MESSAGE_BYTES)");
  }
  size_t at = pos;
  if (!ParseVarint(data, size, &pos, &first)) {
    return Bad(at, "the first key's varint is truncated, over 64 bits or not shortest");
  }
  at = pos;
  if (!ParseVarint(data, size, &pos, &step) || step == UINT64_MAX) {
    return Bad(at, "the step varint is truncated, over 64 bits or not in its shortest form");
  }
  ++step;
  const unsigned char* bits = reinterpret_cast<const unsigned char*>(data) + pos;
  const size_t bytes = size - pos;
  if (bytes == 0 || (bits[0] & 1) == 0) {
    return Bad(pos, "the bitmap does not start with the first key's bit");
  }
  if (bits[bytes - 1] == 0) return Bad(size - 1, "the bitmap's last byte is 0");
  // The last key's position, and the last key within 64 bits.
  const uint64_t last = (bytes - 1) * 8 + (31 - __builtin_clz(bits[bytes - 1]));
  if (last > 0 && step > (UINT64_MAX - first) / last) {
    return Bad(pos, "the bitmap's last key would pass 2^64 - 1");
  }
  uint64_t set = 0;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t word;
    std::memcpy(&word, bits + i, 8);
    set += static_cast<uint64_t>(__builtin_popcountll(word));
  }
  for (; i < bytes; ++i) set += static_cast<uint64_t>(__builtin_popcount(bits[i]));
  if (set != count) {
    return Bad(pos, "the bitmap has " + std::to_string(set) + " keys, the count says " +
                        std::to_string(count));
  }
  SArray<Key> out = NewLargeArray<Key>(static_cast<size_t>(count));
  Key* o = out.data();
  for (i = 0; i < bytes; i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, bits + i, std::min<size_t>(8, bytes - i));  // little-endian hosts
    const Key base = first + i * 8 * step;
    while (word) {
      *o++ = base + static_cast<Key>(__builtin_ctzll(word)) * step;
      word &= word - 1;
    }
  }
  *keys = out;
  return Status::OK();
}

}  // namespace

KeyFramePlan PlanKeyFrame(const Key* keys, size_t n) { return Plan(keys, n, false); }

bool IsOneRun(const Key* keys, size_t n) {
  if (n < 3) return n < 2 || keys[1] > keys[0];
  const Key step = keys[1] - keys[0];
  // Ascending, and the last key within 64 bits: equal differences alone would also
  // hold for keys that wrap around.
  if (keys[1] <= keys[0] || step > (UINT64_MAX - keys[0]) / (n - 1)) return false;
  // Differences from the step, or-ed together: no branch per key, one per block.
  constexpr size_t kBlock = 1024;
  for (size_t begin = 2; begin < n; begin += kBlock) {
    const size_t end = begin + kBlock < n ? begin + kBlock : n;
    uint64_t off = 0;
    for (size_t i = begin; i < end; ++i) off |= (keys[i] - keys[i - 1]) ^ step;
    if (off != 0) return false;
  }
  return true;
}

bool EncodeKeyFrame(const Key* keys, size_t n, SArray<char>* out, KeyShape shape) {
  // A dense range or a strided layout needs no plan: one run, written at once (unless
  // so few keys that the steps form is as short: then the plan below picks it).
  const bool one_run = shape == KeyShape::kUnknown ? IsOneRun(keys, n) : shape == KeyShape::kOneRun;
  const Key step = n >= 2 ? keys[1] - keys[0] : 0;
  if (n >= 2 && one_run &&
      (n - 1) * VarintLength(step - 1) > VarintLength(step - 1) + VarintLength(n - 2)) {
    const size_t bytes = 2 + VarintLength(n) + VarintLength(keys[0]) + VarintLength(step - 1) +
                         VarintLength(n - 2);
    if (bytes > n * kMaxBytesPerKey) return false;  // a few large keys
    SArray<char> frame(bytes);
    char* p = frame.data();
    *p++ = static_cast<char>(kKeyFrameMarker);
    *p++ = static_cast<char>(KeyForm::kRuns);
    p = StoreVarint(n, p);
    p = StoreVarint(keys[0], p);
    p = StoreVarint(step - 1, p);
    StoreVarint(n - 2, p);
    *out = frame;
    return true;
  }
  const KeyFramePlan plan = Plan(keys, n, true);
  if (plan.bytes == 0 || plan.bytes > n * kMaxBytesPerKey) return false;
  SArray<char> frame = NewLargeBuffer(plan.bytes);
  char* p = frame.data();
  *p++ = static_cast<char>(kKeyFrameMarker);
  *p++ = static_cast<char>(plan.form);
  p = StoreVarint(n, p);
  p = StoreVarint(keys[0], p);
  if (plan.form == KeyForm::kSteps) {
    for (size_t i = 1; i < n; ++i) p = StoreVarint(keys[i] - keys[i - 1] - 1, p);
  } else {
    ForEachRun(keys, n, [&p](Key step, uint64_t repeat) {
      p = StoreVarint(step - 1, p);
      p = StoreVarint(repeat - 1, p);
    });
  }
  *out = frame;
  return true;
}

size_t KeyBitmapFrameBytes(uint64_t count, Key first, Key step, uint64_t span) {
  return 2 + VarintLength(count) + VarintLength(first) + VarintLength(step - 1) +
         static_cast<size_t>((span + 7) / 8);
}

char* BeginKeyBitmapFrame(uint64_t count, Key first, Key step, uint64_t span,
                          SArray<char>* frame) {
  const size_t bytes = KeyBitmapFrameBytes(count, first, step, span);
  *frame = NewLargeBuffer(bytes);
  char* p = frame->data();
  *p++ = static_cast<char>(kKeyFrameMarker);
  *p++ = static_cast<char>(KeyForm::kBitmap);
  p = StoreVarint(count, p);
  p = StoreVarint(first, p);
  p = StoreVarint(step - 1, p);
  std::memset(p, 0, frame->data() + bytes - p);
  return p;
}

uint64_t KeyFrameCount(const char* data, size_t size) {
  if (size < 2 || static_cast<uint8_t>(data[0]) != kKeyFrameMarker) return 0;
  size_t pos = 2;
  uint64_t count = 0;
  return ParseVarint(data, size, &pos, &count) ? count : 0;
}

Status DecodeKeyFrame(const char* data, size_t size, uint64_t max_keys, SArray<Key>* keys) {
  if (size < 2) {
    return Bad(0, "the frame has " + std::to_string(size) + " bytes, less than its header");
  }
  if (static_cast<uint8_t>(data[0]) != kKeyFrameMarker) {
    return Bad(0, "marker " + std::to_string(static_cast<uint8_t>(data[0])) +
                      " is not a key frame's (161)");
  }
  const uint8_t form = static_cast<uint8_t>(data[1]);
  const bool steps = form == static_cast<uint8_t>(KeyForm::kSteps);
  if (form == static_cast<uint8_t>(KeyForm::kBitmap)) {
    return DecodeBitmap(data, size, max_keys, keys);
  }
  if (!steps && form != static_cast<uint8_t>(KeyForm::kRuns)) {
    return Bad(1, "unknown form " + std::to_string(form));
  }
  size_t pos = 2;
  uint64_t count = 0;
  if (!ParseVarint(data, size, &pos, &count)) {
    return Bad(pos, "the count varint is truncated, over 64 bits or not in its shortest form");
  }
  if (count > max_keys) {
    return Bad(2, "the frame claims " + std::to_string(count) + " keys, over the " +
                      std::to_string(max_keys) + " a message may carry (PS_MAX_MESSAGE_BYTES)");
  }
  // Each key after the first takes at least a byte in the steps form: a short frame
  // cannot make the decoder allocate much.
  if (steps && count > 1 && count - 1 > size - pos) {
    return Bad(pos, "the frame claims " + std::to_string(count) + " keys in " +
                        std::to_string(size) + " bytes");
  }
  SArray<Key> out = NewLargeArray<Key>(static_cast<size_t>(count));
  if (count > 0) {
    uint64_t key = 0;
    const size_t at = pos;
    if (!ParseVarint(data, size, &pos, &key)) {
      return Bad(at, "the first key's varint is truncated, over 64 bits or not shortest");
    }
    out[0] = key;
    size_t i = 1;
    while (i < count) {
      const size_t step_at = pos;
      uint64_t step = 0, repeat = 1;
      if (!ParseVarint(data, size, &pos, &step)) {
        return Bad(step_at, "the step varint of key " + std::to_string(i) +
                                " is truncated, over 64 bits or not in its shortest form");
      }
      if (!steps) {
        const size_t repeat_at = pos;
        if (!ParseVarint(data, size, &pos, &repeat)) {
          return Bad(repeat_at, "the repeat varint of key " + std::to_string(i) +
                                    " is truncated, over 64 bits or not in its shortest form");
        }
        if (repeat >= count - i) {
          return Bad(repeat_at, "a run of " + std::to_string(repeat) + " + 1 keys from key " +
                                    std::to_string(i) + " passes the count " +
                                    std::to_string(count));
        }
        ++repeat;
      }
      // step + 1 and key + repeat * (step + 1) must stay within 64 bits.
      if (step == UINT64_MAX || step + 1 > (UINT64_MAX - key) / repeat) {
        return Bad(step_at, "key " + std::to_string(i) + " would pass 2^64 - 1");
      }
      ++step;
      for (uint64_t r = 0; r < repeat; ++r) {
        key += step;
        out[i++] = key;
      }
    }
  }
  if (pos != size) {
    return Bad(pos, std::to_string(size - pos) + " bytes after the last key");
  }
  *keys = out;
  return Status::OK();
}

}  // namespace ps
