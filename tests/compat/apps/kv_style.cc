// ps-lite style KV app, as ps-lite's own tests and examples are written: `using
// namespace ps`, std::thread and the logging macros (LL, CHECK, PS_VLOG) from ps/ps.h
// alone, settings through Environment / GetEnv, the std::vector Push / Pull / PushPull
// with Wait, KVServerDefaultHandle behind a handle of ps-lite's signature, the server
// deleted in RegisterExitCallback, and a custom slicer (set_slicer) that sends every key
// to the last server.
//
// Every worker pushes its values `repeat` times to keys of its own, pulls, push-pulls,
// and checks the sums; it prints "error: 0" (ps-lite's test_kv_app prints the same
// figure) and exits non-zero on any difference.
#include <cmath>

#include "ps/ps.h"

using namespace ps;

namespace {

void StartServer() {
  if (!IsServer()) return;
  auto server = new KVServer<float>(0);
  KVServer<float>::ReqHandle store = KVServerDefaultHandle<float>();
  server->set_request_handle(
      [store](const KVMeta& meta, const KVPairs<float>& data, KVServer<float>* self) {
        store(meta, data, self);
      });
  RegisterExitCallback([server]() { delete server; });
}

int RunWorker() {
  if (!IsWorker()) return 0;
  KVWorker<float> kv(0, 0);
  const int num = GetEnv("COMPAT_KEYS", 1000);
  const int repeat = GetEnv("COMPAT_REPEAT", 20);
  PS_VLOG(1) << "worker " << MyRank() << ": " << num << " keys, " << repeat << " rounds";
  std::vector<Key> keys(num);
  std::vector<float> vals(num);
  for (int i = 0; i < num; ++i) {
    // Spread over the whole key space, as ps-lite's tests do; a key per worker.
    keys[i] = kMaxKey / num * i + MyRank();
    vals[i] = static_cast<float>((i * 7 + MyRank()) % 1000);
  }
  std::vector<int> ts;
  for (int i = 0; i < repeat; ++i) ts.push_back(kv.Push(keys, vals));
  for (int t : ts) kv.Wait(t);
  std::vector<float> pulled;
  kv.Wait(kv.Pull(keys, &pulled));
  std::vector<float> pushed_pulled;
  kv.Wait(kv.PushPull(keys, vals, &pushed_pulled));
  float error = 0;
  for (int i = 0; i < num; ++i) {
    error += std::fabs(pulled[i] - vals[i] * repeat);
    error += std::fabs(pushed_pulled[i] - vals[i] * (repeat + 1));
  }
  // A thread of the app's own, std::thread coming with ps/ps.h as in ps-lite.
  float checked = -1;
  std::thread([&] { checked = error; }).join();
  LL << "worker " << MyRank() << " error: " << checked;
  CHECK_EQ(pulled.size(), keys.size());

  // ps-lite's slicer: every key of this worker's second set to the last server.
  std::vector<Key> more(keys);
  for (Key& k : more) k += 1000;  // keys of their own, still sorted
  kv.set_slicer([](const KVPairs<float>& send, const std::vector<Range>& ranges,
                   KVWorker<float>::SlicedKVs* sliced) {
    sliced->assign(ranges.size(), {false, KVPairs<float>()});
    sliced->back() = {true, send};
  });
  kv.Wait(kv.Push(more, vals));
  std::vector<float> sliced_back;
  kv.Wait(kv.Pull(more, &sliced_back));
  float sliced_error = 0;
  for (int i = 0; i < num; ++i) sliced_error += std::fabs(sliced_back[i] - vals[i]);
  LL << "worker " << MyRank() << " sliced error: " << sliced_error;
  return error == 0 && sliced_error == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  // Settings handed to the runtime through Environment, as MXNet and BytePS do: the
  // value set here is the one ps::Start reads.
  Environment::Init({{"PS_VERBOSE", GetEnv("COMPAT_VERBOSE", std::string("0"))}});
  Start(0, argc > 0 ? argv[0] : nullptr);
  StartServer();
  int rc = RunWorker();
  Finalize(0, true);
  return rc;
}
