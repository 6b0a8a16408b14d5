#include "shm_workload.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "measure.h"
#include "ps/ps.h"
#include "store_handle.h"
#include "workload_end.h"

DEFINE_string(shm_sizes, "1048576,16777216", "shm workload: value sizes in bytes");
DEFINE_string(shm_ops, "push,pull,pull_into",
              "shm workload: push; pull (into an empty SArray: the received frame itself); "
              "pull_into (into a pre-sized SArray: one more copy, on the worker)");
DECLARE_string(windows);
DECLARE_int32(rounds);
DECLARE_double(seconds);
DECLARE_int32(max_requests);

namespace bench {
namespace {

constexpr int kApp = 0;
// Commands of the shm workload's server handle (pulls of key 0).
constexpr int kCmdSetShm = 11;    // value 1 or 0: Van::SetPath("shm") on the server
constexpr int kCmdShmStats = 12;  // answers the server van's shm_sent_frames, fallbacks

// The kv workload's store handle (values kept by reference, pulls answered with
// them), so what is measured is the path, not arithmetic; plus the two commands.
struct ShmServer {
  std::unique_ptr<ps::KVServer<float>> server;
  StoreHandle store;
  void Handle(const ps::KVMeta& meta, const ps::KVPairs<float>& data, ps::KVServer<float>* s) {
    if (meta.cmd != kCmdSetShm && meta.cmd != kCmdShmStats) {
      store(meta, data, s);
      return;
    }
    ps::Van* van = ps::Postoffice::Get()->van();
    if (meta.cmd == kCmdSetShm) van->SetPath("shm", !data.vals.empty() && data.vals[0] != 0);
    ps::VanStats v = van->stats();
    ps::KVPairs<float> res;
    res.keys = data.keys;
    res.vals = ps::SArray<float>{static_cast<float>(v.shm_sent_frames),
                                 static_cast<float>(v.shm_fallback_frames)};
    res.lens = ps::SArray<int>{2};
    s->Response(meta, res);
  }
};

// The server van's shared-memory counters: {shm_sent_frames, shm_fallback_frames}.
std::vector<float> ServerShm(ps::KVWorker<float>* kv, int cmd, float value) {
  ps::SArray<ps::Key> key{0};
  ps::SArray<float> vals{value};
  ps::SArray<float> out;
  ps::SArray<int> lens;
  // A push-pull carries the value to the handle and brings the counters back.
  kv->Wait(kv->ZPushPull(key, vals, &out, &lens, cmd));
  return std::vector<float>(out.begin(), out.end());
}

// Both vans on the shared-memory path (true) or on the socket (false).
void UseShm(ps::KVWorker<float>* kv, bool on) {
  ps::Postoffice::Get()->van()->SetPath("shm", on);
  ServerShm(kv, kCmdSetShm, on ? 1.0f : 0.0f);
}

enum class Path { kShm, kSocket, kMemcpy };

}  // namespace

std::shared_ptr<void> StartShmServer() {
  auto state = std::make_shared<ShmServer>();
  state->server = std::make_unique<ps::KVServer<float>>(kApp);
  ShmServer* raw = state.get();
  state->server->set_request_handle([raw](const ps::KVMeta& m, const ps::KVPairs<float>& d,
                                          ps::KVServer<float>* s) { raw->Handle(m, d, s); });
  return state;
}

int RunShmWorkload(bool csv) {
  if (ps::MyRank() != 0) {
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
    return 0;
  }
  ps::KVWorker<float> kv(kApp, 0);
  kv.set_chunking(false);  // one message per request: the path, not the pipeline
  int failures = 0;
  if (csv) {
    std::printf(
        "op,size,window,shm_mbps,socket_mbps,memcpy_mbps,shm_vs_memcpy,socket_vs_memcpy,"
        "shm_p50_us,socket_p50_us,memcpy_p50_us,shm_frames,fallback_frames\n");
  } else {
    std::printf("%-9s %9s %6s %10s %10s %10s %8s %8s %9s %9s %9s %7s %7s\n", "op", "size", "window",
                "shm MB/s", "sock MB/s", "memcpy", "shm/cpy", "sock/cpy", "shm p50", "sock p50",
                "cpy p50", "frames", "fallbk");
  }
  for (const std::string& op : SplitList(FLAGS_shm_ops)) {
    if (op != "push" && op != "pull" && op != "pull_into") {
      std::fprintf(stderr, "bench: unknown shm op '%s' (push, pull, pull_into)\n", op.c_str());
      return 2;
    }
    for (const std::string& size_text : SplitList(FLAGS_shm_sizes)) {
      const uint64_t size = std::stoull(size_text) / 4 * 4;
      const size_t n = size / 4;
      ps::SArray<float> vals(n, 1.5f);
      ps::SArray<ps::Key> keys{static_cast<ps::Key>(size)};
      failures += !kv.Wait(kv.ZPush(keys, vals)).ok();
      std::vector<float> dst(n, 0.0f);  // memcpy's destination, warm
      for (const std::string& window_text : SplitList(FLAGS_windows)) {
        const int window = std::max(1, std::stoi(window_text));
        // Pull outputs live until their request finishes; requests finish in order, so
        // a ring of `window` outputs suffices. Empty ones receive the frame itself.
        std::vector<ps::SArray<float>> outs(window);
        std::vector<ps::SArray<float>> sized(window, ps::SArray<float>(n, 0.0f));
        size_t next = 0;
        auto issue = [&]() -> int {
          if (op == "push") return kv.ZPush(keys, vals);
          size_t i = next++ % window;
          if (op == "pull_into") return kv.ZPull(keys, &sized[i]);
          outs[i].clear();
          return kv.ZPull(keys, &outs[i]);
        };
        auto complete = [&](int ts) { failures += !kv.Wait(ts).ok(); };
        auto copy = [&]() -> int {
          std::memcpy(dst.data(), vals.data(), size);
          asm volatile("" : : "r"(dst.data()) : "memory");  // keep the copy
          return 0;
        };
        Budget budget{FLAGS_rounds, FLAGS_seconds, FLAGS_max_requests};
        const int rounds = std::max(1, budget.rounds);
        const double seconds = budget.seconds / rounds;
        const int cap = std::max(1, budget.max_requests / rounds);
        Tally tally[3];
        uint64_t shm_frames = 0, fallbacks = 0;
        for (int r = 0; r < rounds; ++r) {
          // Each round in another order, so that no path always follows the same one.
          for (int turn = 0; turn < 3; ++turn) {
            const Path path = static_cast<Path>((turn + r) % 3);
            if (path == Path::kMemcpy) {
              for (int i = 0; i < 2; ++i) copy();  // warm-up
              MeasureRound(
                  size, 1, seconds, cap, copy, [](int) {}, &tally[2]);
              tally[2].EndRound();
              continue;
            }
            UseShm(&kv, path == Path::kShm);
            for (int i = 0; i < 2; ++i) complete(issue());  // warm-up on this path
            ps::VanStats v0 = ps::Postoffice::Get()->van()->stats();
            std::vector<float> s0 = ServerShm(&kv, kCmdShmStats, 0);
            Tally* t = &tally[path == Path::kShm ? 0 : 1];
            MeasureRound(size, window, seconds, cap, issue, complete, t);
            t->EndRound();
            if (path == Path::kShm) {
              ps::VanStats v1 = ps::Postoffice::Get()->van()->stats();
              std::vector<float> s1 = ServerShm(&kv, kCmdShmStats, 0);
              // Pushes are sent by the worker, pull answers by the server.
              if (op == "push") {
                shm_frames += v1.shm_sent_frames - v0.shm_sent_frames;
                fallbacks += v1.shm_fallback_frames - v0.shm_fallback_frames;
              } else if (s0.size() == 2 && s1.size() == 2) {
                shm_frames += static_cast<uint64_t>(s1[0] - s0[0]);
                fallbacks += static_cast<uint64_t>(s1[1] - s0[1]);
              }
            }
          }
        }
        UseShm(&kv, true);
        Result results[3];
        for (int i = 0; i < 3; ++i) results[i] = tally[i].Summary();
        const Result &shm = results[0], &sock = results[1], &cpy = results[2];
        const double rs = cpy.mbps > 0 ? shm.mbps / cpy.mbps : 0;
        const double rt = cpy.mbps > 0 ? sock.mbps / cpy.mbps : 0;
        if (csv) {
          std::printf("%s,%llu,%d,%.1f,%.1f,%.1f,%.3f,%.3f,%.1f,%.1f,%.1f,%llu,%llu\n", op.c_str(),
                      static_cast<unsigned long long>(size), window, shm.mbps, sock.mbps, cpy.mbps,
                      rs, rt, shm.p50_us, sock.p50_us, cpy.p50_us,
                      static_cast<unsigned long long>(shm_frames),
                      static_cast<unsigned long long>(fallbacks));
        } else {
          std::printf(
              "%-9s %9llu %6d %10.1f %10.1f %10.1f %8.3f %8.3f %9.1f %9.1f %9.1f %7llu "
              "%7llu\n",
              op.c_str(), static_cast<unsigned long long>(size), window, shm.mbps, sock.mbps,
              cpy.mbps, rs, rt, shm.p50_us, sock.p50_us, cpy.p50_us,
              static_cast<unsigned long long>(shm_frames),
              static_cast<unsigned long long>(fallbacks));
        }
        std::fflush(stdout);
      }
    }
  }
  return EndWorkerRun(failures);
}

}  // namespace bench
