// Seeds of the message targets (meta_codec, received_message, send_batch, kv_frames,
// round_copy):
// real messages of every kind, encoded by EncodeMeta, with their data frames, and round
// copies encoded by EncodeRoundCopies. See make_corpus.cc.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "corpus.h"
#include "fuzz_input.h"
#include "meta_codec.h"
#include "ps/base.h"
#include "ps/consistency.h"
#include "ps/internal/clock_client.h"
#include "ps/internal/codec_frame.h"
#include "ps/internal/key_frame.h"
#include "ps/internal/message.h"
#include "ps/internal/order_protocol.h"
#include "ps/status.h"
#include "send_batch.h"
#include "round_copies.h"

namespace {

using ps::fuzz::Bytes;
using ps::fuzz::Encode;
using ps::fuzz::Frame;
using ps::fuzz::Gradient;
using ps::fuzz::InputWriter;
using ps::fuzz::kCodecNames;
using ps::fuzz::kCodecSpecs;
using ps::fuzz::WriteSeed;

// ---- messages: meta_codec, received_message -----------------------------------------

ps::Node MakeNode(int id, ps::Node::Role role, ps::Node::State state) {
  ps::Node n;
  n.id = id;
  n.role = role;
  n.host = "10.0.0." + std::to_string(id);
  n.port = 9000 + id % 1000;  // id may be kEmpty (a joining node)
  n.endpoint = "tcp://" + n.host + ":" + std::to_string(n.port);
  n.control_endpoint = "tcp://" + n.host + ":" + std::to_string(n.port + 1);
  n.rank_hint = id > 8 ? (id - 9) / 2 : -1;
  n.rank = id >= 8 ? (id - 8) / 2 : 0;
  n.identity = "hps-" + std::to_string(id);
  n.state = state;
  return n;
}

ps::Message DataMessage(bool request, bool push, bool pull) {
  ps::Message msg;
  ps::Meta& m = msg.meta;
  m.app_id = 0;
  m.customer_id = 0;
  m.timestamp = 17;
  m.sender = request ? 9 : 8;
  m.recipient = request ? 8 : 9;
  m.request = request;
  m.push = push;
  m.pull = pull;
  m.clock = 3;
  m.part = 1;
  m.sequence = 5;
  m.request_id = 0x1234567890abcdefULL;
  m.incarnation = 0x0fedcba987654321ULL;
  m.sender_incarnation = 77;
  return msg;
}

struct NamedMessage {
  std::string name;
  ps::Message msg;
};

std::vector<NamedMessage> Messages() {
  std::vector<NamedMessage> out;
  const std::vector<ps::Key> keys = {3, 8, 1000000007ULL};
  const std::vector<float> vals = {0.5f, -1.25f, 2.f, 3.5f, -0.f, 1e-3f};
  const std::vector<int> lens = {1, 2, 3};

  ps::Message push = DataMessage(true, true, false);
  push.AddData(ps::SArray<ps::Key>(keys));
  push.AddData(ps::SArray<float>(vals));
  out.push_back({"push-even", push});

  ps::Message push_lens = push;
  push_lens.AddData(ps::SArray<int>(lens));
  out.push_back({"push-lens", push_lens});

  ps::Message pull = DataMessage(true, false, true);
  pull.meta.pull_compression = static_cast<int>(ps::Codec::kFp16);
  pull.AddData(ps::SArray<ps::Key>(keys));
  out.push_back({"pull-request", pull});

  ps::Message answer = DataMessage(false, false, true);
  answer.AddData(ps::SArray<ps::Key>(keys));
  answer.AddData(ps::SArray<double>(std::vector<double>{1, 2, 3, 4, 5, 6}));
  out.push_back({"pull-answer-double", answer});

  ps::Message fp16 = DataMessage(false, false, true);
  fp16.AddData(ps::SArray<ps::Key>(keys));
  fp16.meta.data_type.push_back(ps::DataType::kChar);
  fp16.data.push_back(Encode("fp16", vals));
  fp16.meta.compression = static_cast<int>(ps::Codec::kFp16);
  out.push_back({"pull-answer-fp16", fp16});

  for (int c = 0; c < 6; ++c) {
    ps::Message m = DataMessage(true, true, false);
    m.AddData(ps::SArray<ps::Key>(keys));
    m.meta.data_type.push_back(ps::DataType::kChar);
    m.data.push_back(Encode(kCodecSpecs[c], Gradient(12, c)));
    m.meta.compression = c;
    if (c % 2) m.AddData(ps::SArray<int>(std::vector<int>{2, 4, 6}));
    out.push_back({std::string("push-") + kCodecNames[c], m});
  }

  ps::Message chunk = DataMessage(true, true, false);
  chunk.meta.chunk = 2;
  chunk.meta.chunk_offset = 8;
  chunk.meta.value_len = 20;
  chunk.AddData(ps::SArray<ps::Key>(std::vector<ps::Key>{42}));
  chunk.AddData(ps::SArray<float>(std::vector<float>(4, 1.f)));
  out.push_back({"push-chunk", chunk});

  ps::Message error = DataMessage(false, true, false);
  error.meta.status_code = static_cast<int>(ps::Status::Code::kInvalidArgument);
  error.meta.status_message = "rejected by server: keys are not sorted";
  out.push_back({"error-answer", error});

  ps::Message clock;
  clock.meta.app_id = ps::kClockAppId;
  clock.meta.customer_id = ps::kClockAppId;
  clock.meta.simple_app = true;
  clock.meta.request = true;
  clock.meta.head = ps::kClockEnded;
  clock.meta.body = "41";
  clock.meta.sender = 9;
  clock.meta.recipient = ps::kScheduler;
  out.push_back({"clock-ended", clock});

  ps::Message order = clock;
  order.meta.app_id = ps::kOrderAppId;
  order.meta.customer_id = ps::kOrderAppId;
  order.meta.head = ps::kOrderBegin;
  order.meta.body = ps::EncodeOrderBegin({0, 4, 2, 9, {2, 0, 3, 1}});
  out.push_back({"order-begin", order});
  order.meta.head = ps::kOrderPairs;
  const std::vector<float> diffs = {0.5f, -0.5f, 1.f, 2.f};
  order.meta.body = ps::EncodeOrderPairs(0, 0, 2, diffs.data(), diffs.size());
  out.push_back({"order-pairs", order});
  order.meta.head = ps::kOrderNext;
  order.meta.body = ps::EncodeOrderNext(1, {3, 1, 0, 2});
  out.push_back({"order-next", order});
  // Found by the fuzzer (see order_plugin's seed of the same name).
  order.meta.body = ps::EncodeOrderNext(1, {});
  out.push_back({"regress-order-next-no-examples", order});

  ps::Message join;
  join.meta.request = true;
  join.meta.control.cmd = ps::Control::kAddNode;
  join.meta.control.token = "job-token";
  join.meta.control.nodes = {MakeNode(ps::kEmpty, ps::Node::kWorkerRole, ps::Node::kJoining)};
  out.push_back({"control-add-node", join});

  ps::Message table;
  table.meta.control.cmd = ps::Control::kMembership;
  table.meta.control.membership_version = 9;
  table.meta.control.consistency = ps::ConsistencyModel::kSsp;
  table.meta.control.staleness = 2;
  table.meta.control.key_placement = 1;
  table.meta.control.chunk_bytes = 4 << 20;
  table.meta.control.nodes = {MakeNode(1, ps::Node::kSchedulerRole, ps::Node::kLive),
                              MakeNode(8, ps::Node::kServerRole, ps::Node::kLive),
                              MakeNode(9, ps::Node::kWorkerRole, ps::Node::kDead),
                              MakeNode(11, ps::Node::kWorkerRole, ps::Node::kLeft)};
  table.meta.control.nodes[3].instance = 2;
  out.push_back({"control-membership", table});

  for (auto cmd : {ps::Control::kBarrier, ps::Control::kHeartbeat, ps::Control::kAck,
                   ps::Control::kTerminate, ps::Control::kLeave, ps::Control::kCaughtUp,
                   ps::Control::kWithdraw, ps::Control::kSkip}) {
    ps::Message c;
    c.meta.control.cmd = cmd;
    c.meta.control.barrier_group = ps::kWorkerGroup + ps::kServerGroup;
    c.meta.control.msg_sig = 12;
    c.meta.sender = 9;
    c.meta.recipient = 1;
    out.push_back({"control-" + std::to_string(static_cast<int>(cmd)), c});
  }
  return out;
}

std::string EncodedMeta(const ps::Message& msg) {
  std::string meta;
  ps::Status s = ps::EncodeMeta(msg, &meta);
  if (!s.ok()) {
    std::fprintf(stderr, "fuzz_make_corpus: EncodeMeta: %s\n", s.ToString().c_str());
    std::exit(1);
  }
  return meta;
}

void MetaCodecSeeds(const std::vector<NamedMessage>& messages) {
  for (const NamedMessage& m : messages) {
    InputWriter w;
    w.Put(static_cast<uint8_t>(m.msg.data.size()));
    for (const auto& f : m.msg.data) w.Put(static_cast<uint32_t>(f.size()));
    w.PutBytes(EncodedMeta(m.msg));
    WriteSeed("meta_codec", m.name, w.bytes());
  }
  // Edge cases: an empty meta; sizes that disagree with the meta; an unknown data type
  // (field 13 = 12); a control message with an unknown command (field 14 { 1: 99 }).
  WriteSeed("meta_codec", "edge-empty", std::string(1, '\0'));
  InputWriter wrong;
  wrong.Put(uint8_t{2}).Put(uint32_t{24}).Put(uint32_t{13});
  wrong.PutBytes(EncodedMeta(messages[0].msg));
  WriteSeed("meta_codec", "edge-wrong-sizes", wrong.bytes());
  WriteSeed("meta_codec", "edge-unknown-type",
            std::string("\x01\x04\x00\x00\x00\x60\x04\x68\x0c", 9));
  WriteSeed("meta_codec", "edge-unknown-command", std::string("\x00\x72\x02\x08\x63", 5));
}

void ReceivedMessageSeeds(const std::vector<NamedMessage>& messages) {
  for (const NamedMessage& m : messages) {
    InputWriter w;
    w.PutChunk(std::string("\0hps-9", 6));
    w.PutChunk(EncodedMeta(m.msg));
    for (const auto& f : m.msg.data) w.PutChunk(Bytes(f));
    WriteSeed("received_message", m.name, w.bytes());
  }
  InputWriter no_meta;
  no_meta.PutChunk("identity-only");
  WriteSeed("received_message", "edge-no-meta", no_meta.bytes());
}

// ---- kv_frames ------------------------------------------------------------------------

void KVFramesSeeds() {
  struct Seed {
    std::string name;
    uint8_t options;
    std::vector<ps::DataType> types;
    std::vector<std::string> frames;
  };
  auto keys = [](std::vector<ps::Key> k) { return Bytes(Frame(k)); };
  auto floats = [](std::vector<float> v) { return Bytes(Frame(v)); };
  auto ints = [](std::vector<int> v) { return Bytes(Frame(v)); };
  using DT = ps::DataType;
  std::vector<Seed> seeds = {
      {"float-sorted", 1, {DT::kUInt64, DT::kFloat}, {keys({1, 2, 5}), floats({1, 2, 3, 4, 5, 6})}},
      {"float-lens",
       1,
       {DT::kUInt64, DT::kFloat, DT::kInt32},
       {keys({1, 2, 5}), floats({1, 2, 3, 4, 5, 6}), ints({3, 0, 3})}},
      {"float-unsorted", 0, {DT::kUInt64, DT::kFloat}, {keys({9, 2}), floats({1, 2})}},
      {"keys-only", 1, {DT::kUInt64}, {keys({7, 8, 9})}},
      {"double",
       1 | 1 << 1,
       {DT::kUInt64, DT::kDouble},
       {keys({4}), Bytes(Frame(std::vector<double>{1, 2}))}},
      {"int32",
       2 << 1,
       {DT::kUInt64, DT::kInt32, DT::kInt32},
       {keys({4, 6}), ints({1, 2, 3}), ints({1, 2})}},
      {"int64",
       3 << 1,
       {DT::kUInt64, DT::kInt64},
       {keys({1}), Bytes(Frame(std::vector<int64_t>{-1}))}},
      {"uint64", 4 << 1, {DT::kUInt64, DT::kUInt64}, {keys({1}), keys({2})}},
      {"int8", 5 << 1, {DT::kUInt64, DT::kInt8}, {keys({1}), std::string("\x01\x02", 2)}},
      {"char", 7 << 1, {DT::kUInt64, DT::kChar}, {keys({1, 2}), std::string("abcd")}},
      {"edge-negative-len",
       1,
       {DT::kUInt64, DT::kFloat, DT::kInt32},
       {keys({1, 2}), floats({1}), ints({2, -1})}},
      {"edge-types-frames-differ", 1, {DT::kUInt64, DT::kFloat}, {keys({1})}},
  };
  for (int c = 1; c < 6; ++c) {
    const std::vector<float> g = Gradient(10, 10 + c);
    std::string frame = Bytes(Encode(kCodecSpecs[c], g));
    seeds.push_back({std::string("compressed-") + kCodecNames[c],
                     static_cast<uint8_t>(1 | c << 4),
                     {DT::kUInt64, DT::kChar},
                     {keys({1, 3}), frame}});
    seeds.push_back({std::string("compressed-lens-") + kCodecNames[c],
                     static_cast<uint8_t>(1 | c << 4),
                     {DT::kUInt64, DT::kChar, DT::kInt32},
                     {keys({1, 3, 4}), frame, ints({5, 0, 5})}});
  }
  // Key frames (bit 7): a dense run beside values, and steps beside a compressed frame.
  auto key_frame = [](std::vector<ps::Key> k) {
    ps::SArray<char> frame;
    ps::EncodeKeyFrame(k.data(), k.size(), &frame);
    return Bytes(frame);
  };
  seeds.push_back({"keys-encoded-runs", 1 | 0x80, {DT::kChar, DT::kFloat},
                   {key_frame({10, 11, 12, 13, 14, 15}), floats({1, 2, 3, 4, 5, 6})}});
  seeds.push_back({"keys-encoded-steps-compressed", 1 | 0x80 | 2 << 4, {DT::kChar, DT::kChar},
                   {key_frame({3, 9, 40, 41, 77, 100}),
                    Bytes(Encode(kCodecSpecs[2], Gradient(12, 5)))}});
  for (const Seed& s : seeds) {
    InputWriter w;
    w.Put(s.options).Put(static_cast<uint8_t>(s.types.size()));
    w.Put(static_cast<uint8_t>(s.frames.size()));
    for (DT t : s.types) w.Put(static_cast<uint8_t>(t));
    for (const std::string& f : s.frames) w.PutChunk(f);
    WriteSeed("kv_frames", s.name, w.bytes());
  }
}

// ---- round copies: round_copy ------------------------------------------------------

// A round of `len` values of key `key` at `clock` (a chunk at `offset` of a `whole`-value
// key when chunk >= 0).
ps::ClosedRound Round(ps::Key key, int64_t clock, uint32_t count, size_t len,
                      int32_t chunk = -1, uint64_t offset = 0, uint64_t whole = 0) {
  ps::ClosedRound r;
  r.key.key = key;
  r.key.chunk = chunk;
  r.key.chunk_offset = offset;
  r.key.value_len = whole;
  r.clock = clock;
  r.count = count;
  r.sum = Gradient(len, key + static_cast<uint64_t>(clock));
  return r;
}

// Each message EncodeRoundCopies makes of `rounds`, as round_copy_fuzzer.cc reads it.
void WriteRoundCopySeeds(const std::string& name, const ps::RoundCopyHeader& header,
                         const std::vector<ps::ClosedRound>& rounds, size_t max_floats) {
  std::vector<const ps::ClosedRound*> pointers;
  for (const ps::ClosedRound& r : rounds) pointers.push_back(&r);
  std::vector<ps::KVPairs<float>> messages;
  if (!ps::EncodeRoundCopies(header, pointers, max_floats, &messages).ok()) {
    std::fprintf(stderr, "fuzz_make_corpus: round copy seed %s does not encode\n", name.c_str());
    std::exit(1);
  }
  for (size_t m = 0; m < messages.size(); ++m) {
    const ps::KVPairs<float>& kv = messages[m];
    InputWriter w;
    w.Put(static_cast<uint8_t>(kv.keys.size()));
    for (ps::Key k : kv.keys) w.Put(k);
    for (int len : kv.lens) w.Put(static_cast<int32_t>(len));
    for (float v : kv.vals) w.Put(v);
    WriteSeed("round_copy", name + (messages.size() > 1 ? "-" + std::to_string(m) : ""),
              w.bytes());
  }
}

void RoundCopySeeds() {
  ps::RoundCopyHeader header;
  header.shard = 1;
  header.shards = 2;
  header.below = 12;
  WriteRoundCopySeeds("keys", header, {Round(3, 10, 2, 4), Round(9, 10, 2, 1),
                                       Round(40, 11, 1, 3)}, 1 << 16);
  // A key closed in two clocks at once, then two chunks of one key: four messages.
  header.last = false;
  WriteRoundCopySeeds("clocks-and-chunks", header,
                      {Round(5, 7, 3, 2), Round(5, 8, 3, 2), Round(6, 8, 1, 5, 0, 0, 9),
                       Round(6, 8, 1, 4, 1, 5, 9)}, 1 << 16);
  // Small messages: a close split by its size.
  header.last = true;
  header.below = INT64_MAX;
  WriteRoundCopySeeds("split", header, {Round(1, 0, 4, 6), Round(2, 0, 4, 6),
                                        Round(3, 0, 4, 6)}, 16);
}

// Batches of small messages as the van packs them (send_batch): all the messages in
// one batch, each alone, and a batch cut short.
void SendBatchSeeds(const std::vector<NamedMessage>& messages) {
  ps::SendBatch all;
  for (const NamedMessage& m : messages) {
    ps::SendBatch one;
    one.Append(EncodedMeta(m.msg), m.msg.data);
    WriteSeed("send_batch", m.name, one.Take());
    all.Append(EncodedMeta(m.msg), m.msg.data);
  }
  const std::string whole = all.Take();
  WriteSeed("send_batch", "all-messages", whole);
  WriteSeed("send_batch", "edge-cut-short", whole.substr(0, whole.size() / 2));
}

}  // namespace

void ps::fuzz::MessageSeeds() {
  const std::vector<NamedMessage> messages = Messages();
  MetaCodecSeeds(messages);
  ReceivedMessageSeeds(messages);
  SendBatchSeeds(messages);
  KVFramesSeeds();
  RoundCopySeeds();
}
