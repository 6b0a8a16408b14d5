// Integration: per-key FIFO. One worker issues many asynchronous pushes without
// waiting; each server applies the non-commutative update x <- A*x + seq (mod 2^64)
// per key and counts inversions (a push whose sequence number is below one already
// applied to that key). The worker replays the updates in issue order; the final
// values must match exactly and the inversion count must be 0.
//
// Every node prints its delivery counters (ps::NodeStats) in a "stats:" line at the end,
// and its van's coalescing counters in a "coalesced:" line;
// with --stats_every_ms it also samples them while the job runs (see StatsSampler).
#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ps/ps.h"

DEFINE_int32(pushes, 20000, "asynchronous pushes");
DEFINE_int32(keys, 16, "keys each push touches (spread over all servers)");
DEFINE_int32(stats_every_ms, 0,
             "if > 0: print this node's ps::NodeStats that often while the job runs, and "
             "before Finalize wait (every node) until all this node sent is acknowledged");

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

// How long a node waits, once every node is done, for its last messages to be
// acknowledged (a lost ACK costs a few resends of PS_RESEND_TIMEOUT, doubling).
constexpr std::chrono::seconds kAckDrainLimit(10);

void PrintStats(const ps::NodeStats& s, const char* extra) {
  std::printf(
      "stats: injected_drops=%llu resent=%llu duplicates=%llu held=%zu awaiting_ack=%zu "
      "from_gone_nodes=%llu%s\n",
      static_cast<unsigned long long>(s.injected_drops),
      static_cast<unsigned long long>(s.resent_messages),
      static_cast<unsigned long long>(s.duplicates), s.held_out_of_order, s.awaiting_ack,
      static_cast<unsigned long long>(s.from_gone_nodes), extra);
  std::fflush(stdout);
}

// Samples this node's ps::NodeStats every `every` on a thread of its own, printing one
// "stats-sample:" line each time and keeping the largest held_out_of_order and
// awaiting_ack seen, so that a driver sees how far they grow during the job, not only
// where they end. Thread safety: Stop and the accessors may be called from any thread.
class StatsSampler {
 public:
  explicit StatsSampler(std::chrono::milliseconds every) : thread_([this, every] { Run(every); }) {}
  ~StatsSampler() { Stop(); }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // "max_held_sampled=... max_awaiting_ack_sampled=... samples=..." for the final line.
  std::string Summary() {
    std::lock_guard<std::mutex> lock(mu_);
    return " max_held_sampled=" + std::to_string(max_held_) +
           " max_awaiting_ack_sampled=" + std::to_string(max_awaiting_) +
           " samples=" + std::to_string(samples_);
  }

 private:
  void Run(std::chrono::milliseconds every) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, every, [this] { return stop_; })) {
      ps::NodeStats s = ps::Postoffice::Get()->stats();
      max_held_ = std::max(max_held_, s.held_out_of_order);
      max_awaiting_ = std::max(max_awaiting_, s.awaiting_ack);
      ++samples_;
      std::printf("stats-sample: held=%zu awaiting_ack=%zu injected_drops=%llu resent=%llu\n",
                  s.held_out_of_order, s.awaiting_ack,
                  static_cast<unsigned long long>(s.injected_drops),
                  static_cast<unsigned long long>(s.resent_messages));
      std::fflush(stdout);
    }
  }

  std::mutex mu_;  // guards everything below but thread_
  std::condition_variable cv_;
  bool stop_ = false;
  size_t max_held_ = 0;
  size_t max_awaiting_ = 0;
  size_t samples_ = 0;
  std::thread thread_;  // last: starts once the fields above exist
};

// Once every node is done sending, waits (bounded) until all this node sent has been
// acknowledged, so that awaiting_ack in the final line says whether something never was.
// Zero must hold for a while: the scheduler leaves its own barrier before it has sent
// (and started tracking) the releases of the others.
void DrainAcks() {
  ps::Postoffice::Get()->Barrier(0, ps::kScheduler + ps::kServerGroup + ps::kWorkerGroup);
  auto deadline = std::chrono::steady_clock::now() + kAckDrainLimit;
  int zero_polls = 0;
  while (zero_polls < 20 && std::chrono::steady_clock::now() < deadline) {
    zero_polls = ps::Postoffice::Get()->stats().awaiting_ack == 0 ? zero_polls + 1 : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0, argv[0]);
  std::unique_ptr<StatsSampler> sampler;
  if (FLAGS_stats_every_ms > 0) {
    sampler = std::make_unique<StatsSampler>(std::chrono::milliseconds(FLAGS_stats_every_ms));
  }
  std::unique_ptr<ps::KVServer<uint64_t>> server;
  if (ps::IsServer()) {
    server = std::make_unique<ps::KVServer<uint64_t>>(0);
    server->set_request_handle(FifoHandle());
  }
  int rc = ps::IsWorker() ? RunWorker() : 0;
  if (sampler) {
    DrainAcks();
    sampler->Stop();
    PrintStats(ps::Postoffice::Get()->stats(), sampler->Summary().c_str());
  }
  ps::Finalize(0, true);
  if (!sampler) PrintStats(ps::Postoffice::Get()->stats(), "");
  if (ps::Van* van = ps::Postoffice::Get()->van()) {
    // Coalescing (PS_COALESCE): how many messages went in batches, and the batches.
    ps::VanStats v = van->stats();
    std::printf("coalesced: messages=%llu sent_batches=%llu received_batches=%llu\n",
                static_cast<unsigned long long>(v.coalesced_messages),
                static_cast<unsigned long long>(v.sent_batches),
                static_cast<unsigned long long>(v.received_batches));
  }
  return rc;
}
