// Integration: per-key FIFO. One worker issues many asynchronous pushes without
// waiting; each server applies the non-commutative update x <- A*x + seq (mod 2^64)
// per key and counts inversions (a push whose sequence number is below one already
// applied to that key). The worker replays the updates in issue order; the final
// values must match exactly and the inversion count must be 0.
#include <gflags/gflags.h>

#include <cstdio>
#include <memory>
#include <unordered_map>
#include <vector>

#include "ps/ps.h"

DEFINE_int32(pushes, 20000, "asynchronous pushes");
DEFINE_int32(keys, 16, "keys each push touches (spread over all servers)");

namespace {

constexpr uint64_t kA = 6364136223846793005ULL;
constexpr int kCmdReport = 1;

struct FifoHandle {
  struct KeyState {
    uint64_t x = 0;
    uint64_t last_seq = 0;
    bool seen = false;
  };
  std::unordered_map<ps::Key, KeyState> state;
  uint64_t inversions = 0;
  uint64_t applied = 0;

  void operator()(const ps::KVMeta& meta, const ps::KVPairs<uint64_t>& data,
                  ps::KVServer<uint64_t>* server) {
    if (meta.cmd == kCmdReport) {  // pull: x, inversions, applied per key
      ps::KVPairs<uint64_t> res;
      res.keys = data.keys;
      for (ps::Key k : data.keys) {
        res.vals.push_back(state[k].x);
        res.vals.push_back(inversions);
        res.vals.push_back(applied);
      }
      server->Response(meta, res);
      return;
    }
    for (size_t i = 0; i < data.keys.size(); ++i) {
      KeyState& s = state[data.keys[i]];
      uint64_t seq = data.vals[i];
      if (s.seen && seq < s.last_seq) ++inversions;
      s.seen = true;
      s.last_seq = seq;
      s.x = s.x * kA + seq;
      ++applied;
    }
    server->Response(meta);
  }
};

int RunWorker() {
  ps::KVWorker<uint64_t> kv(0, 0);
  std::vector<ps::Key> keys;
  for (int i = 0; i < FLAGS_keys; ++i) keys.push_back(static_cast<ps::Key>(i) * 1000003 + 7);
  ps::SArray<ps::Key> zkeys(keys);
  std::vector<int> ts;
  ts.reserve(FLAGS_pushes);
  std::vector<uint64_t> expect(keys.size(), 0);
  for (int p = 0; p < FLAGS_pushes; ++p) {
    uint64_t seq = static_cast<uint64_t>(p) + 1;
    ts.push_back(kv.ZPush(zkeys, ps::SArray<uint64_t>(keys.size(), seq)));
    for (auto& x : expect) x = x * kA + seq;
  }
  int failed = 0;
  for (int t : ts) failed += !kv.Wait(t).ok();
  std::vector<uint64_t> report;
  ps::Status s = kv.Wait(kv.Pull(keys, &report, nullptr, kCmdReport));
  if (!s.ok() || failed || report.size() != 3 * keys.size()) {
    std::fprintf(stderr, "FAILED: %d pushes failed; report: %s\n", failed, s.ToString().c_str());
    return 1;
  }
  uint64_t mismatched = 0, inversions = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    mismatched += report[3 * i] != expect[i];
  }
  // Inversions are counted per server; sum each server's count once.
  std::unordered_map<int, uint64_t> per_server;
  for (size_t i = 0; i < keys.size(); ++i) {
    per_server[ps::Postoffice::Get()->ring().ServerOf(keys[i])] = report[3 * i + 1];
  }
  for (auto& kvp : per_server) inversions += kvp.second;
  std::printf("pushes=%d keys=%zu servers_used=%zu inversions=%llu mismatched_keys=%llu\n",
              FLAGS_pushes, keys.size(), per_server.size(),
              static_cast<unsigned long long>(inversions),
              static_cast<unsigned long long>(mismatched));
  return inversions == 0 && mismatched == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0, argv[0]);
  std::unique_ptr<ps::KVServer<uint64_t>> server;
  if (ps::IsServer()) {
    server = std::make_unique<ps::KVServer<uint64_t>>(0);
    server->set_request_handle(FifoHandle());
  }
  int rc = ps::IsWorker() ? RunWorker() : 0;
  ps::Finalize(0, true);
  return rc;
}
