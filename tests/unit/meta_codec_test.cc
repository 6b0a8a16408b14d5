// EncodeMeta / DecodeMeta (van/meta_codec.h): message headers to wire bytes and back,
// and the validation that keeps a malformed header from reaching the runtime.
#include "meta_codec.h"

#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "meta.pb.h"

namespace ps {
namespace {

Node MakeNode(int id, Node::Role role, int port) {
  Node n;
  n.id = id;
  n.role = role;
  n.host = "10.0.0." + std::to_string(id);
  n.port = port;
  n.endpoint = "tcp://" + n.host + ":" + std::to_string(port);
  n.control_endpoint = "tcp://" + n.host + ":" + std::to_string(port + 1);
  n.rank_hint = id - 8;
  n.rank = id / 2;
  n.identity = "hps-" + std::to_string(id);
  n.state = Node::kLive;
  return n;
}

// A message that sets every Meta field to something other than its default.
Message FullMessage() {
  Message msg;
  Meta& m = msg.meta;
  m.head = 7;
  m.app_id = 1;
  m.customer_id = 2;
  m.timestamp = 3;
  m.sender = 9;
  m.recipient = 8;
  m.request = true;
  m.push = true;
  m.pull = true;
  m.simple_app = true;
  m.body = std::string("bo\0dy", 5);
  m.control.cmd = Control::kAddNode;
  m.control.nodes = {MakeNode(8, Node::kServerRole, 9100), MakeNode(9, Node::kWorkerRole, 9200)};
  m.control.barrier_group = 6;
  m.control.msg_sig = 0xdeadbeefcafef00dULL;
  m.control.consistency = 1;
  m.control.staleness = 4;
  m.control.token = "job-token";
  m.control.membership_version = 12;
  m.status_code = 3;
  m.status_message = "peer gone";
  m.priority = -2;
  m.clock = 42;
  m.compression = 1;
  m.sequence = uint64_t{1} << 40;
  m.request_id = (uint64_t{1} << 33) + 5;
  m.incarnation = 0x1234567890abcdefULL;
  m.sender_incarnation = 0xfedcba0987654321ULL;
  m.chunk_query = true;
  m.takes_chunks = true;
  m.keys_encoded = true;
  m.key_list = (uint64_t{1} << 50) + 1;
  m.key_list_ref = (uint64_t{1} << 51) + 3;
  m.key_list_unknown = true;
  msg.AddData(SArray<uint64_t>{1, 2, 3});
  msg.AddData(SArray<float>{1.f, 2.f});
  msg.AddData(SArray<int>{4});
  msg.AddData(SArray<char>(5));
  msg.AddData(SArray<double>());
  return msg;
}

std::vector<size_t> FrameSizes(const Message& msg) {
  std::vector<size_t> sizes;
  for (const auto& d : msg.data) sizes.push_back(d.size());
  return sizes;
}

std::string Encode(const Message& msg) {
  std::string out;
  Status s = EncodeMeta(msg, &out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

Status Decode(const std::string& bytes, const std::vector<size_t>& sizes, Meta* meta) {
  return DecodeMeta(bytes.data(), bytes.size(), sizes, meta);
}

Status DecodeWire(const herdps::wire::Meta& p, const std::vector<size_t>& sizes) {
  Meta meta;
  return Decode(p.SerializeAsString(), sizes, &meta);
}

bool Contains(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

// A valid, frame-consistent result: one type per frame, each a whole number of elements.
void ExpectConsistent(const Meta& meta, const std::vector<size_t>& sizes) {
  ASSERT_EQ(meta.data_type.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_LE(static_cast<int>(meta.data_type[i]), static_cast<int>(DataType::kOther));
    EXPECT_EQ(sizes[i] % DataTypeSize(meta.data_type[i]), 0u);
  }
}

TEST(MetaCodec, EveryFieldSurvivesTheRoundTrip) {
  Message msg = FullMessage();
  Meta out;
  out.data_type = {DataType::kOther};  // stale state must be replaced
  out.control.nodes.resize(5);
  Status s = Decode(Encode(msg), FrameSizes(msg), &out);
  ASSERT_TRUE(s.ok()) << s;
  const Meta& in = msg.meta;
  EXPECT_EQ(out.head, in.head);
  EXPECT_EQ(out.app_id, in.app_id);
  EXPECT_EQ(out.customer_id, in.customer_id);
  EXPECT_EQ(out.timestamp, in.timestamp);
  EXPECT_EQ(out.sender, in.sender);
  EXPECT_EQ(out.recipient, in.recipient);
  EXPECT_EQ(out.request, in.request);
  EXPECT_EQ(out.push, in.push);
  EXPECT_EQ(out.pull, in.pull);
  EXPECT_EQ(out.simple_app, in.simple_app);
  EXPECT_EQ(out.body, in.body);
  EXPECT_EQ(out.data_type, in.data_type);
  EXPECT_EQ(out.status_code, in.status_code);
  EXPECT_EQ(out.status_message, in.status_message);
  EXPECT_EQ(out.priority, in.priority);
  EXPECT_EQ(out.clock, in.clock);
  EXPECT_EQ(out.compression, in.compression);
  EXPECT_EQ(out.sequence, in.sequence);
  EXPECT_EQ(out.request_id, in.request_id);
  EXPECT_EQ(out.incarnation, in.incarnation);
  EXPECT_EQ(out.sender_incarnation, in.sender_incarnation);
  EXPECT_EQ(out.chunk_query, in.chunk_query);
  EXPECT_EQ(out.takes_chunks, in.takes_chunks);
  EXPECT_EQ(out.keys_encoded, in.keys_encoded);
  EXPECT_EQ(out.key_list, in.key_list);
  EXPECT_EQ(out.key_list_ref, in.key_list_ref);
  EXPECT_EQ(out.key_list_unknown, in.key_list_unknown);
  EXPECT_EQ(out.control.cmd, in.control.cmd);
  EXPECT_EQ(out.control.barrier_group, in.control.barrier_group);
  EXPECT_EQ(out.control.msg_sig, in.control.msg_sig);
  EXPECT_EQ(out.control.consistency, in.control.consistency);
  EXPECT_EQ(out.control.staleness, in.control.staleness);
  EXPECT_EQ(out.control.token, in.control.token);
  EXPECT_EQ(out.control.membership_version, in.control.membership_version);
  ASSERT_EQ(out.control.nodes.size(), in.control.nodes.size());
  for (size_t i = 0; i < in.control.nodes.size(); ++i) {
    auto fields = [](const Node& n) {
      return std::tie(n.id, n.role, n.host, n.port, n.endpoint, n.control_endpoint, n.rank_hint,
                      n.rank, n.identity, n.state);
    };
    EXPECT_TRUE(fields(out.control.nodes[i]) == fields(in.control.nodes[i]))
        << out.control.nodes[i].DebugString() << " vs " << in.control.nodes[i].DebugString();
  }
}

TEST(MetaCodec, EveryControlCommandRoundTrips) {
  for (auto cmd : {Control::kAddNode, Control::kBarrier, Control::kHeartbeat, Control::kAck,
                   Control::kTerminate, Control::kMembership, Control::kLeave,
                   Control::kCaughtUp, Control::kWithdraw, Control::kSkip}) {
    Message msg;
    msg.meta.control.cmd = cmd;
    msg.meta.control.barrier_group = 7;
    Meta out;
    Status s = Decode(Encode(msg), {}, &out);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(out.control.cmd, cmd);
    EXPECT_EQ(out.control.barrier_group, 7);
  }
}

TEST(MetaCodec, DataMessageDecodesWithNoControlAndDefaultsKept) {
  Message msg;
  msg.AddData(SArray<uint64_t>{5});
  Meta out;
  out.control.cmd = Control::kTerminate;  // stale state must be cleared
  Status s = Decode(Encode(msg), {8}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(out.control.empty());
  EXPECT_TRUE(out.control.nodes.empty());
  EXPECT_EQ(out.app_id, kEmpty);
  EXPECT_EQ(out.timestamp, kEmpty);
  EXPECT_EQ(out.clock, -1);
  EXPECT_EQ(out.data_type, (std::vector<DataType>{DataType::kUInt64}));
}

TEST(MetaCodec, TheProcessIncarnationTravelsOnlyWhereAReceiverReadsIt) {
  // Read by the resend de-dup (messages with a sequence): 10 bytes fewer elsewhere.
  Message data;
  data.meta.sender_incarnation = 0xfedcba0987654321ULL;
  data.meta.incarnation = 0x1234567890abcdefULL;
  data.AddData(SArray<uint64_t>{5});
  const std::string without = Encode(data);
  Meta out;
  ASSERT_TRUE(Decode(without, {8}, &out).ok());  // no sequence, no incarnation
  EXPECT_EQ(out.sender_incarnation, 0u);
  EXPECT_EQ(out.incarnation, data.meta.incarnation);
  data.meta.sequence = 1;
  const std::string with = Encode(data);
  ASSERT_TRUE(Decode(with, {8}, &out).ok());
  EXPECT_EQ(out.sender_incarnation, data.meta.sender_incarnation);
  EXPECT_EQ(with.size(), without.size() + 3 + 10);  // tag 2 + 1, tag 2 + fixed 8
}

TEST(MetaCodec, EncodeRefusesDataTypesThatDoNotMatchTheFrames) {
  Message msg = FullMessage();
  msg.meta.data_type.pop_back();
  std::string out = "untouched";
  Status s = EncodeMeta(msg, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, "5 data frames but 4 data types")) << s;
  EXPECT_EQ(out, "untouched");
}

TEST(MetaCodec, DecodeRejectsAFrameCountOtherThanDeclared) {
  Message msg = FullMessage();
  std::vector<size_t> sizes = FrameSizes(msg);
  sizes.pop_back();
  Meta out;
  Status s = Decode(Encode(msg), sizes, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "declares 5 data frames but 4 arrived")) << s;
}

TEST(MetaCodec, DecodeRejectsAFrameSizeOtherThanDeclared) {
  Message msg = FullMessage();
  std::vector<size_t> sizes = FrameSizes(msg);
  sizes[1] = 16;  // declared 8 bytes of float
  Meta out;
  Status s = Decode(Encode(msg), sizes, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "data frame 1 declares 8 bytes but carries 16")) << s;
}

TEST(MetaCodec, DecodeRejectsAFrameThatIsNotWholeElements) {
  Message msg;
  msg.AddData(SArray<char>(6));
  msg.meta.data_type[0] = DataType::kFloat;  // 6 bytes of float
  Meta out;
  Status s = Decode(Encode(msg), {6}, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "6 bytes, not a whole number of float")) << s;
}

TEST(MetaCodec, DecodeRejectsAnUnknownDataType) {
  for (int type : {12, 42, -1}) {
    herdps::wire::Meta p;
    p.add_data_size(8);
    p.mutable_data_type()->Add(type);
    Status s = DecodeWire(p, {8});
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << type;
    EXPECT_TRUE(Contains(s, "unknown type " + std::to_string(type))) << s;
  }
}

TEST(MetaCodec, DecodeRejectsAnUnknownControlCommand) {
  herdps::wire::Meta p;
  p.mutable_control()->set_cmd(static_cast<herdps::wire::Command>(99));
  Status s = DecodeWire(p, {});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "unknown control command 99")) << s;
}

TEST(MetaCodec, DecodeRejectsANodeWithAnUnknownRole) {
  herdps::wire::Meta p;
  auto* c = p.mutable_control();
  c->set_cmd(herdps::wire::ADD_NODE);
  c->add_node()->set_role(herdps::wire::ROLE_UNSPECIFIED);
  Status s = DecodeWire(p, {});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "unknown role 0")) << s;
}

TEST(MetaCodec, DecodeRejectsMoreFrameSizesThanFrameTypes) {
  herdps::wire::Meta p;
  p.add_data_size(8);
  p.add_data_size(4);
  p.add_data_type(herdps::wire::UINT64);
  Status s = DecodeWire(p, {8, 4});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "2 frame sizes but 1 frame types")) << s;
}

TEST(MetaCodec, DecodeRejectsBytesThatAreNotAMeta) {
  const std::string junk = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff";
  Meta out;
  Status s = Decode(junk, {}, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "does not parse")) << s;
}

TEST(MetaCodec, RandomBytesAreRejectedOrDecodedConsistentlyNeverCrash) {
  google::protobuf::LogSilencer quiet;  // invalid UTF-8 in strings is logged per parse
  std::mt19937 rng(20240601);
  const std::vector<std::vector<size_t>> frame_sets = {{}, {8}, {8, 4}, {3}};
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes(rng() % 64, '\0');
    for (char& b : bytes) b = static_cast<char>(rng());
    const auto& sizes = frame_sets[rng() % frame_sets.size()];
    Meta out;
    Status s = Decode(bytes, sizes, &out);
    if (s.ok()) {
      ++accepted;
      ExpectConsistent(out, sizes);
    } else {
      EXPECT_FALSE(s.message().empty());
    }
  }
  std::printf("[ meta ] %d of 20000 random buffers decoded\n", accepted);
}

TEST(MetaCodec, CorruptedEncodingsAreRejectedOrDecodedConsistentlyNeverCrash) {
  google::protobuf::LogSilencer quiet;  // invalid UTF-8 in strings is logged per parse
  Message msg = FullMessage();
  const std::string good = Encode(msg);
  const std::vector<size_t> sizes = FrameSizes(msg);
  std::mt19937 rng(7);
  int rejected = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = good;
    for (int flips = 1 + rng() % 3; flips > 0; --flips) {
      bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
    }
    Meta out;
    Status s = Decode(bytes, sizes, &out);
    if (s.ok()) {
      ExpectConsistent(out, sizes);
    } else {
      ++rejected;
      EXPECT_FALSE(s.message().empty());
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST(MetaCodec, EveryTruncationIsRejectedOrDecodedConsistently) {
  Message msg = FullMessage();
  const std::string good = Encode(msg);
  const std::vector<size_t> sizes = FrameSizes(msg);
  for (size_t n = 0; n <= good.size(); ++n) {
    Meta out;
    Status s = DecodeMeta(good.data(), n, sizes, &out);
    if (s.ok()) {
      ExpectConsistent(out, sizes);
    } else {
      EXPECT_FALSE(s.message().empty()) << n;
    }
    if (n == 0) {
      EXPECT_FALSE(s.ok()) << "an empty meta declares no frames, yet 5 arrived";
    }
    if (n == good.size()) {
      EXPECT_TRUE(s.ok()) << s;
    }
  }
}

// The control plane's fields: request identity, liveness and membership, the join token.

// A membership update listing a node in every state, with every new field set to a value
// that needs all its bits.
Message ControlPlaneMessage() {
  Message msg;
  Meta& m = msg.meta;
  m.request_id = 0xfedcba9876543210ULL;
  m.incarnation = 0x8000000000000001ULL;
  m.sender_incarnation = ~uint64_t{0};
  m.control.cmd = Control::kMembership;
  m.control.membership_version = (uint64_t{1} << 40) + 3;
  m.control.leave_version = (uint64_t{1} << 40) + 1;
  m.control.retiring = 12;
  m.control.consistency = 2;
  m.control.staleness = 3;
  m.control.token = std::string("tok\0en\xff", 7);
  const Node::State states[] = {Node::kJoining, Node::kLive, Node::kDead, Node::kLeft,
                                Node::kEntering, Node::kLeaving};
  for (int i = 0; i < 6; ++i) {
    Node n = MakeNode(8 + i, i % 2 ? Node::kWorkerRole : Node::kServerRole, 9100 + i);
    n.identity = "hps-" + std::to_string(i) + std::string("\0\x80", 2);
    n.state = states[i];
    m.control.nodes.push_back(n);
  }
  return msg;
}

// A header with one node entry, for crafting malformed ones on the wire.
herdps::wire::Meta OneNodeWire(herdps::wire::Node** node) {
  herdps::wire::Meta p;
  auto* c = p.mutable_control();
  c->set_cmd(herdps::wire::MEMBERSHIP);
  *node = c->add_node();
  (*node)->set_id(8);
  (*node)->set_role(herdps::wire::SERVER);
  return p;
}

// Round copies (PS_REPLICATE_ROUNDS): an answer's copied-below clock, from 0 to the last
// (every clock ended), a worker's word that it sent its kept pushes again, and the job's
// setting in the node table.
TEST(MetaCodec, RoundCopyFieldsSurviveTheRoundTrip) {
  for (int64_t below : {int64_t{-1}, int64_t{0}, int64_t{12345},
                        std::numeric_limits<int64_t>::max()}) {
    Message msg;
    msg.meta.rounds_copied_below = below;
    msg.meta.rounds_resent = below == 0;
    msg.meta.first_server = 2;
    msg.meta.control.cmd = Control::kAddNode;
    msg.meta.control.replication = 2;
    msg.meta.control.replicate_rounds = below > 0;
    Meta out;
    Status s = Decode(Encode(msg), {}, &out);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(out.rounds_copied_below, below);
    EXPECT_EQ(out.rounds_resent, below == 0);
    EXPECT_EQ(out.first_server, 2);
    EXPECT_EQ(out.control.replicate_rounds, below > 0);
  }
}

TEST(MetaCodec, ControlPlaneFieldsSurviveTheRoundTrip) {
  Message msg = ControlPlaneMessage();
  Meta out;
  Status s = Decode(Encode(msg), {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  const Meta& in = msg.meta;
  EXPECT_EQ(out.request_id, in.request_id);
  EXPECT_EQ(out.incarnation, in.incarnation);
  EXPECT_EQ(out.sender_incarnation, in.sender_incarnation);
  EXPECT_EQ(out.control.cmd, Control::kMembership);
  EXPECT_EQ(out.control.membership_version, in.control.membership_version);
  EXPECT_EQ(out.control.leave_version, in.control.leave_version);
  EXPECT_EQ(out.control.retiring, in.control.retiring);
  EXPECT_EQ(out.control.consistency, in.control.consistency);
  EXPECT_EQ(out.control.staleness, in.control.staleness);
  EXPECT_EQ(out.control.token, in.control.token);
  EXPECT_FALSE(out.control.replaces_dead_node);
  ASSERT_EQ(out.control.nodes.size(), in.control.nodes.size());
  for (size_t i = 0; i < in.control.nodes.size(); ++i) {
    EXPECT_EQ(out.control.nodes[i].id, in.control.nodes[i].id);
    EXPECT_EQ(out.control.nodes[i].identity, in.control.nodes[i].identity);
    EXPECT_EQ(out.control.nodes[i].state, in.control.nodes[i].state);
  }
}

TEST(MetaCodec, AJoinAnswerSaysWhetherTheNodeReplacesADeadOne) {
  Message msg = ControlPlaneMessage();
  msg.meta.control.cmd = Control::kAddNode;
  msg.meta.control.replaces_dead_node = true;
  Meta out;
  Status s = Decode(Encode(msg), {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(out.control.replaces_dead_node);
}

TEST(MetaCodec, ALeaveCarriesItsSenderAndNoNodes) {
  Message msg;
  msg.meta.sender = 9;
  msg.meta.control.cmd = Control::kLeave;
  Meta out;
  Status s = Decode(Encode(msg), {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out.control.cmd, Control::kLeave);
  EXPECT_EQ(out.sender, 9);
  EXPECT_TRUE(out.control.nodes.empty());
  EXPECT_EQ(out.control.token, "");
}

TEST(MetaCodec, AnIdentityOfUpTo255BytesAndATokenOfUpTo1024AreAccepted) {
  Message msg = ControlPlaneMessage();
  msg.meta.control.nodes[0].identity = std::string(255, 'i');
  msg.meta.control.token = std::string(1024, 't');
  Meta out;
  Status s = Decode(Encode(msg), {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out.control.nodes[0].identity.size(), 255u);
  EXPECT_EQ(out.control.token.size(), 1024u);
}

TEST(MetaCodec, DecodeRejectsANodeWithAnUnknownState) {
  for (int state : {6, 99, -1}) {
    herdps::wire::Node* node = nullptr;
    herdps::wire::Meta p = OneNodeWire(&node);
    node->set_state(static_cast<herdps::wire::NodeState>(state));
    Status s = DecodeWire(p, {});
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << state;
    EXPECT_TRUE(Contains(s, "unknown state " + std::to_string(state))) << s;
  }
}

TEST(MetaCodec, DecodeRejectsAnIdentityOver255Bytes) {
  herdps::wire::Node* node = nullptr;
  herdps::wire::Meta p = OneNodeWire(&node);
  node->set_identity(std::string(256, 'i'));
  Status s = DecodeWire(p, {});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "identity of 256 bytes")) << s;
}

TEST(MetaCodec, DecodeRejectsATokenOver1024Bytes) {
  herdps::wire::Meta p;
  p.mutable_control()->set_cmd(herdps::wire::ADD_NODE);
  p.mutable_control()->set_token(std::string(1025, 't'));
  Status s = DecodeWire(p, {});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "join token of 1025 bytes is over the limit")) << s;
}

TEST(MetaCodec, DecodeRejectsTheFirstCommandPastSkip) {
  herdps::wire::Meta p;
  p.mutable_control()->set_cmd(static_cast<herdps::wire::Command>(Control::kSkip + 1));
  Status s = DecodeWire(p, {});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "unknown control command 11")) << s;
}

}  // namespace
}  // namespace ps
