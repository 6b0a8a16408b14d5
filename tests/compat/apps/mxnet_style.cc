// An app in the style of MXNet's kvstore_dist / BytePS's server start-up:
//  - the KVWorker, the KVServer and their handles are made before ps::StartAsync;
//  - the server's command handle is set through a SimpleApp* (the KVServer is one), and
//    the worker sends commands with the KVWorker's SimpleApp Request / Wait;
//  - values live in the app's own buffers, wrapped by SArray(ptr, size, false), without
//    a copy or ownership (ZPush / ZPull);
//  - keys are placed with Postoffice::GetServerKeyRanges() (key = range_i.begin() + k),
//    and is_recovery() decides whether to run the start barrier.
// With PS_KEY_PLACEMENT=range every key must reach the server whose range holds it (the
// servers count any other); with the default ring it only has to be exact.
#include <cstring>
#include <memory>

#include "ps/ps.h"

using namespace ps;

namespace {

constexpr int kKeysPerServer = 50;
constexpr int kRounds = 5;
enum Command { kCountMisplaced = 1, kStop = 2 };

// Server state, touched by the KV handle (receive thread) and the command handle
// (the app's own thread).
std::atomic<int> misplaced{0};
std::atomic<int> stores{0};

void ServerDataHandle(const KVMeta& meta, const KVPairs<float>& data, KVServer<float>* server) {
  const auto& ranges = Postoffice::Get()->GetServerKeyRanges();
  const Range& mine = ranges[MyRank()];
  for (Key k : data.keys) {
    if (k < mine.begin() || k >= mine.end()) ++misplaced;
  }
  static KVServer<float>::ReqHandle store = KVServerDefaultHandle<float>();
  ++stores;
  store(meta, data, server);
}

void ServerCommandHandle(const SimpleData& req, SimpleApp* app) {
  if (req.head == kCountMisplaced) {
    app->Response(req, std::to_string(misplaced.load()));
  } else {
    app->Response(req);
  }
}

int RunWorker(KVWorker<float>* kv) {
  const auto& ranges = Postoffice::Get()->GetServerKeyRanges();
  std::vector<Key> keys;
  for (const Range& r : ranges) {
    for (int k = 0; k < kKeysPerServer; ++k) keys.push_back(r.begin() + k * 2 + MyRank());
  }
  // The app's own buffers; the SArrays only look at them.
  std::unique_ptr<float[]> grads(new float[keys.size()]);
  std::unique_ptr<float[]> weights(new float[keys.size()]);
  for (size_t i = 0; i < keys.size(); ++i) grads[i] = static_cast<float>(i % 7 + 1);
  SArray<Key> skeys(keys.data(), keys.size(), false);
  SArray<float> sgrads(grads.get(), keys.size(), false);
  SArray<float> sweights(weights.get(), keys.size(), false);
  for (int r = 0; r < kRounds; ++r) kv->Wait(kv->ZPush(skeys, sgrads));
  kv->Wait(kv->ZPull(skeys, &sweights));
  int wrong = 0;
  for (size_t i = 0; i < keys.size(); ++i) wrong += weights[i] != grads[i] * kRounds;
  // A command to every server through the KVWorker's SimpleApp side.
  int misplaced_total = 0;
  static_cast<SimpleApp*>(kv)->set_response_handle([&](const SimpleData& res, SimpleApp*) {
    misplaced_total += std::atoi(res.body.c_str());
  });
  int ts = kv->Request(kCountMisplaced, "", kServerGroup);
  Status s = kv->Wait(ts);
  const bool ranged = Postoffice::Get()->key_placement() == ConsistentHashRing::kRanges;
  LL << "worker " << MyRank() << ": " << wrong << " wrong values, " << misplaced_total
     << " keys on a server outside its range (" << (ranged ? "range" : "ring")
     << " placement), command " << s.ToString();
  return wrong == 0 && s.ok() && (!ranged || misplaced_total == 0) ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  // Role from the environment, read before Start as MXNet does.
  const char* role = Environment::Get()->find("DMLC_ROLE");
  std::unique_ptr<KVWorker<float>> kv;
  std::unique_ptr<KVServer<float>> server;
  if (role && std::strcmp(role, "worker") == 0) kv.reset(new KVWorker<float>(0, 0));
  if (role && std::strcmp(role, "server") == 0) {
    server.reset(new KVServer<float>(0));
    server->set_request_handle(ServerDataHandle);
    static_cast<SimpleApp*>(server.get())->set_request_handle(ServerCommandHandle);
  }
  StartAsync(0, argv[0]);
  if (!Postoffice::Get()->is_recovery()) {
    Postoffice::Get()->Barrier(0, kWorkerGroup + kServerGroup + kScheduler);
  }
  int rc = kv ? RunWorker(kv.get()) : 0;
  Finalize(0, true);
  if (server && stores.load() == 0) rc = 1;  // every server got pushes
  return rc;
}
