// consumer: a ps-lite style app built against an installed HerdPS.
//
// It is compiled outside the HerdPS tree, through find_package(HerdPS) and HerdPS::ps
// only, so building it checks that the installed package is complete, and its code is
// written the way ps-lite's examples are, so building it also checks that ps-lite apps
// still compile. Run it under tracker/launch (any W >= 1, S >= 1): every worker pushes,
// pulls and CHECKs the sums; the job exits 0 only if every node does.
#include <atomic>
#include <cstdio>
#include <vector>

#include "ps/ps.h"

using namespace ps;

namespace {

const int kRounds = 3;
const int kNumKeys = 100;

// Requests the server's handle saw; written on the receive thread, read in Finalize
// after the last barrier.
std::atomic<int> g_requests{0};

void StartServer() {
  if (!IsServer()) return;
  auto server = new KVServer<float>(0);
  // ps-lite's default store, behind a handle with ps-lite's signature so that a
  // user-written handle (KVMeta, KVPairs, KVServer*) is compiled too.
  KVServer<float>::ReqHandle store = KVServerDefaultHandle<float>();
  server->set_request_handle(
      [store](const KVMeta& req_meta, const KVPairs<float>& req_data, KVServer<float>* srv) {
        CHECK(req_meta.push || req_meta.pull);
        ++g_requests;
        store(req_meta, req_data, srv);
      });
  RegisterExitCallback([server]() {
    LOG(INFO) << "server " << MyRank() << " handled " << g_requests.load() << " requests";
    CHECK_GT(g_requests.load(), 0);
    delete server;
  });
}

void RunWorker() {
  if (!IsWorker()) return;
  KVWorker<float> kv(0, 0);
  const int rank = MyRank();
  const int workers = NumWorkers();
  // Every worker adds rank + 1, so each value ends up as 1 + 2 + ... + W per round.
  const float sum = workers * (workers + 1) / 2.0f;

  // Dense part, std::vector API: keys spread over the whole key space, up to kMaxKey.
  std::vector<Key> keys;
  for (int i = 0; i < kNumKeys; ++i) keys.push_back(kMaxKey / kNumKeys * i);
  keys.push_back(kMaxKey);
  std::vector<float> vals(keys.size(), rank + 1.0f);
  std::vector<int> ts;
  for (int r = 0; r < kRounds; ++r) ts.push_back(kv.Push(keys, vals));
  for (int t : ts) CHECK(kv.Wait(t).ok());

  // Zero-copy part, SArray API, with per-key lengths and a callback: keys 1, 2, 3 hold
  // 1, 2 and 3 values.
  std::atomic<int> callbacks{0};
  auto count = [&callbacks]() { ++callbacks; };
  KVPairs<float> req;
  req.keys = {1, 2, 3};
  req.lens = {1, 2, 3};
  req.vals = SArray<float>(6, rank + 1.0f);
  CHECK(kv.Wait(kv.ZPush(req.keys, req.vals, req.lens, 0, count)).ok());

  // Every worker has pushed everything once all have passed this barrier.
  Postoffice::Get()->Barrier(0, kWorkerGroup);

  std::vector<float> rets;
  CHECK(kv.Wait(kv.Pull(keys, &rets)).ok());
  CHECK_EQ(rets.size(), keys.size());
  for (float v : rets) CHECK_EQ(v, kRounds * sum);

  SArray<float> zvals;
  SArray<int> zlens;
  CHECK(kv.Wait(kv.ZPull(req.keys, &zvals, &zlens, 0, count)).ok());
  CHECK_EQ(zvals.size(), req.vals.size());
  for (float v : zvals) CHECK_EQ(v, sum);
  CHECK_EQ(zlens.size(), req.lens.size());
  for (size_t i = 0; i < zlens.size(); ++i) CHECK_EQ(zlens[i], req.lens[i]);
  // The callback runs before Wait returns.
  CHECK_EQ(callbacks.load(), 2);

  LOG(INFO) << "worker " << rank << ": pulled " << rets.size() << " + " << zvals.size()
            << " values, all sums right: OK";
}

}  // namespace

int main(int /*argc*/, char* argv[]) {
  try {
    Start(0, argv[0]);
    const char* role = IsScheduler() ? "scheduler" : IsServer() ? "server" : "worker";
    LOG(INFO) << role << " " << MyRank() << " up, job of " << NumWorkers() << " workers and "
              << NumServers() << " servers";
    StartServer();
    RunWorker();
    Finalize(0, true);
  } catch (const Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
  return 0;
}
