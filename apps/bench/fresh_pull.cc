// fresh_pull: large pulls answered with a freshly allocated buffer, one at a time,
// after a few large pushes; prints the median pull time and the worker's memory.
//
//   tracker/launch -n 1 -s 1 -- build/apps/fresh_pull [bytes [pulls [pushes]]]
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

double StatusMiB(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.compare(0, prefix.size(), prefix) == 0) {
      return std::stod(line.substr(prefix.size())) / 1024.0;
    }
  }
  return -1;
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

const char* Role() {
  return ps::IsWorker() ? "worker" : ps::IsServer() ? "server" : "scheduler";
}

}  // namespace

int main(int argc, char* argv[]) {
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
  if (ps::IsWorker() && ps::MyRank() == 0) {
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
  // Once the work is done everywhere, every node idles a while before it reports, so
  // that one that gives memory back when idle has done so.
  if (!ps::IsScheduler()) ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup + ps::kServerGroup);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  std::printf("fresh_pull: %s rss after 2.5 s idle %.1f MiB (peak %.1f MiB)\n", Role(),
              StatusMiB("VmRSS"), StatusMiB("VmHWM"));
  std::fflush(stdout);
  ps::Finalize(0, true);
  delete server;
  return rc;
}
