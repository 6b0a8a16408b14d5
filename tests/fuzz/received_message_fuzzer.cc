// A whole received message, from the frames ZeroMQ hands the van to the typed values an
// app handle would see. The van's receive path (ZmqVan::ReceiveOne) reads sockets, so
// this target repeats its checks on raw frames (at least an identity and a meta frame,
// at most 64 data frames, DecodeMeta against the frames' sizes) and then runs every
// parser a receiving node may apply to it (a message that claims to be a request must
// not hurt a worker either):
//   - as a server of floats takes a KV request: DecodeCompressedValues when the values
//     are compressed (frames that claim over 2^24 values left out, see fuzz_input.h),
//     then ParseKVPairs<float> with sorted keys (KVServer);
//   - as a worker's request pipeline takes a KV answer: ParseKVFrames unsorted, for
//     floats and for the value type the frame claims, and Status::FromWire;
//   - the bodies of the clock and order protocols (ParseClockText, DecodeOrder*);
//   - a control message's job settings (ConsistencyModel::FromWire).
//
// Input: frames, each a u32 length and its bytes (the last may be cut short): the
// routing identity, the meta, then the data frames.
//
// Properties: nothing crashes or reads outside a frame (every accepted view is read
// in full); accepted KV frames agree with each other (key count, lengths, values); an
// accepted body or model reads back as it was written.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "meta_codec.h"
#include "ps/consistency.h"
#include "ps/internal/clock_client.h"
#include "ps/internal/kv_message.h"
#include "ps/internal/message.h"
#include "ps/internal/order_protocol.h"
#include "ps/kv_pairs.h"
#include "ps/status.h"

namespace {

constexpr size_t kMaxDataFrames = 64;  // VanOptions::max_frames

// What an accepted KV message promises whoever reads it.
void ExpectConsistent(const ps::KVFrames& f, size_t elem_size, bool sorted) {
  ps::fuzz::TouchAll(f.keys);
  ps::fuzz::TouchAll(f.vals);
  ps::fuzz::TouchAll(f.lens);
  FUZZ_EXPECT(f.vals.size() % elem_size == 0);
  const size_t n = f.keys.size();
  const size_t values = f.vals.size() / elem_size;
  if (!f.lens.empty()) {
    FUZZ_EXPECT(f.lens.size() == n);
    std::vector<size_t> offsets = ps::ValueOffsets(f.lens.data(), n);
    FUZZ_EXPECT(offsets[n] == values);
  } else {
    FUZZ_EXPECT(values == 0 || (n > 0 && values % n == 0));
  }
  for (size_t i = 1; sorted && i < n; ++i) FUZZ_EXPECT(f.keys[i - 1] < f.keys[i]);
}

void AsServer(const ps::Message& received) {
  ps::Message msg = received;  // DecodeCompressedValues rewrites the message
  ps::Status s;
  if (msg.meta.compression != 0) {
    s = ps::DecodeCompressedValues(&msg, ps::fuzz::kMaxDecodedBytes);
  }
  if (!s.ok()) return;
  FUZZ_EXPECT(msg.meta.compression == 0);
  ps::KVPairs<float> kvs;
  s = ps::ParseKVPairs<float>(msg, /*need_sorted=*/true, &kvs);
  if (!s.ok()) return;
  ps::KVFrames f;
  f.keys = kvs.keys;
  f.vals = ps::SArray<char>(kvs.vals);
  f.lens = kvs.lens;
  ExpectConsistent(f, sizeof(float), /*sorted=*/true);
}

void AsWorker(const ps::Message& msg) {
  ps::Status answer = ps::Status::FromWire(msg.meta.status_code, msg.meta.status_message);
  FUZZ_EXPECT(answer.ok() == (msg.meta.status_code == 0));
  ps::KVFrames f;
  if (ps::ParseKVFrames(msg, false, ps::DataType::kFloat, sizeof(float), &f).ok()) {
    ExpectConsistent(f, sizeof(float), /*sorted=*/false);
  }
  if (msg.meta.data_type.size() >= 2) {
    ps::DataType type = msg.meta.data_type[1];
    size_t width = ps::DataTypeSize(type);
    if (ps::ParseKVFrames(msg, false, type, width, &f).ok()) {
      ExpectConsistent(f, width, /*sorted=*/false);
    }
  }
}

void Bodies(const ps::Meta& meta) {
  const std::string& body = meta.body;
  int64_t clock = 0;
  if (ps::ParseClockText(body, &clock)) FUZZ_EXPECT(clock >= 0);
  ps::OrderBegin begin;
  if (ps::DecodeOrderBegin(body, &begin).ok()) FUZZ_EXPECT(ps::EncodeOrderBegin(begin) == body);
  ps::OrderNext next;
  if (ps::DecodeOrderNext(body, &next).ok()) {
    FUZZ_EXPECT(ps::EncodeOrderNext(next.epoch, next.order) == body);
  }
  for (int dim : {1, 3, 8}) {
    ps::OrderPairs pairs;
    if (!ps::DecodeOrderPairs(body, dim, &pairs).ok()) continue;
    FUZZ_EXPECT(pairs.diffs.size() == static_cast<size_t>(pairs.count) * dim);
    FUZZ_EXPECT(ps::EncodeOrderPairs(pairs.epoch, pairs.first_pair, pairs.count, pairs.diffs.data(),
                                     pairs.diffs.size()) == body);
  }
}

void Settings(const ps::Control& control) {
  ps::ConsistencyModel model;
  if (!ps::ConsistencyModel::FromWire(control.consistency, control.staleness, &model).ok()) {
    return;
  }
  // Its text form (logs, PS_CONSISTENCY) names a model that behaves the same.
  ps::ConsistencyModel parsed;
  FUZZ_EXPECT(ps::ConsistencyModel::Parse(model.ToString(), &parsed).ok());
  FUZZ_EXPECT(parsed.waits() == model.waits() && parsed.bound() == model.bound());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ps::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ps::fuzz::InputReader in(data, size);
  std::vector<std::string> frames;
  while (!in.empty() && frames.size() < kMaxDataFrames + 3) frames.push_back(in.TakeChunk());
  if (frames.size() < 2 || frames.size() - 2 > kMaxDataFrames) return 0;

  std::vector<size_t> sizes;
  for (size_t i = 2; i < frames.size(); ++i) sizes.push_back(frames[i].size());
  ps::SArray<char> meta_frame = ps::fuzz::FrameOf(frames[1]);
  ps::Message msg;
  if (!ps::DecodeMeta(meta_frame.data(), meta_frame.size(), sizes, &msg.meta).ok()) return 0;
  msg.peer_identity = frames[0];
  for (size_t i = 2; i < frames.size(); ++i) msg.data.push_back(ps::fuzz::FrameOf(frames[i]));

  if (!msg.meta.control.empty()) {
    Settings(msg.meta.control);
    return 0;
  }
  // Whether it claims to be a request or an answer, both readers must cope with it.
  Bodies(msg.meta);
  AsServer(msg);
  AsWorker(msg);
  return 0;
}
