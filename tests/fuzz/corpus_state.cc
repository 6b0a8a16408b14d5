// Seeds of the checkpoint target (files written by WriteCheckpoint) and of the protocol
// state machines (order_plugin, clock_coordinator, inbound_sequencer): sessions of
// valid steps, raw bodies and the inputs of the bugs found. See make_corpus.cc.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "corpus.h"
#include "fuzz_input.h"
#include "node_report.pb.h"
#include "ps/base.h"
#include "ps/internal/clock_client.h"
#include "ps/internal/node_activity.h"
#include "ps/internal/order_protocol.h"
#include "ps/optimizer.h"
#include "ps/status.h"

namespace {

using ps::fuzz::Gradient;
using ps::fuzz::InputWriter;
using ps::fuzz::WriteSeed;

// Checkpoint seeds start with the fuzz target's mode byte: 1, the target keeps the
// checksum right; 0, it reads the file as it is.
void WriteCheckpointSeed(const std::string& name, const std::string& file, uint8_t mode = 1) {
  WriteSeed("checkpoint", name, std::string(1, static_cast<char>(mode)) + file);
}

// ---- checkpoints ----------------------------------------------------------------------

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string CheckpointBytes(const ps::CheckpointData& data) {
  char dir[] = "/tmp/herdps-corpus-XXXXXX";
  if (!::mkdtemp(dir)) {
    std::perror("fuzz_make_corpus: mkdtemp");
    std::exit(1);
  }
  const std::string path = std::string(dir) + "/checkpoint";
  ps::Status s = ps::WriteCheckpoint(path, data);
  if (!s.ok()) {
    std::fprintf(stderr, "fuzz_make_corpus: %s\n", s.ToString().c_str());
    std::exit(1);
  }
  std::string bytes = ReadFile(path);
  ::unlink(path.c_str());
  ::rmdir(dir);
  return bytes;
}

ps::CheckpointData Checkpoint(ps::OptimizerKind kind, size_t width, bool chunks) {
  ps::OptimizerOptions options;
  options.kind = kind;
  ps::CheckpointData data;
  data.state_width = static_cast<uint32_t>(width);
  data.pushes_taken = 1234;
  data.optimizer = options.ToString();
  for (ps::Key key : {ps::Key{2}, ps::Key{7}, ps::Key{1} << 40}) {
    ps::CheckpointRecord r;
    r.key = key;
    r.steps = static_cast<int64_t>(key % 5);
    r.values = Gradient(3, key);
    r.state = Gradient(3 * width, key + 1);
    data.records.push_back(r);
  }
  if (chunks) {
    for (int c = 0; c < 2; ++c) {
      ps::CheckpointRecord r;
      r.key = 99;
      r.chunk = c;
      r.chunk_offset = 4 * static_cast<uint64_t>(c);
      r.value_len = 6;
      r.values = Gradient(c == 0 ? 4 : 2, 99 + c);
      r.state = Gradient(r.values.size() * width, 7);
      data.records.push_back(r);
    }
  }
  return data;
}

void CheckpointSeeds() {
  struct Kind {
    const char* name;
    ps::OptimizerKind kind;
    size_t width;
  };
  const Kind kinds[] = {{"sgd", ps::OptimizerKind::kSgd, 0},
                        {"momentum", ps::OptimizerKind::kMomentum, 1},
                        {"adam", ps::OptimizerKind::kAdam, 2},
                        {"amsgrad", ps::OptimizerKind::kAmsgrad, 3},
                        {"ftrl", ps::OptimizerKind::kFtrl, 2}};
  for (const Kind& k : kinds) {
    WriteCheckpointSeed(k.name, CheckpointBytes(Checkpoint(k.kind, k.width, false)));
  }
  WriteCheckpointSeed("adam-chunks",
                      CheckpointBytes(Checkpoint(ps::OptimizerKind::kAdam, 2, true)));
  ps::CheckpointData empty;
  ps::OptimizerOptions sgd;
  empty.optimizer = sgd.ToString();
  WriteCheckpointSeed("empty", CheckpointBytes(empty));

  // Format 1 (no chunk field), which servers still read: written by hand.
  InputWriter v1;
  v1.PutBytes("HERDPSCK").Put(uint32_t{1}).Put(uint32_t{1}).Put(uint64_t{5}).Put(uint64_t{1});
  const std::string momentum = [] {
    ps::OptimizerOptions o;
    o.kind = ps::OptimizerKind::kMomentum;
    return o.ToString();
  }();
  v1.PutChunk(momentum);
  v1.Put(uint64_t{12}).Put(uint32_t{2}).Put(int64_t{3});
  v1.Put(1.f).Put(2.f).Put(0.5f).Put(0.25f);
  std::string bytes = v1.bytes();
  InputWriter sum;
  sum.Put(Fnv1a(bytes));
  WriteCheckpointSeed("format-1", bytes + sum.bytes());
  WriteCheckpointSeed("edge-magic-only", "HERDPSCK");
  // Read as they are: the checksum checks.
  std::string adam = CheckpointBytes(Checkpoint(ps::OptimizerKind::kAdam, 2, false));
  WriteCheckpointSeed("adam-checksum-as-written", adam, 0);
  adam[adam.size() - 1] ^= 1;
  WriteCheckpointSeed("edge-bad-checksum", adam, 0);
  // Found by the fuzzer: restoring a record without state (sgd keeps none) made
  // ShardStore::Restore memcpy from the null data() of an empty vector.
  ps::CheckpointData stateless = Checkpoint(ps::OptimizerKind::kSgd, 0, true);
  WriteCheckpointSeed("regress-sgd-records-without-state", CheckpointBytes(stateless));
  // Found by the fuzzer: an optimizer option without '=' ('lr') made
  // OptimizerOptions::Parse compute c_str() + npos (a pointer overflow, UBSan).
  stateless.optimizer = "sgd lr";
  WriteCheckpointSeed("regress-option-without-value", CheckpointBytes(stateless));
}

// ---- scheduler plugins ------------------------------------------------------------------

void OrderPluginSeeds() {
  // Two workers through two epochs of n = 6, dim 2: begins, all pairs, begins of epoch 1
  // with the orders sent, pairs again.
  InputWriter two;
  two.Put(uint8_t{1});  // 2 workers
  two.Put(uint8_t{1}).Put(uint8_t{0}).Put(uint8_t{5}).Put(uint8_t{1}).Put(uint8_t{0});
  two.Put(uint8_t{1}).Put(uint8_t{1}).Put(uint8_t{2});
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (uint8_t w : {0, 1}) {
      two.Put(uint8_t{2}).Put(w).Put(uint8_t{2});  // all 3 pairs at once
      for (float v : Gradient(6, epoch * 2 + w)) two.Put(v);
    }
    for (uint8_t w : {0, 1}) two.Put(uint8_t{1}).Put(w).Put(uint8_t{0});
  }
  WriteSeed("order_plugin", "two-workers-two-epochs", two.bytes());

  // Three workers, one dies mid-epoch; then requests with raw bodies from the protocol.
  InputWriter three;
  three.Put(uint8_t{2});
  three.Put(uint8_t{1}).Put(uint8_t{0}).Put(uint8_t{3}).Put(uint8_t{0}).Put(uint8_t{0});
  three.Put(uint8_t{1}).Put(uint8_t{1}).Put(uint8_t{1});
  three.Put(uint8_t{1}).Put(uint8_t{2}).Put(uint8_t{2});
  three.Put(uint8_t{2}).Put(uint8_t{0}).Put(uint8_t{0}).Put(1.f);
  three.Put(uint8_t{3}).Put(uint8_t{0x80});  // worker 2 (128 mod 3) dies
  three.Put(uint8_t{2}).Put(uint8_t{1}).Put(uint8_t{0}).Put(-1.f);
  three.Put(uint8_t{0}).Put(uint8_t{0}).Put(uint8_t{ps::kOrderFinish}).PutChunk<uint16_t>("");
  three.Put(uint8_t{0}).Put(uint8_t{1}).Put(uint8_t{ps::kOrderBegin});
  three.PutChunk<uint16_t>(ps::EncodeOrderBegin({1, 4, 1, 0, {0, 1, 2, 3}}));
  const std::vector<float> diffs = {1.f, 2.f};
  three.Put(uint8_t{0}).Put(uint8_t{1}).Put(uint8_t{ps::kOrderPairs});
  three.PutChunk<uint16_t>(ps::EncodeOrderPairs(0, 1, 1, diffs.data(), 1));
  three.Put(uint8_t{0}).Put(uint8_t{3}).Put(uint8_t{ps::kOrderNext});
  three.PutChunk<uint16_t>(ps::EncodeOrderNext(0, {0}));
  WriteSeed("order_plugin", "three-workers-one-dies", three.bytes());

  InputWriter one;
  one.Put(uint8_t{0});
  one.Put(uint8_t{0}).Put(uint8_t{0}).Put(uint8_t{ps::kOrderBegin});
  one.PutChunk<uint16_t>(ps::EncodeOrderBegin({0, 2, 3, 5, {1, 0}}));
  WriteSeed("order_plugin", "one-worker-raw-begin", one.bytes());

  // Found by the fuzzer: bodies with no examples made the decoders memcpy to and from
  // the null data() of an empty vector (undefined behaviour, reported by UBSan).
  InputWriter empty;
  empty.Put(uint8_t{0});
  empty.Put(uint8_t{0}).Put(uint8_t{0}).Put(uint8_t{ps::kOrderBegin});
  empty.PutChunk<uint16_t>(ps::EncodeOrderBegin({0, 0, 1, 0, {}}));
  empty.Put(uint8_t{0}).Put(uint8_t{0}).Put(uint8_t{ps::kOrderNext});
  empty.PutChunk<uint16_t>(ps::EncodeOrderNext(0, {}));
  WriteSeed("order_plugin", "regress-no-examples", empty.bytes());

  // Found by the fuzzer: a kOrderBegin's dim made the balancer allocate dim doubles when
  // the epoch began, before any pair proved that dim was real (2^31 - 1: 16 GiB).
  InputWriter huge_dim;
  huge_dim.Put(uint8_t{0});
  huge_dim.Put(uint8_t{0}).Put(uint8_t{0}).Put(uint8_t{ps::kOrderBegin});
  huge_dim.PutChunk<uint16_t>(
      ps::EncodeOrderBegin({0, 2, std::numeric_limits<int32_t>::max(), 0, {1, 0}}));
  WriteSeed("order_plugin", "regress-huge-dim", huge_dim.bytes());
}

void ClockCoordinatorSeeds() {
  InputWriter bsp;
  bsp.Put(uint8_t{0}).Put(uint8_t{2});  // bsp, 3 workers
  for (int clock = 0; clock < 3; ++clock) {
    for (uint8_t w : {0, 1, 2}) bsp.Put(uint8_t{1}).Put(w);
  }
  bsp.Put(uint8_t{2}).Put(uint8_t{1});     // worker 1 finishes
  bsp.Put(uint8_t{3}).Put(uint8_t{0x80});  // worker 2 (128 mod 3) dies
  bsp.Put(uint8_t{1}).Put(uint8_t{2});
  WriteSeed("clock_coordinator", "bsp-three-workers", bsp.bytes());

  InputWriter raw;
  raw.Put(uint8_t{3}).Put(uint8_t{1});  // ssp:3, 2 workers
  for (const char* body : {"0", "1", "01", "-1", "9223372036854775807", "x", ""}) {
    raw.Put(uint8_t{0}).Put(uint8_t{0}).Put(uint8_t{ps::kClockEnded}).PutChunk<uint8_t>(body);
  }
  raw.Put(uint8_t{0}).Put(uint8_t{2}).Put(uint8_t{ps::kClockEnded}).PutChunk<uint8_t>("0");
  raw.Put(uint8_t{0}).Put(uint8_t{1}).Put(uint8_t{ps::kClockMinimum}).PutChunk<uint8_t>("0");
  raw.Put(uint8_t{2}).Put(uint8_t{0}).Put(uint8_t{2}).Put(uint8_t{1});
  WriteSeed("clock_coordinator", "ssp-raw-bodies", raw.bytes());
}

// ---- reliable delivery ------------------------------------------------------------------

void InboundSequencerSeeds() {
  // Steps: u8 kind (7: forget), u8 sender, u8 incarnation, u8 sequence (< 0x80).
  auto message = [](InputWriter& w, int sender, int incarnation, int seq) {
    w.Put(uint8_t{0}).Put(static_cast<uint8_t>(sender)).Put(static_cast<uint8_t>(incarnation));
    w.Put(static_cast<uint8_t>(seq));
  };
  InputWriter in_order;
  in_order.Put(uint8_t{4});
  for (int seq = 1; seq <= 6; ++seq) message(in_order, seq % 2, 0, (seq + 1) / 2);
  WriteSeed("inbound_sequencer", "two-senders-in-order", in_order.bytes());

  InputWriter reordered;
  reordered.Put(uint8_t{4});
  for (int seq : {2, 3, 3, 1, 5, 9, 4, 1, 0}) message(reordered, 0, 0, seq);
  WriteSeed("inbound_sequencer", "reordered-duplicated", reordered.bytes());

  InputWriter restarts;
  restarts.Put(uint8_t{2});
  for (int seq : {1, 3, 2}) message(restarts, 1, 0, seq);
  for (int seq : {2, 1}) message(restarts, 1, 1, seq);
  message(restarts, 1, 0, 4);                // a straggler of the retired incarnation
  restarts.Put(uint8_t{7}).Put(uint8_t{1});  // forgotten
  message(restarts, 1, 1, 3);
  message(restarts, 1, 2, 1);
  InputWriter huge;
  huge.Put(uint8_t{0}).Put(uint8_t{2}).Put(uint8_t{3}).Put(uint8_t{0x80});
  huge.Put(~uint64_t{0});
  WriteSeed("inbound_sequencer", "restarts-and-forget", restarts.bytes() + huge.bytes());
}

// Reports as nodes send them: a worker waiting in a push and in Clock(), a server with
// shard queues; the job's barrier holds worker 1.
void NodeReportSeeds() {
  ps::NodeActivity* activity = ps::NodeActivity::Get();
  activity->CountIssued(true, true);
  activity->CountLatency(std::chrono::milliseconds(3));
  activity->SetClocks(4, false);
  std::string worker;
  {
    ps::ActivityWait push([](ps::NodeActivity::WaitInfo* info) {
      info->what = "Push(timestamp 7)";
      info->waiting_for = {10};
    });
    ps::ActivityWait clock([](ps::NodeActivity::WaitInfo* info) {
      info->what = "Clock() ending clock 4";
      info->clock_minimum = 5;
    });
    herdps::wire::NodeReport report;
    activity->Fill(&report);
    // How long each has waited is the clock's: fixed, so that the seed is the same on
    // every run.
    for (int i = 0; i < report.wait_size(); ++i) {
      report.mutable_wait(i)->set_seconds(0.5 * (i + 1));
    }
    worker = report.SerializeAsString();
  }
  herdps::wire::NodeReport server;
  server.set_served_push_requests(12);
  server.add_shard_queue_depth(3);
  server.add_shard_queue_depth(0);
  InputWriter w;
  w.Put(uint8_t{0}).Put(uint8_t{1 << 4});  // nobody dead; worker 1 in the barrier
  w.Put(uint8_t{3}).PutChunk<uint16_t>(worker);
  w.Put(uint8_t{2}).PutChunk<uint16_t>(server.SerializeAsString());
  WriteSeed("node_report", "waiting-worker-and-server", w.bytes());
  InputWriter dead;
  dead.Put(uint8_t{1 << 2}).Put(uint8_t{0x1f});  // server 1 dead; everyone in the barrier
  dead.Put(uint8_t{3}).PutChunk<uint16_t>(worker);
  WriteSeed("node_report", "waiting-for-a-dead-server", dead.bytes());
}

}  // namespace

void ps::fuzz::StateSeeds() {
  CheckpointSeeds();
  OrderPluginSeeds();
  ClockCoordinatorSeeds();
  InboundSequencerSeeds();
  NodeReportSeeds();
}
