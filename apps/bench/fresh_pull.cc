// fresh_pull: large pulls answered with a freshly allocated buffer, one at a time,
// after a few large pushes; prints the median pull time and the worker's memory.
//
//   tracker/launch -n 1 -s 1 -- build/apps/fresh_pull [bytes [pulls [pushes]]]
//   tracker/launch -n 1 -s 1 -- build/apps/fresh_pull sequence [rounds]
//
// `sequence` runs cells of pushes and then pulls of 64 B (windows 1, 8 and 64), 1 MiB
// and 16 MiB (windows 1 and 8; a window is that many requests in flight, on keys
// 1..window), in that order in one process, and prints each cell's requests/s and MB/s:
// small requests many in flight, and how a node copes with large fresh buffers once
// earlier cells have shaped its allocator's heap, which a lone cell does not show. Each
// cell is `rounds` batches of `window` requests (default 10; 1 MiB cells 8 times as
// many, 64 B cells 100 times). With several workers, each runs the sequence.
//
// It uses only ps-lite's API (ps/ps.h, KVWorker/KVServer with std::vector), so the same
// source also builds against dmlc/ps-lite (docs/performance.md shows how) and the two
// systems can be compared with one program. The server's handle builds every answer
// in a new buffer, as ps-lite's own benchmark does: that measures how a node's memory
// allocator copes with a large buffer made and freed per request, on both sides.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "ps/ps.h"

namespace {

// A "Field:   123 kB" line of a /proc file, in MiB; -1 when the file has no such field.
double ProcMiB(const char* file, const char* field) {
  std::ifstream in(file);
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.compare(0, prefix.size(), prefix) == 0) {
      return std::stod(line.substr(prefix.size())) / 1024.0;
    }
  }
  return -1;
}

double StatusMiB(const char* field) { return ProcMiB("/proc/self/status", field); }

// RSS counts a page of shared memory (a shared-memory ring between two nodes) in every
// process that maps it; PSS splits it between them, so the PSS of two nodes adds up to
// what they hold together. RssShmem is the shared memory resident in this process.
void PrintMemory(const char* role, const char* when) {
  std::printf("fresh_pull: %s memory %s: rss %.1f MiB, pss %.1f MiB, shared memory %.1f MiB "
              "(peak rss %.1f MiB)\n",
              role, when, StatusMiB("VmRSS"), ProcMiB("/proc/self/smaps_rollup", "Pss"),
              StatusMiB("RssShmem"), StatusMiB("VmHWM"));
  std::fflush(stdout);
}

// The pull's cmd carries the answer's size in bytes.
void FreshAnswer(const ps::KVMeta& meta, const ps::KVPairs<float>& data,
                 ps::KVServer<float>* server) {
  ps::KVPairs<float> res;
  if (meta.pull) {
    res.keys = data.keys;
    res.vals.resize(static_cast<size_t>(meta.cmd) / sizeof(float), 1.0f);
  }
  server->Response(meta, res);
}

// One cell of the sequence: `rounds` batches of `window` requests of `bytes` each (a
// push, or a pull answered from a fresh buffer), issued together and then waited for.
// Returns requests/s, or -1 when a pull came back wrong.
double RunCell(ps::KVWorker<float>* kv, bool push, size_t bytes, int window, int rounds) {
  const size_t floats = bytes / sizeof(float);
  std::vector<float> pushed(floats, 2.0f);
  std::vector<std::vector<float>> out(static_cast<size_t>(window));
  std::vector<int> ts(static_cast<size_t>(window));
  bool wrong = false;
  const auto begin = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r) {
    for (int w = 0; w < window; ++w) {
      std::vector<ps::Key> key{static_cast<ps::Key>(w + 1)};
      out[w] = std::vector<float>();  // a fresh output each time, as an app's loop has
      ts[w] = push ? kv->Push(key, pushed)
                   : kv->Pull(key, &out[w], nullptr, static_cast<int>(bytes));
    }
    for (int w = 0; w < window; ++w) {
      kv->Wait(ts[w]);
      if (!push) wrong = wrong || out[w].size() != floats || out[w].back() != 1.0f;
    }
  }
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return wrong ? -1 : static_cast<double>(window) * rounds / s;
}

// The cells in order; 0, or 1 after a pull that came back wrong.
int RunSequence(int rounds) {
  ps::KVWorker<float> kv(0, 0);
  for (size_t bytes : {size_t{64}, size_t{1} << 20, size_t{16} << 20}) {
    const bool small = bytes < (size_t{1} << 20);
    const int cell_rounds =
        small ? rounds * 100 : bytes < (size_t{16} << 20) ? rounds * 8 : rounds;
    const std::vector<int> windows =
        small ? std::vector<int>{1, 8, 64} : std::vector<int>{1, 8};
    for (int window : windows) {
      for (bool push : {true, false}) {
        double per_s = RunCell(&kv, push, bytes, window, cell_rounds);
        if (per_s < 0) {
          std::fprintf(stderr, "fresh_pull: a %zu-byte pull came back wrong\n", bytes);
          return 1;
        }
        std::printf("fresh_pull: sequence %s %zu B window %d: %.0f requests/s, %.1f MB/s\n",
                    push ? "push" : "pull", bytes, window, per_s, per_s * bytes / 1e6);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

const char* Role() {
  return ps::IsWorker() ? "worker" : ps::IsServer() ? "server" : "scheduler";
}

}  // namespace

int main(int argc, char* argv[]) {
  const bool sequence = argc > 1 && std::string(argv[1]) == "sequence";
  const int rounds = sequence && argc > 2 ? std::atoi(argv[2]) : 10;
  if (sequence && (rounds < 1 || rounds > 100000)) {
    std::fprintf(stderr, "usage: fresh_pull sequence [rounds, 1..100000]\n");
    return 2;
  }
  if (sequence) argc = 1;  // the rest keeps its defaults
  long long bytes = argc > 1 ? std::atoll(argv[1]) : 16 << 20;
  int pulls = argc > 2 ? std::atoi(argv[2]) : 100;
  int pushes = argc > 3 ? std::atoi(argv[3]) : 20;
  if (bytes < 4 || bytes % 4 || bytes > (1LL << 30) || pulls < 1 || pushes < 0) {
    std::fprintf(stderr, "usage: fresh_pull [bytes (multiple of 4, <= 1 GiB) [pulls >= 1 "
                         "[pushes >= 0]]]\n");
    return 2;
  }
  ps::Start(0);
  ps::KVServer<float>* server = nullptr;
  if (ps::IsServer()) {
    server = new ps::KVServer<float>(0);
    server->set_request_handle(FreshAnswer);
  }
  int rc = 0;
  if (sequence && ps::IsWorker()) {
    rc = RunSequence(rounds);
  } else if (ps::IsWorker() && ps::MyRank() == 0) {
    ps::KVWorker<float> kv(0, 0);
    std::vector<ps::Key> keys{1};
    std::vector<float> pushed(static_cast<size_t>(bytes) / sizeof(float), 2.0f);
    for (int i = 0; i < pushes; ++i) kv.Wait(kv.Push(keys, pushed));
    std::vector<double> ms;
    for (int i = 0; i < pulls && rc == 0; ++i) {
      std::vector<float> out;
      auto begin = std::chrono::steady_clock::now();
      kv.Wait(kv.Pull(keys, &out, nullptr, static_cast<int>(bytes)));
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             begin)
                       .count());
      if (out.size() != pushed.size() || out.front() != 1.0f || out.back() != 1.0f) {
        std::fprintf(stderr, "fresh_pull: pull %d came back wrong (%zu values)\n", i,
                     out.size());
        rc = 1;
      }
    }
    if (rc == 0) {
      std::sort(ms.begin(), ms.end());
      double p50 = ms[ms.size() / 2];
      std::printf("fresh_pull: %lld bytes, %d pulls after %d pushes: p50 %.2f ms = %.0f MB/s, "
                  "p90 %.2f ms; worker rss %.1f MiB\n",
                  bytes, pulls, pushes, p50, bytes / 1e3 / p50, ms[ms.size() * 9 / 10],
                  StatusMiB("VmRSS"));
    }
  }
  // A worker reports its memory as its work ends, with everything it kept for speed.
  // The run ends at a barrier of workers and servers; a second one makes sure every
  // node is through the first, so no node reads its memory while a peer may still be
  // giving back memory they share (HerdPS gives memory back at a barrier). Then every
  // node reports, idles a while and reports again.
  if (!ps::IsScheduler()) {
    if (ps::IsWorker()) PrintMemory(Role(), "right after the work");
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup + ps::kServerGroup);
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup + ps::kServerGroup);
    PrintMemory(Role(), "after the run's barrier");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  PrintMemory(Role(), "after 2.5 s idle");
  ps::Finalize(0, true);
  delete server;
  return rc;
}
