// Integration: a push with cmd ps::kEraseKeysCmd erases keys on an OptimizerServer,
// and erased keys come back as never-seen ones.
//
// Run with PS_CHUNK_BYTES=4096 (1024 floats) and two servers of two shards. One worker
// trains one-value keys, longer keys and a key stored in chunks with Adam, keeping a
// local replay of every update (same optimizer, same initial values); after an erase
// of some of them, the pulled values must equal the replay bit for bit: the erased keys
// hold their initial values and, after the next push, one Adam step from them (the
// step count restarted at 1), while the other keys are untouched. A pull or push-pull
// carrying the erase command, and an erase of a chunked key with fewer values than it
// has, are refused with InvalidArgument.
#include <gflags/gflags.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "app_expect.h"
#include "ps/optimizer_server.h"
#include "ps/ps.h"

namespace {

int failures = 0;

ps::OptimizerOptions Adam() {
  ps::OptimizerOptions o;
  o.kind = ps::OptimizerKind::kAdam;
  o.lr = 0.05;
  return o;
}

ps::ValueInit Init() {
  ps::ValueInit init;
  init.kind = ps::ValueInit::kUniform;
  init.scale = 0.5;
  init.seed = 17;
  return init;
}

constexpr ps::Key kChunked = 5000;
constexpr int kChunkedLen = 2500;  // 3 chunks of PS_CHUNK_BYTES=4096: 1024, 1024, 452

int LenOf(ps::Key key) {
  if (key == kChunked) return kChunkedLen;
  if (key >= 1000) return static_cast<int>(2 + key % 4);
  return 1;
}

// The worker's copy of what each key must hold.
struct Replay {
  std::unique_ptr<ps::Optimizer> adam = ps::Optimizer::Create(Adam());
  std::map<ps::Key, std::vector<float>> w, state;
  std::map<ps::Key, int64_t> steps;

  void Fresh(ps::Key key) {
    w[key].assign(LenOf(key), 0.0f);
    Init().Fill(key, w[key].data(), w[key].size());
    state[key].assign(2 * w[key].size(), 0.0f);
    steps[key] = 0;
  }
  void Step(ps::Key key, const float* g) {
    adam->Update(w[key].data(), state[key].data(), g, w[key].size(), ++steps[key]);
  }
};

std::vector<float> Gradient(const std::vector<ps::Key>& keys, int round) {
  std::vector<float> g;
  for (ps::Key k : keys) {
    for (int j = 0; j < LenOf(k); ++j) {
      g.push_back(static_cast<float>(std::sin(0.3 * round + 0.01 * k + 0.7 * j)));
    }
  }
  return g;
}

std::vector<int> Lens(const std::vector<ps::Key>& keys) {
  std::vector<int> lens;
  for (ps::Key k : keys) lens.push_back(LenOf(k));
  return lens;
}

void Push(ps::KVWorker<float>& kv, Replay& replay, const std::vector<ps::Key>& keys, int round) {
  std::vector<float> g = Gradient(keys, round);
  ps::Status s = kv.Wait(kv.Push(keys, g, Lens(keys)));
  EXPECT(s.ok(), "push of round %d: %s", round, s.ToString().c_str());
  size_t at = 0;
  for (ps::Key k : keys) {
    replay.Step(k, g.data() + at);
    at += LenOf(k);
  }
}

void ExpectReplay(ps::KVWorker<float>& kv, Replay& replay, const std::vector<ps::Key>& keys,
                  const char* when) {
  std::vector<float> got;
  std::vector<int> lens;
  ps::Status s = kv.Wait(kv.Pull(keys, &got, &lens));
  EXPECT(s.ok(), "pull %s: %s", when, s.ToString().c_str());
  EXPECT(lens == Lens(keys), "pull %s: lengths differ", when);
  size_t at = 0;
  for (ps::Key k : keys) {
    const std::vector<float>& want = replay.w[k];
    size_t wrong = 0;
    for (size_t j = 0; j < want.size(); ++j)
      wrong += at + j >= got.size() || got[at + j] != want[j];
    EXPECT(wrong == 0, "%s: key %llu has %zu of %zu values other than the replay's", when,
           static_cast<unsigned long long>(k), wrong, want.size());
    at += want.size();
  }
}

int RunWorker() {
  ps::KVWorker<float> kv(0, 0);
  std::vector<ps::Key> keys, erased, kept;
  for (ps::Key k = 0; k < 40; ++k) keys.push_back(k * 7);
  for (ps::Key k = 1000; k < 1008; ++k) keys.push_back(k);
  keys.push_back(kChunked);
  for (size_t i = 0; i < keys.size(); ++i)
    (i % 3 == 1 || keys[i] == kChunked ? erased : kept).push_back(keys[i]);

  Replay replay;
  for (ps::Key k : keys) replay.Fresh(k);
  // Pushed first: a pull would create a never-seen key with default_length values.
  for (int round = 1; round <= 3; ++round) Push(kv, replay, keys, round);
  ExpectReplay(kv, replay, keys, "after 3 Adam steps");

  // The erase: any values, as many as a push of those keys would carry.
  std::vector<float> ignored(Gradient(erased, 0).size(), 123.0f);
  ps::Status s = kv.Wait(kv.Push(erased, ignored, Lens(erased), ps::kEraseKeysCmd));
  EXPECT(s.ok(), "erase: %s", s.ToString().c_str());
  for (ps::Key k : erased) replay.Fresh(k);
  // A pull recreates erased keys as never seen: one-value keys (default_length 1), and
  // the chunked key, whose length this worker knows. The erased longer keys are left
  // for the next push to recreate with their length.
  std::vector<ps::Key> pullable;
  for (ps::Key k : keys) {
    if (LenOf(k) == 1 || k == kChunked || replay.steps[k] > 0) pullable.push_back(k);
  }
  ExpectReplay(kv, replay, pullable, "after the erase (erased keys at their initial values)");
  Push(kv, replay, keys, 4);
  ExpectReplay(kv, replay, keys, "after one more push (erased keys: Adam step 1)");

  // Erasing twice, and erasing keys never seen, is harmless.
  s = kv.Wait(kv.Push({erased[0], 999999}, {0.0f, 0.0f}, {}, ps::kEraseKeysCmd));
  EXPECT(s.ok(), "erase of a never-seen key: %s", s.ToString().c_str());
  replay.Fresh(erased[0]);
  ExpectReplay(kv, replay, {erased[0]}, "after a second erase");

  // Refusals: the command on a pull or push-pull, and a chunked key erased whole.
  std::vector<float> out;
  s = kv.Wait(kv.Pull(kept, &out, nullptr, ps::kEraseKeysCmd));
  EXPECT(s.code() == ps::Status::Code::kInvalidArgument, "erase on a pull: %s",
         s.ToString().c_str());
  s = kv.Wait(kv.PushPull({kept[0]}, {1.0f}, &out, nullptr, ps::kEraseKeysCmd));
  EXPECT(s.code() == ps::Status::Code::kInvalidArgument, "erase on a push-pull: %s",
         s.ToString().c_str());
  s = kv.Wait(kv.Push({kChunked}, {1.0f}, {}, ps::kEraseKeysCmd));
  EXPECT(s.code() == ps::Status::Code::kInvalidArgument &&
             s.message().find("stored in chunks") != std::string::npos,
         "erase of a chunked key with one value: %s", s.ToString().c_str());
  ExpectReplay(kv, replay, keys, "after the refused requests (nothing changed)");

  if (failures == 0) {
    std::printf("worker: %zu keys, %zu erased; every value equals the replay\n", keys.size(),
                erased.size());
  }
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0, argv[0]);
  std::unique_ptr<ps::OptimizerServer> server;
  if (ps::IsServer()) {
    ps::OptimizerServerOptions options;
    options.optimizer = Adam();
    options.init = Init();
    options.threads = 2;
    server = std::make_unique<ps::OptimizerServer>(0, options);
  }
  int rc = ps::IsWorker() ? RunWorker() : 0;
  ps::Finalize(0, true);
  if (server) {
    std::printf("server %d: %zu keys and chunks\n", ps::MyRank(), server->NumKeys());
  }
  return rc;
}
