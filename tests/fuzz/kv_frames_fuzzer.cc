// ParseKVFrames / ParseKVPairs<Val> (ps/internal/kv_message.h) and the server's decoding
// of key frames (DecodeKeysFrame) and of compressed values (DecodeCompressedValues), on
// data frames as a decoded meta lists them: every value type a node may store, sorted
// keys required or not.
//
// Input: u8 options (bit 0: keys must be sorted; bits 1-3: the receiver's value type,
// one of float double int32 int64 uint64 int8 uint8 char; bits 4-6: meta.compression;
// bit 7: meta.keys_encoded),
// u8 number of frame types (mod 5), u8 number of frames (mod 5), one u8 DataType per
// type (mod 12), then the frames, each a u32 length and its bytes.
//
// Properties: nothing crashes or reads outside a frame (every accepted view is read in
// full); an accepted message has whole keys, values and lengths that agree (lengths add
// up to the values, or the values divide evenly over the keys), keys ascending when
// asked; decoded compressed values are floats, as many as the frame said. (Frames that
// claim more than kMaxDecodedBytes are refused, as nodes refuse more than
// PS_MAX_MESSAGE_BYTES.)
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "ps/internal/codec_frame.h"
#include "ps/internal/kv_message.h"
#include "ps/internal/message.h"
#include "ps/kv_pairs.h"

namespace {

template <typename Val>
void Parse(const ps::Message& msg, bool need_sorted) {
  ps::KVPairs<Val> kvs;
  if (!ps::ParseKVPairs<Val>(msg, need_sorted, &kvs).ok()) return;
  ps::fuzz::TouchAll(kvs.keys);
  ps::fuzz::TouchAll(kvs.vals);
  ps::fuzz::TouchAll(kvs.lens);
  const size_t n = kvs.keys.size();
  FUZZ_EXPECT(n * sizeof(ps::Key) == msg.data[0].size());
  if (!kvs.lens.empty()) {
    FUZZ_EXPECT(kvs.lens.size() == n);
    size_t sum = 0;
    for (int len : kvs.lens) {
      FUZZ_EXPECT(len >= 0);
      sum += static_cast<size_t>(len);
    }
    FUZZ_EXPECT(sum == kvs.vals.size());
  } else {
    FUZZ_EXPECT(kvs.vals.empty() || (n > 0 && kvs.vals.size() % n == 0));
  }
  for (size_t i = 1; need_sorted && i < n; ++i) FUZZ_EXPECT(kvs.keys[i - 1] < kvs.keys[i]);
}

void ParseAs(int type, const ps::Message& msg, bool need_sorted) {
  switch (type) {
    case 0:
      return Parse<float>(msg, need_sorted);
    case 1:
      return Parse<double>(msg, need_sorted);
    case 2:
      return Parse<int32_t>(msg, need_sorted);
    case 3:
      return Parse<int64_t>(msg, need_sorted);
    case 4:
      return Parse<uint64_t>(msg, need_sorted);
    case 5:
      return Parse<int8_t>(msg, need_sorted);
    case 6:
      return Parse<uint8_t>(msg, need_sorted);
    default:
      return Parse<char>(msg, need_sorted);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ps::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ps::fuzz::InputReader in(data, size);
  const uint8_t options = in.Take<uint8_t>();
  const bool need_sorted = options & 1;
  const int value_type = (options >> 1) & 7;
  const int compression = (options >> 4) & 7;
  const size_t types = in.Take<uint8_t>() % 5;
  const size_t frames = in.Take<uint8_t>() % 5;
  ps::Message msg;
  msg.meta.compression = compression;
  msg.meta.keys_encoded = options & 0x80;
  for (size_t i = 0; i < types; ++i) {
    msg.meta.data_type.push_back(static_cast<ps::DataType>(in.Take<uint8_t>() % 12));
  }
  for (size_t i = 0; i < frames; ++i) msg.data.push_back(ps::fuzz::FrameOf(in.TakeChunk()));
  if (msg.meta.keys_encoded) {
    // As KVServer does before anything else: a key frame becomes the keys it encodes.
    const ps::Message before = msg;
    if (!ps::DecodeKeysFrame(&msg, ps::fuzz::kMaxDecodedBytes / sizeof(ps::Key)).ok()) {
      // Refused: the message is as it was.
      FUZZ_EXPECT(msg.meta.keys_encoded && msg.data.size() == before.data.size());
      FUZZ_EXPECT(msg.data.empty() || msg.data[0].data() == before.data[0].data());
      return 0;
    }
    FUZZ_EXPECT(!msg.meta.keys_encoded && msg.meta.data_type[0] == ps::DataType::kUInt64);
    ps::fuzz::TouchAll(msg.data[0]);
  }

  if (compression == 0) {
    ParseAs(value_type, msg, need_sorted);
    return 0;
  }
  // Compressed values reach only servers of floats (KVServer refuses them otherwise).
  ps::Message decoded = msg;
  if (!ps::DecodeCompressedValues(&decoded, ps::fuzz::kMaxDecodedBytes).ok()) return 0;
  FUZZ_EXPECT(decoded.meta.compression == 0);
  FUZZ_EXPECT(decoded.meta.data_type[1] == ps::DataType::kFloat);
  ps::FrameInfo info;
  FUZZ_EXPECT(ps::InspectFrame(msg.data[1].data(), msg.data[1].size(), &info).ok());
  FUZZ_EXPECT(decoded.data[1].size() == info.count * sizeof(float));
  ps::fuzz::TouchAll(decoded.data[1]);
  Parse<float>(decoded, need_sorted);
  return 0;
}
