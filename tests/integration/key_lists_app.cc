// Integration: keys on the wire (docs/pipeline.md, "Keys on the wire"). Whatever form a
// key list travels in (a key frame of steps or runs, raw, or the id of a list the
// server kept) and however often the server forgets its lists, every push lands on
// exactly its keys, once.
//
// Each worker, for --rounds rounds, pulls and then pushes (rank + 1) * F(key) to each of
// these lists: a dense range, a strided layout of huge keys (ps-lite's benchmark), sparse
// random keys, and one array whose contents the app overwrites in place between
// requests (two lists in turn, through ZPush: a kept list must be compared by value,
// never by the array). The servers run the summing KVServerDefaultHandle, so after a
// barrier every key holds rounds * W(W+1)/2 * F(key) exactly (small integers in float).
//
// --expect: what the worker's counters must show: "cached" (lists went as ids),
// "resent" (a server had not kept a list: sent again with the keys; run with
// --server_cache_bytes 2048, which no server's half of the dense list fits, so every
// worker meets misses whatever the timing, while shorter lists come and go), "raw"
// (PS_KEY_ENCODING=0 and PS_KEY_CACHE_BYTES=0: every key list raw, no ids).
#include <gflags/gflags.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "app_expect.h"
#include "ps/ps.h"

DEFINE_int32(rounds, 6, "pull-and-push rounds over every list");
DEFINE_string(expect, "cached", "cached | resent | raw (see the file comment)");
DEFINE_int64(server_cache_bytes, -1,
             "servers only: PS_KEY_CACHE_BYTES for the server processes; -1: as the job's");

namespace {

int failures = 0;

float F(ps::Key key) { return static_cast<float>(key % 5 + 1); }

std::vector<std::vector<ps::Key>> Lists() {
  std::vector<std::vector<ps::Key>> lists(3);
  for (ps::Key k = 1000; k < 2000; ++k) lists[0].push_back(k);
  for (ps::Key i = 0; i < 512; ++i) lists[1].push_back(UINT64_MAX / 4096 * i + 3);
  std::mt19937_64 rng(11);
  ps::Key k = 0;
  for (int i = 0; i < 800; ++i) lists[2].push_back(k += 1 + rng() % 5000);
  return lists;
}

// The two lists the overwritten array holds in turn; of the same length.
std::vector<ps::Key> Mutable(int which) {
  std::vector<ps::Key> keys;
  for (ps::Key i = 0; i < 300; ++i) keys.push_back(which == 0 ? 5000000 + i : 6000000 + 2 * i);
  return keys;
}

std::vector<float> Scaled(const std::vector<ps::Key>& keys, float scale) {
  std::vector<float> vals;
  for (ps::Key k : keys) vals.push_back(scale * F(k));
  return vals;
}

void PullAndPush(ps::KVWorker<float>* kv, const std::vector<ps::Key>& keys, float mine) {
  std::vector<float> got;
  ps::Status s = kv->Wait(kv->Pull(keys, &got));
  EXPECT(s.ok() && got.size() == keys.size(), "pull: %s", s.ToString().c_str());
  s = kv->Wait(kv->Push(keys, Scaled(keys, mine)));
  EXPECT(s.ok(), "push: %s", s.ToString().c_str());
}

void Check(ps::KVWorker<float>* kv, const std::vector<ps::Key>& keys, float total,
           const char* what) {
  std::vector<float> got;
  ps::Status s = kv->Wait(kv->Pull(keys, &got));
  size_t wrong = got.size() == keys.size() ? 0 : keys.size();
  for (size_t i = 0; i < got.size() && i < keys.size(); ++i) wrong += got[i] != total * F(keys[i]);
  EXPECT(s.ok() && wrong == 0, "%s: %s, %zu of %zu values wrong", what, s.ToString().c_str(),
         wrong, keys.size());
}

int RunWorker() {
  const int rank = ps::MyRank(), workers = ps::NumWorkers();
  const float mine = static_cast<float>(rank + 1);
  ps::KVWorker<float> kv(0, 0);
  const auto lists = Lists();
  ps::SArray<ps::Key> array(Mutable(0).size());
  // Zeros first, so that every key exists before the first pull (the default handle
  // answers a pull of a key never pushed with NotFound).
  std::vector<std::vector<ps::Key>> all = lists;
  all.push_back(Mutable(0));
  all.push_back(Mutable(1));
  for (const auto& keys : all) {
    ps::Status s = kv.Wait(kv.Push(keys, std::vector<float>(keys.size(), 0.0f)));
    EXPECT(s.ok(), "push of zeros: %s", s.ToString().c_str());
  }
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
  for (int r = 0; r < FLAGS_rounds; ++r) {
    for (const auto& keys : lists) PullAndPush(&kv, keys, mine);
    for (int which : {0, 1}) {
      const std::vector<ps::Key> keys = Mutable(which);
      std::copy(keys.begin(), keys.end(), array.begin());  // the same array, new contents
      ps::SArray<float> vals(Scaled(keys, mine));
      ps::Status s = kv.Wait(kv.ZPush(array, vals));
      EXPECT(s.ok(), "push of the overwritten array: %s", s.ToString().c_str());
      s = kv.Wait(kv.ZPush(array, vals));  // the same contents again: may go as an id
      EXPECT(s.ok(), "second push of the overwritten array: %s", s.ToString().c_str());
    }
  }
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
  const float total = static_cast<float>(FLAGS_rounds) * workers * (workers + 1) / 2;
  const char* names[] = {"dense range", "strided huge keys", "sparse random keys"};
  for (size_t i = 0; i < lists.size(); ++i) Check(&kv, lists[i], total, names[i]);
  Check(&kv, Mutable(0), 2 * total, "first contents of the overwritten array");
  Check(&kv, Mutable(1), 2 * total, "second contents of the overwritten array");

  const ps::RequestPipeline::Counters c = kv.counters();
  const auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  if (FLAGS_expect == "raw") {
    EXPECT(c.cached_key_lists == 0 && c.push_key_bytes == c.push_raw_key_bytes,
           "keys should travel raw: %llu parts as ids, %llu key bytes of %llu raw",
           u(c.cached_key_lists), u(c.push_key_bytes), u(c.push_raw_key_bytes));
  } else {
    // Every push follows a pull of the same list, or repeats the push before it: with
    // the lists kept, nearly every push goes as an id; sent again, the keys go as key
    // frames, still fewer bytes than raw.
    EXPECT(c.cached_key_lists > 0, "no part went as a list id");
    const uint64_t factor = FLAGS_expect == "cached" ? 10 : 2;
    EXPECT(c.push_key_bytes * factor < c.push_raw_key_bytes, "key bytes %llu of %llu raw",
           u(c.push_key_bytes), u(c.push_raw_key_bytes));
  }
  if (FLAGS_expect == "resent") {
    EXPECT(c.key_lists_resent > 0, "the servers kept every list: nothing was sent again");
  } else {
    EXPECT(c.key_lists_resent == 0, "%llu parts sent again", u(c.key_lists_resent));
  }
  if (failures == 0) {
    Say("worker %d: exact; %llu parts, %llu as list ids, %llu sent again; key bytes %llu of "
        "%llu raw", rank, u(c.parts), u(c.cached_key_lists), u(c.key_lists_resent),
        u(c.push_key_bytes), u(c.push_raw_key_bytes));
  }
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  const char* role = std::getenv("DMLC_ROLE");
  if (FLAGS_server_cache_bytes >= 0 && role && std::string(role) == "server") {
    setenv("PS_KEY_CACHE_BYTES", std::to_string(FLAGS_server_cache_bytes).c_str(), 1);
  }
  ps::Start(0, argv[0]);
  std::unique_ptr<ps::KVServer<float>> server;
  if (ps::IsServer()) {
    server = std::make_unique<ps::KVServer<float>>(0);
    server->set_request_handle(ps::KVServerDefaultHandle<float>());
  }
  const int rc = ps::IsWorker() ? RunWorker() : 0;
  ps::Finalize(0, true);
  return rc;
}
