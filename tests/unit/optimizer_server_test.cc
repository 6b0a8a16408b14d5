// The bounds the OptimizerServer checks before it touches any key
// (server/request_bounds.h): per-key value lengths the store and an answer can hold,
// chunks that fit the job's chunks, and, under synchronous aggregation, clocks the
// consistency model allows. Requests that declare huge lengths are built as views
// (SArray over one float) that claim the size: the checks read sizes, never values.
#include "ps/optimizer_server.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <limits>
#include <string>

#include "checkpoint.h"
#include "ps/internal/clock_client.h"
#include "request_bounds.h"
#include "shard_store.h"

namespace ps {
namespace {

float dummy_value = 0;

// A push of `keys` keys 7, 8, ... whose values frame claims `values` floats.
KVPairs<float> Push(size_t keys, uint64_t values) {
  KVPairs<float> data;
  data.keys.resize(keys);
  for (size_t i = 0; i < keys; ++i) data.keys[i] = 7 + i;
  data.vals = SArray<float>(&dummy_value, static_cast<size_t>(values));
  return data;
}

KVMeta PushMeta(int cmd = 0) {
  KVMeta meta;
  meta.push = true;
  meta.cmd = cmd;
  return meta;
}

bool Says(const Status& s, const std::string& what) {
  return s.message().find(what) != std::string::npos;
}

const std::string kLimit = std::to_string(kMaxValueLength);

TEST(RequestLengths, AKeyOf2To32ValuesIsRefusedNamingTheKeyAndTheLimit) {
  // 2^32 values per key: 0 in 32 bits, which the store read as "any length".
  size_t width = 99;
  Status s = CheckValueLengths(PushMeta(), Push(2, uint64_t{2} << 32), &width);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Says(s, "key 7")) << s.message();
  EXPECT_TRUE(Says(s, kLimit)) << s.message();
  EXPECT_TRUE(Says(s, std::to_string(uint64_t{1} << 32))) << s.message();
  EXPECT_EQ(width, 0u);
}

TEST(RequestLengths, EveryWidthBetweenTheLimitAnd2To32IsRefusedToo) {
  // Widths an answer's int32 lens would turn negative, and one past 2^32.
  for (uint64_t w :
       {uint64_t{kMaxValueLength} + 1, uint64_t{0xffffffff}, (uint64_t{1} << 32) + 1}) {
    size_t width = 0;
    Status s = CheckValueLengths(PushMeta(), Push(1, w), &width);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << w;
    EXPECT_TRUE(Says(s, kLimit)) << s.message();
  }
}

TEST(RequestLengths, AKeyOfExactlyTheLimitIsTaken) {
  size_t width = 0;
  EXPECT_TRUE(CheckValueLengths(PushMeta(), Push(3, uint64_t{3} * kMaxValueLength), &width).ok());
  EXPECT_EQ(width, kMaxValueLength);
}

TEST(RequestLengths, APushWithAKeyOfNoValuesIsRefusedNamingItButAnEraseMayCarryOne) {
  KVPairs<float> data = Push(3, 4);
  data.lens = SArray<int>{2, 0, 2};
  size_t width = 0;
  Status s = CheckValueLengths(PushMeta(), data, &width);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Says(s, "no values (key 8)")) << s.message();
  EXPECT_TRUE(CheckValueLengths(PushMeta(kEraseKeysCmd), data, &width).ok());
  EXPECT_FALSE(CheckValueLengths(PushMeta(), Push(2, 0), &width).ok()) << "no values at all";
}

TEST(RequestLengths, LensAreCheckedKeyByKeyAndAPullCarriesNone) {
  KVPairs<float> data = Push(3, 6);
  data.lens = SArray<int>{1, 2, 3};
  size_t width = 5;
  EXPECT_TRUE(CheckValueLengths(PushMeta(), data, &width).ok());
  EXPECT_EQ(width, 0u) << "per-key lengths come from lens";
  data.lens = SArray<int>{1, -2, 3};
  Status negative = CheckValueLengths(PushMeta(), data, &width);
  EXPECT_TRUE(Says(negative, "key 8")) << negative.message();
  KVMeta pull;
  pull.pull = true;
  EXPECT_TRUE(CheckValueLengths(pull, Push(2, uint64_t{2} << 32), &width).ok());
}

// A chunk request of key 7 with the given layout.
KVMeta ChunkMeta(int32_t chunk, uint64_t offset, uint64_t whole, bool push) {
  KVMeta meta;
  meta.push = push;
  meta.pull = !push;
  meta.chunk = chunk;
  meta.chunk_offset = offset;
  meta.value_len = whole;
  return meta;
}

TEST(RequestChunks, AChunkOverTheLimitIsRefusedEvenAsAPullWithoutValues) {
  // A job whose chunks hold 2^31 values (PS_CHUNK_BYTES = 8 GiB): a pull of chunk 0
  // would create a chunk that no answer can describe.
  const uint64_t chunk_values = uint64_t{1} << 31;
  uint32_t len = 0;
  Status s =
      CheckChunkLayout(ChunkMeta(0, 0, chunk_values * 3, false), Push(1, 0), chunk_values, &len);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Says(s, "chunk 0 of key 7")) << s.message();
  EXPECT_TRUE(Says(s, kLimit)) << s.message();
  // The last chunk of that key is short enough.
  EXPECT_TRUE(CheckChunkLayout(ChunkMeta(2, chunk_values * 2, chunk_values * 2 + 10, false),
                               Push(1, 0), chunk_values, &len)
                  .ok());
  EXPECT_EQ(len, 10u);
}

TEST(RequestChunks, AnOffsetThatOnlyMatchesByOverflowIsRefused) {
  // chunk * chunk_values wraps to 0 in 64 bits: the offset 0 must not pass for chunk 4.
  const uint64_t chunk_values = uint64_t{1} << 62;
  uint32_t len = 0;
  Status s = CheckChunkLayout(ChunkMeta(4, 0, ~uint64_t{0}, false), Push(1, 0), chunk_values, &len);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Says(s, "does not match the job's chunks")) << s.message();
}

TEST(RequestChunks, APushMustCarryExactlyItsChunk) {
  uint32_t len = 0;
  EXPECT_TRUE(CheckChunkLayout(ChunkMeta(1, 256, 600, true), Push(1, 256), 256, &len).ok());
  EXPECT_EQ(len, 256u);
  EXPECT_FALSE(CheckChunkLayout(ChunkMeta(1, 256, 600, true), Push(1, 255), 256, &len).ok());
  EXPECT_FALSE(CheckChunkLayout(ChunkMeta(1, 256, 600, true), Push(2, 512), 256, &len).ok())
      << "one key per chunk request";
}

TEST(OptimizerServer, RefusesADefaultLengthNoAnswerCanDescribe) {
  // A pull's answer gives each key's length as an int32: 2^31 would come back negative.
  OptimizerServerOptions options;
  options.threads = 1;
  options.default_length = uint32_t{1} << 31;
  try {
    OptimizerServer server(0, options);
    ADD_FAILURE() << "a server with default_length 2^31 started";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(kLimit), std::string::npos) << e.what();
  }
}

// An app's update rule: w -= g, with one float of state per value (the step count).
class CountingStep : public Optimizer {
 public:
  CountingStep() : Optimizer(OptimizerOptions()) {}
  size_t StateWidth() const override { return 1; }
  void Update(float* w, float* state, const float* g, size_t n, int64_t step) const override {
    for (size_t i = 0; i < n; ++i) {
      w[i] -= g[i];
      state[i] = static_cast<float>(step);
    }
  }
};

OptimizerServerOptions RuleOptions(const std::string& name) {
  OptimizerServerOptions options;
  options.threads = 1;
  options.rule = std::make_shared<CountingStep>();
  options.rule_name = name;
  return options;
}

TEST(UpdateRule, ARuleNeedsANameWithoutSpaces) {
  for (const std::string name : {"", "two words", "carriage\rreturn"}) {
    try {
      OptimizerServer server(0, RuleOptions(name));
      ADD_FAILURE() << "a rule named '" << name << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rule_name"), std::string::npos) << e.what();
    }
  }
}

TEST(UpdateRule, ANameWithoutARuleIsRefused) {
  OptimizerServerOptions options;
  options.threads = 1;
  options.rule_name = "orphan";
  EXPECT_THROW(OptimizerServer(0, options), Error);
}

TEST(UpdateRule, ACheckpointLoadsOnlyIntoAServerRunningTheSameRule) {
  const std::string path = ::testing::TempDir() + "update_rule_test.ckpt";
  {
    OptimizerServer server(0, RuleOptions("counting_step"));
    ASSERT_TRUE(server.SaveCheckpoint(path).ok());
  }
  {
    OptimizerServer same(0, RuleOptions("counting_step"));
    Status s = same.LoadCheckpoint(path);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  {
    OptimizerServer other(0, RuleOptions("another_step"));
    Status s = other.LoadCheckpoint(path);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("rule counting_step"), std::string::npos) << s.ToString();
  }
  {
    OptimizerServerOptions momentum;
    momentum.threads = 1;
    momentum.optimizer.kind = OptimizerKind::kMomentum;  // also one float of state
    OptimizerServer builtin(0, momentum);
    Status s = builtin.LoadCheckpoint(path);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("this server runs momentum"), std::string::npos) << s.ToString();
  }
  {
    // And the other way: a built-in optimizer's file is not taken by a rule.
    OptimizerServerOptions momentum;
    momentum.threads = 1;
    momentum.optimizer.kind = OptimizerKind::kMomentum;
    {
      OptimizerServer builtin(0, momentum);  // one server of app 0 at a time
      ASSERT_TRUE(builtin.SaveCheckpoint(path).ok());
    }
    OptimizerServer rule(0, RuleOptions("counting_step"));
    Status s = rule.LoadCheckpoint(path);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  }
  std::remove(path.c_str());
}

// A checkpoint of format 3 (chunks striped over the ranks by the HerdPS that wrote it):
// the layout of the current format with the version set back and the checksum redone.
void WriteFormatThree(const std::string& path, const CheckpointData& data) {
  ASSERT_TRUE(WriteCheckpoint(path, data).ok());
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const uint32_t three = 3;
  std::memcpy(&bytes[8], &three, sizeof(three));  // after the 8-byte magic
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over all but the checksum itself
  for (size_t i = 0; i + 8 < bytes.size(); ++i) {
    h ^= static_cast<unsigned char>(bytes[i]);
    h *= 0x100000001b3ULL;
  }
  std::memcpy(&bytes[bytes.size() - 8], &h, sizeof(h));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(OptimizerServerCheckpoint, AnOlderFileWithChunksIsRefusedUnderTheRingPlacement) {
  const std::string path = ::testing::TempDir() + "striped_chunks_test.ckpt";
  OptimizerServerOptions sgd;
  sgd.threads = 1;
  CheckpointData data;
  data.optimizer = sgd.optimizer.ToString();
  CheckpointRecord whole{3, 1, {1.0f}, {}};
  CheckpointRecord chunk{9, 1, {2.0f}, {}, /*chunk=*/1, /*chunk_offset=*/1, /*value_len=*/2};
  data.records = {whole, chunk};
  WriteFormatThree(path, data);
  {
    OptimizerServer server(0, sgd);
    Status s = server.LoadCheckpoint(path);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("chunk"), std::string::npos) << s.ToString();
    EXPECT_EQ(server.NumKeys(), 0u);  // nothing was loaded
  }
  data.records = {whole};  // without chunks the file is placed as before
  WriteFormatThree(path, data);
  {
    OptimizerServer server(0, sgd);
    Status s = server.LoadCheckpoint(path);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(server.NumKeys(), 1u);
  }
  std::remove(path.c_str());
}

KVMeta ClockMeta(bool push, int64_t clock) {
  KVMeta meta;
  meta.push = push;
  meta.pull = !push;
  meta.clock = clock;
  meta.sender = 9;
  return meta;
}

constexpr int64_t kAhead = ShardStore::kMaxClocksAhead;

TEST(RequestClocks, APushNeedsAClockAndAPullHasOneOrNone) {
  Status none = CheckClock(ClockMeta(true, -1), 0, kAhead);
  EXPECT_EQ(none.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Says(none, "push of clock -1 from node 9")) << none.message();
  EXPECT_TRUE(CheckClock(ClockMeta(false, -1), 5, kAhead).ok()) << "a pull that waits for nothing";
  EXPECT_FALSE(CheckClock(ClockMeta(false, -2), 0, kAhead).ok());
  EXPECT_FALSE(CheckClock(ClockMeta(false, std::numeric_limits<int64_t>::min()), 0, kAhead).ok());
}

TEST(RequestClocks, ARequestMayBeAtMostTheBoundAheadOfTheMinimumHeardOf) {
  for (bool push : {true, false}) {
    EXPECT_TRUE(CheckClock(ClockMeta(push, 10), 10, kAhead).ok());
    EXPECT_TRUE(CheckClock(ClockMeta(push, 11), 10, kAhead).ok()) << "BSP: one clock ahead";
    EXPECT_TRUE(CheckClock(ClockMeta(push, 10 + kAhead), 10, kAhead).ok());
    Status far = CheckClock(ClockMeta(push, 11 + kAhead), 10, kAhead);
    EXPECT_EQ(far.code(), Status::Code::kInvalidArgument);
    EXPECT_TRUE(Says(far, "clocks ahead")) << far.message();
    EXPECT_TRUE(Says(far, "ended clock 9")) << far.message();
    EXPECT_FALSE(CheckClock(ClockMeta(push, std::numeric_limits<int64_t>::max()), 0, kAhead).ok());
  }
}

TEST(RequestClocks, APushToAnAppliedClockIsRefusedAndAPullOfOneWaitsForNothing) {
  Status late = CheckClock(ClockMeta(true, 3), 4, kAhead);
  EXPECT_EQ(late.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Says(late, "no longer counts")) << late.message();
  EXPECT_TRUE(CheckClock(ClockMeta(false, 3), 4, kAhead).ok());
  // Once no worker counts, every clock is applied: pushes are late, pulls never wait.
  EXPECT_FALSE(CheckClock(ClockMeta(true, 1000), kAllClocksEnded, kAhead).ok());
  EXPECT_TRUE(CheckClock(ClockMeta(false, 1000), kAllClocksEnded, kAhead).ok());
}

}  // namespace
}  // namespace ps
