// ps-lite's "several workers in one process": a worker process runs one thread per
// customer, each calling Start(customer_id), using its own KVWorker(0, customer_id) and
// Finalize(customer_id). Each customer is one worker of the job (PS_NUM_WORKER counts
// it). Run with `tracker/launch --workers-per-process K ... -- APP {role}`: the first
// argument is the node's role, as ps-lite's local_multi_workers.sh passes it.
#include <cmath>
#include <cstring>

#include "ps/ps.h"

using namespace ps;

namespace {

constexpr int kCustomersPerProcess = 2;
std::atomic<int> failures{0};

void RunWorker(int customer_id) {
  Start(customer_id);
  KVWorker<float> kv(0, customer_id);
  const int num = 1000, repeat = 10;
  std::vector<Key> keys(num);
  std::vector<float> vals(num);
  for (int i = 0; i < num; ++i) {
    // Keys of their own per process and customer.
    keys[i] = kMaxKey / num * i + static_cast<Key>(MyRank() * kCustomersPerProcess + customer_id);
    vals[i] = static_cast<float>(i % 100 + customer_id);
  }
  for (int i = 0; i < repeat; ++i) kv.Wait(kv.Push(keys, vals));
  std::vector<float> pulled;
  kv.Wait(kv.Pull(keys, &pulled));
  float error = 0;
  for (int i = 0; i < num; ++i) error += std::fabs(pulled[i] - vals[i] * repeat);
  LL << "customer " << customer_id << " error: " << error;
  if (error != 0) ++failures;
  // A barrier of the worker group: every customer of every worker process.
  Postoffice::Get()->Barrier(customer_id, kWorkerGroup);
  Finalize(customer_id, true);
}

}  // namespace

int main(int argc, char* argv[]) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s scheduler|server|worker\n", argv[0]);
    return 2;
  }
  if (std::strcmp(argv[1], "worker") != 0) {
    Start(0);
    KVServer<float>* server = nullptr;
    if (IsServer()) {
      server = new KVServer<float>(0);
      server->set_request_handle(KVServerDefaultHandle<float>());
    }
    Finalize(0, true);
    delete server;
    return 0;
  }
  std::vector<std::thread> threads;
  for (int c = 0; c < kCustomersPerProcess; ++c) threads.emplace_back(RunWorker, c);
  for (auto& t : threads) t.join();
  return failures == 0 ? 0 : 1;
}
