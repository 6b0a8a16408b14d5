// The job half of the security tests (security_test.py): a float store on the servers,
// workers that push and pull known values, and counters printed for the driver.
//
// Worker r pushes (r+1)(k+1) to keys 0..K-1, prints "READY worker r", and waits for the
// driver's <sync_dir>/go file (the driver probes the job and reads /proc meanwhile);
// then, after a barrier of the workers, every worker pulls and checks that key k holds
// exactly W(W+1)/2 (k+1). The server waits for the same file, which holds how many
// forged pushes the driver got through with the job's key, waits (bounded) until it has
// counted that many forged messages, and prints its counters:
//
//   STATS server forged_messages=F refused_joins=J received_messages=R
//         dropped_messages=D refused_handshakes=H failed_handshakes=G
//
// (one line; the scheduler prints the same with refused_joins). The server also prints
// "ENDPOINT server <data> <control>" once it has joined. A node whose Start fails
// prints "START FAILED: <why>" and exits 3.
#include <gflags/gflags.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "ps/ps.h"

DEFINE_string(sync_dir, "", "directory shared with the driver; empty: no waiting");
DEFINE_int32(keys, 1000, "keys 0..keys-1 are pushed and pulled");
DEFINE_int32(wait_s, 60, "bound on every wait for the driver");

namespace {

using Clock = std::chrono::steady_clock;

// The number in the driver's <sync_dir>/go once it exists; -1 without a sync_dir or
// when it never comes.
long WaitForGo() {
  if (FLAGS_sync_dir.empty()) return -1;
  const std::string path = FLAGS_sync_dir + "/go";
  auto deadline = Clock::now() + std::chrono::seconds(FLAGS_wait_s);
  while (Clock::now() < deadline) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0) {
      long n = -1;
      std::ifstream(path) >> n;
      return n;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::printf("FAILED: no %s within %d s\n", path.c_str(), FLAGS_wait_s);
  std::fflush(stdout);
  return -1;
}

void PrintStats(const char* who) {
  ps::NodeStats n = ps::Postoffice::Get()->stats();
  ps::VanStats v = ps::Postoffice::Get()->van()->stats();
  std::printf(
      "STATS %s forged_messages=%llu refused_joins=%llu received_messages=%llu "
      "dropped_messages=%llu refused_handshakes=%llu failed_handshakes=%llu\n",
      who, static_cast<unsigned long long>(n.forged_messages),
      static_cast<unsigned long long>(n.refused_joins),
      static_cast<unsigned long long>(v.received_messages),
      static_cast<unsigned long long>(v.dropped_messages),
      static_cast<unsigned long long>(v.refused_handshakes),
      static_cast<unsigned long long>(v.failed_handshakes));
  std::fflush(stdout);
}

class Store {
 public:
  Store() : server_(0) {
    server_.set_request_handle(
        [this](const ps::KVMeta& m, const ps::KVPairs<float>& d, ps::KVServer<float>* srv) {
          if (m.push) {
            for (size_t i = 0; i < d.keys.size(); ++i) values_[d.keys[i]] += d.vals[i];
          }
          ps::KVPairs<float> res;
          if (m.pull) {
            res.keys = d.keys;
            res.vals.resize(d.keys.size());
            for (size_t i = 0; i < d.keys.size(); ++i) res.vals[i] = values_[d.keys[i]];
          }
          srv->Response(m, res);
        });
  }

 private:
  std::map<ps::Key, float> values_;  // the handle's thread only
  ps::KVServer<float> server_;
};

int RunWorker() {
  ps::KVWorker<float> kv(0, 0);
  const int rank = ps::MyRank(), workers = ps::NumWorkers();
  std::vector<ps::Key> keys;
  std::vector<float> mine;
  for (int k = 0; k < FLAGS_keys; ++k) {
    keys.push_back(static_cast<ps::Key>(k));
    mine.push_back(static_cast<float>((rank + 1) * (k + 1)));
  }
  kv.Wait(kv.Push(keys, mine));
  std::printf("READY worker %d\n", rank);
  std::fflush(stdout);
  WaitForGo();
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
  std::vector<float> got;
  ps::Status s = kv.Wait(kv.Pull(keys, &got), std::chrono::seconds(FLAGS_wait_s));
  int wrong = s.ok() && got.size() == keys.size() ? 0 : FLAGS_keys;
  const float sum = static_cast<float>(workers * (workers + 1) / 2);
  for (size_t k = 0; !wrong && k < got.size(); ++k) {
    if (got[k] != sum * static_cast<float>(k + 1)) ++wrong;
  }
  std::printf("RESULT worker %d keys=%d wrong=%d status=%s\n", rank, FLAGS_keys, wrong,
              s.ok() ? "ok" : s.message().c_str());
  std::fflush(stdout);
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  try {
    ps::Start(0);
  } catch (const ps::Error& e) {
    std::printf("START FAILED: %s\n", e.what());
    std::fflush(stdout);
    return 3;
  }
  int rc = 0;
  if (ps::IsWorker()) {
    rc = RunWorker();
  } else if (ps::IsServer()) {
    Store store;
    const ps::Node& me = ps::Postoffice::Get()->my_node();
    std::printf("ENDPOINT server %s %s\n", me.endpoint.c_str(), me.control_endpoint.c_str());
    std::fflush(stdout);
    long forged = WaitForGo();
    auto deadline = Clock::now() + std::chrono::seconds(FLAGS_wait_s);
    while (forged > 0 &&
           ps::Postoffice::Get()->stats().forged_messages < static_cast<uint64_t>(forged) &&
           Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    PrintStats("server");
    ps::Finalize(0, true);
    return 0;
  } else {
    WaitForGo();
    PrintStats("scheduler");
  }
  ps::Finalize(0, true);
  return rc;
}
