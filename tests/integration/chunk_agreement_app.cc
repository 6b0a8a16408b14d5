// Integration: a worker agrees with each server app once whether it takes chunks of
// large values, and plans every request of that app by that one answer. Run with 2
// servers and PS_CHUNK_BYTES=4096 (1024 floats); --scenario picks one:
//
//   mixed     app 0 runs an OptimizerServer (takes chunks) on server 0 and a plain
//             KVServer with KVServerDefaultHandle (whole values only) on server 1;
//             app 1 runs an OptimizerServer on both. Every worker pushes small keys
//             and keys of several chunks owned by each server, then pulls them every
//             way. App 0's values must go whole (no chunk sent), app 1's in chunks,
//             and every value must come back exact: SGD with lr 1 from zero
//             subtracts each push once, the default handle adds it once. Each
//             server of app 0 checks it holds exactly the keys it owns, whole, at
//             their length (a chunk stored or a push applied twice would show).
//             --late_server_ms delays server 1's plain KVServer, so that the
//             workers' question waits for it on that server.
//   replaced  both servers run an OptimizerServer for app 0; after the worker's
//             first chunked push, server 1 replaces it by a plain KVServer. The
//             next chunked push must fail with Unimplemented naming server 1, and
//             nothing of it may be resent whole.
//   missing   no server runs app 5: the question waits 10 s on each server, then a
//             push that would chunk fails with NotFound saying the worker cannot tell
//             whether the app takes chunks; a small push issued behind it is sent all
//             the same, and fails as any request for a missing app does.
#include <gflags/gflags.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "app_expect.h"
#include "ps/optimizer_server.h"
#include "ps/ps.h"

DEFINE_string(scenario, "mixed", "mixed | replaced | missing (see the file comment)");
DEFINE_int32(rounds, 3, "push rounds (mixed)");
DEFINE_int32(late_server_ms, 0, "mixed: server 1 sets up app 0 this late");

namespace {

int failures = 0;

constexpr int kChunkValues = 1024;  // PS_CHUNK_BYTES=4096 of floats
constexpr auto kBound = std::chrono::seconds(60);
constexpr int kAllNodes = ps::kServerGroup + ps::kWorkerGroup;

float Grad(ps::Key key, int j) { return static_cast<float>((key + j) % 7 + 1); }

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The test's keys: for each server rank, two large keys (3.5 and 4 chunks) and two
// small ones that the ring gives it, found by scanning (every node finds the same).
struct KeySet {
  std::vector<ps::Key> keys;  // sorted
  std::vector<int> lens;
  std::vector<int> owner;  // rank of the key's server
  std::vector<ps::Key> large;
};

KeySet MakeKeys() {
  const ps::ConsistentHashRing& ring = ps::Postoffice::Get()->ring();
  const int servers = ps::NumServers();
  std::vector<int> large(servers, 0), small(servers, 0);
  KeySet set;
  for (ps::Key k = 1; set.keys.size() < static_cast<size_t>(4 * servers); ++k) {
    const int r = ring.ServerOf(k);
    int len = 0;
    if (large[r] < 2) {
      len = large[r]++ == 0 ? kChunkValues * 7 / 2 : kChunkValues * 4;
      set.large.push_back(k);
    } else if (small[r] < 2) {
      len = 1 + static_cast<int>(k % 3) + small[r]++;
    } else {
      continue;
    }
    set.keys.push_back(k);
    set.lens.push_back(len);
    set.owner.push_back(r);
  }
  return set;
}

int LenOf(const KeySet& set, ps::Key key) {
  for (size_t i = 0; i < set.keys.size(); ++i) {
    if (set.keys[i] == key) return set.lens[i];
  }
  return 0;
}

// Each key's values, scale(owner) * Grad(key, j).
template <typename Scale>
std::vector<float> Values(const KeySet& set, const std::vector<ps::Key>& keys, Scale scale) {
  const ps::ConsistentHashRing& ring = ps::Postoffice::Get()->ring();
  std::vector<float> vals;
  for (ps::Key k : keys) {
    const float s = scale(ring.ServerOf(k));
    for (int j = 0; j < LenOf(set, k); ++j) vals.push_back(s * Grad(k, j));
  }
  return vals;
}

std::vector<int> Lens(const KeySet& set, const std::vector<ps::Key>& keys) {
  std::vector<int> lens;
  for (ps::Key k : keys) lens.push_back(LenOf(set, k));
  return lens;
}

void ExpectExact(const std::vector<float>& want, const float* got, size_t n, const char* how) {
  size_t wrong = 0;
  for (size_t i = 0; i < want.size() && i < n; ++i) wrong += got[i] != want[i];
  EXPECT(n == want.size() && wrong == 0, "%s: %zu of %zu values wrong (got %zu)", how, wrong,
         want.size(), n);
}

void ExpectOk(const ps::Status& s, const char* how) {
  EXPECT(s.ok(), "%s: %s", how, s.ToString().c_str());
}

// Pushes every key of `set` `rounds` times to `kv`: first each key from a thread of its
// own, then in one request and in requests of their own (the large keys zero-copy, in
// flight at once); then pulls them every way.
// `sign(owner)` is what the server app of that rank does to a pushed value.
template <typename Sign>
void PushAndPull(ps::KVWorker<float>& kv, const KeySet& set, int app, Sign sign) {
  const float mine = static_cast<float>(ps::MyRank() + 1);
  auto pushed = [&](int) { return mine; };
  for (int r = 0; r < FLAGS_rounds; ++r) {
    if (r == 0) {
      // A thread per key, all at once: the first requests race to the question.
      std::vector<ps::Status> got(set.keys.size());
      std::vector<std::thread> threads;
      for (size_t i = 0; i < set.keys.size(); ++i) {
        threads.emplace_back([&, i] {
          const ps::Key k = set.keys[i];
          got[i] = kv.Wait(kv.Push({k}, Values(set, {k}, pushed)), kBound);
        });
      }
      for (std::thread& t : threads) t.join();
      for (const ps::Status& s : got) ExpectOk(s, "push from a thread of its own");
      continue;
    }
    if (r % 2 == 0) {
      ExpectOk(
          kv.Wait(kv.Push(set.keys, Values(set, set.keys, pushed), Lens(set, set.keys)), kBound),
          "push of every key");
      continue;
    }
    std::vector<int> ts;
    std::vector<ps::Key> small;
    for (size_t i = 0; i < set.keys.size(); ++i) {
      const ps::Key k = set.keys[i];
      if (set.lens[i] <= kChunkValues) {
        small.push_back(k);
        continue;
      }
      ts.push_back(kv.ZPush(ps::SArray<ps::Key>{k}, ps::SArray<float>(Values(set, {k}, pushed))));
    }
    ts.push_back(kv.Push(small, Values(set, small, pushed), Lens(set, small)));
    for (int t : ts) ExpectOk(kv.Wait(t, kBound), "push of some keys");
  }
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);

  const int workers = ps::NumWorkers();
  const float total = static_cast<float>(FLAGS_rounds) * workers * (workers + 1) / 2;
  auto stored = [&](int owner) { return sign(owner) * total; };
  std::vector<float> out;
  std::vector<int> lens;
  ExpectOk(kv.Wait(kv.Pull(set.keys, &out, &lens), kBound), "pull of every key");
  ExpectExact(Values(set, set.keys, stored), out.data(), out.size(), "pull of every key");
  EXPECT(lens == Lens(set, set.keys), "app %d: pulled lens differ", app);
  for (ps::Key k : set.large) {
    ps::SArray<float> sized(LenOf(set, k), -1.0f);
    ExpectOk(kv.Wait(kv.ZPull(ps::SArray<ps::Key>{k}, &sized), kBound), "sized pull");
    ExpectExact(Values(set, {k}, stored), sized.data(), sized.size(), "sized pull of a large key");
  }
  // A worker of the same app that never pushed: its first request is a sized pull.
  ps::KVWorker<float> fresh(app, 1);
  ps::SArray<float> whole(LenOf(set, set.large[0]));
  ExpectOk(fresh.Wait(fresh.ZPull(ps::SArray<ps::Key>{set.large[0]}, &whole), kBound),
           "a fresh worker's sized pull");
  ExpectExact(Values(set, {set.large[0]}, stored), whole.data(), whole.size(),
              "a fresh worker's sized pull");
}

int MixedWorker() {
  const KeySet set = MakeKeys();
  {
    // App 0: server 0 subtracts (SGD, lr 1), server 1 adds; server 1 takes whole values
    // only, so nothing of app 0 goes in chunks.
    ps::KVWorker<float> kv(0, 0);
    PushAndPull(kv, set, 0, [](int owner) { return owner == 0 ? -1.0f : 1.0f; });
    ps::RequestPipeline::Counters c = kv.counters();
    EXPECT(c.chunks == 0, "app 0: %llu chunks sent to an app that takes whole values only",
           static_cast<unsigned long long>(c.chunks));
    EXPECT(kv.dropped_answers() == 0, "app 0: %llu answers dropped",
           static_cast<unsigned long long>(kv.dropped_answers()));
  }
  {
    // App 1: an OptimizerServer on both servers takes chunks.
    ps::KVWorker<float> kv(1, 0);
    PushAndPull(kv, set, 1, [](int) { return -1.0f; });
    ps::RequestPipeline::Counters c = kv.counters();
    EXPECT(c.chunks >= static_cast<uint64_t>(FLAGS_rounds) * 8, "app 1: only %llu chunks sent",
           static_cast<unsigned long long>(c.chunks));
  }
  ps::Postoffice::Get()->Barrier(0, kAllNodes);  // the servers check what they hold
  if (failures == 0) Say("worker %d: exact, app 0 whole, app 1 in chunks", ps::MyRank());
  return failures;
}

// What a server of app 0 must hold: the keys the ring gives it, whole, at their length.
void ExpectHolds(const KeySet& set, size_t keys, size_t values, const char* what) {
  size_t want_keys = 0, want_values = 0;
  for (size_t i = 0; i < set.keys.size(); ++i) {
    if (set.owner[i] != ps::MyRank()) continue;
    ++want_keys;
    want_values += static_cast<size_t>(set.lens[i]);
  }
  EXPECT(keys == want_keys && values == want_values,
         "server %d (%s) holds %zu keys of %zu values; want %zu keys of %zu", ps::MyRank(), what,
         keys, values, want_keys, want_values);
}

ps::OptimizerServerOptions Sgd() {
  ps::OptimizerServerOptions options;
  options.optimizer.lr = 1.0;
  return options;
}

int MixedServer() {
  const KeySet set = MakeKeys();
  auto app1 = std::make_unique<ps::OptimizerServer>(1, Sgd());
  if (ps::MyRank() == 0) {
    ps::OptimizerServer app0(0, Sgd());
    ps::Postoffice::Get()->Barrier(0, kAllNodes);
    ExpectHolds(set, app0.NumKeys(), app0.PayloadBytes() / sizeof(float), "OptimizerServer");
    return failures;
  }
  if (FLAGS_late_server_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_late_server_ms));
  }
  ps::KVServerDefaultHandle<float> store;
  ps::KVServer<float> app0(0);
  app0.set_request_handle([&store](const ps::KVMeta& meta, const ps::KVPairs<float>& data,
                                   ps::KVServer<float>* s) { store(meta, data, s); });
  ps::Postoffice::Get()->Barrier(0, kAllNodes);
  app0.Close();  // no handle call runs from here on: `store` is ours to read
  size_t values = 0;
  for (const auto& kv : store.store) values += kv.second.size();
  ExpectHolds(set, store.store.size(), values, "KVServerDefaultHandle");
  return failures;
}

int ReplacedWorker() {
  const KeySet set = MakeKeys();
  ps::KVWorker<float> kv(0, 0);
  const ps::Key key = set.large[0];
  auto ones = [](int) { return 1.0f; };
  ExpectOk(kv.Wait(kv.Push({key}, Values(set, {key}, ones)), kBound), "first chunked push");
  const ps::RequestPipeline::Counters first = kv.counters();
  EXPECT(first.chunks > 0 && first.parts == first.chunks, "first push: %llu parts, %llu chunks",
         static_cast<unsigned long long>(first.parts),
         static_cast<unsigned long long>(first.chunks));
  ps::Postoffice::Get()->Barrier(0, kAllNodes);  // server 1 replaces its app 0
  ps::Postoffice::Get()->Barrier(0, kAllNodes);
  ps::Status s = kv.Wait(kv.Push({key}, Values(set, {key}, ones)), kBound);
  EXPECT(s.code() == ps::Status::Code::kUnimplemented && Contains(s.message(), "server 1") &&
             Contains(s.message(), "whole values only"),
         "a chunk refused by a replaced server app: %s", s.ToString().c_str());
  const ps::RequestPipeline::Counters second = kv.counters();
  EXPECT(second.parts - first.parts == second.chunks - first.chunks,
         "%llu parts sent whole after the refusal",
         static_cast<unsigned long long>((second.parts - first.parts) -
                                         (second.chunks - first.chunks)));
  ps::Postoffice::Get()->Barrier(0, kAllNodes);
  if (failures == 0)
    Say("worker %d: the refused chunk failed its request: %s", ps::MyRank(), s.ToString().c_str());
  return failures;
}

int ReplacedServer() {
  auto optimizer = std::make_unique<ps::OptimizerServer>(0, Sgd());
  ps::Postoffice::Get()->Barrier(0, kAllNodes);
  std::unique_ptr<ps::KVServer<float>> plain;
  if (ps::MyRank() == 1) {
    optimizer.reset();
    plain = std::make_unique<ps::KVServer<float>>(0);
    plain->set_request_handle(ps::KVServerDefaultHandle<float>());
  }
  ps::Postoffice::Get()->Barrier(0, kAllNodes);
  ps::Postoffice::Get()->Barrier(0, kAllNodes);
  return 0;
}

int MissingWorker() {
  ps::KVWorker<float> kv(5, 0);
  const int large = kv.Push({1}, std::vector<float>(3 * kChunkValues, 1.0f));
  const int small = kv.Push({2}, {1.0f});
  ps::Status s = kv.Wait(large, kBound);
  EXPECT(s.code() == ps::Status::Code::kNotFound && Contains(s.message(), "cannot tell whether") &&
             Contains(s.message(), "app 5 is not running"),
         "a push that would chunk, for an app no server runs: %s", s.ToString().c_str());
  ps::Status t = kv.Wait(small, kBound);
  EXPECT(t.code() == ps::Status::Code::kNotFound && !Contains(t.message(), "cannot tell") &&
             Contains(t.message(), "app 5 is not running"),
         "a small push held behind it: %s", t.ToString().c_str());
  EXPECT(kv.NumInFlight() == 0, "%zu requests still in flight", kv.NumInFlight());
  if (failures == 0) Say("worker %d: %s", ps::MyRank(), s.ToString().c_str());
  return failures;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0, argv[0]);
  int rc = 0;
  if (FLAGS_scenario == "mixed") {
    if (ps::IsWorker()) rc = MixedWorker();
    if (ps::IsServer()) rc = MixedServer();
  } else if (FLAGS_scenario == "replaced") {
    if (ps::IsWorker()) rc = ReplacedWorker();
    if (ps::IsServer()) rc = ReplacedServer();
  } else if (FLAGS_scenario == "missing") {
    if (ps::IsWorker()) rc = MissingWorker();
  } else {
    std::fprintf(stderr, "unknown --scenario %s\n", FLAGS_scenario.c_str());
    rc = 2;
  }
  ps::Finalize(0, true);
  return rc ? 1 : 0;
}
