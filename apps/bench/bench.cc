// bench: HerdPS push / pull / push-pull goodput and latency, next to the raw
// transport (plain ZeroMQ between the same two processes) measured in the same run.
//
//   tracker/launch -n 1 -s 1 -- build/apps/bench [--csv]
//
// Worker 0 drives; server 0 answers both HerdPS requests and raw ZeroMQ requests.
// The server's handle stores pushed values by reference and answers pulls with them,
// so the figures measure the system (framing, routing, request tracking, copies), not
// arithmetic; --server_handle=fresh answers every pull with a newly allocated copy, and
// --server_handle=add uses KVServerDefaultHandle instead.
#include <gflags/gflags.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "chunk_workload.h"
#include "keys_workload.h"
#include "codec_workload.h"
#include "measure.h"
#include "node_memory.h"
#include "optimizer_workload.h"
#include "ps/ps.h"
#include "raw_transport.h"
#include "shm_workload.h"
#include "store_handle.h"
#include "waiters_workload.h"

DEFINE_string(sizes, "64,4096,65536,1048576,16777216", "value sizes in bytes, comma-separated");
DEFINE_string(ops, "push,pull,pushpull", "operations to measure: push, pull, pushpull");
DEFINE_string(windows, "1,8", "requests in flight, comma-separated (1 = one at a time)");
DEFINE_double(seconds, 1.5, "measuring time per point and per transport");
DEFINE_int32(rounds, 7,
             "alternating HerdPS / raw rounds per point; goodput is the median over rounds");
DEFINE_int32(max_requests, 20000, "cap on requests per point and transport");
DEFINE_bool(csv, false,
            "print op,size,window,herdps_mbps,raw_mbps,ratio,... lines instead of a table");
DEFINE_string(server_handle, "store",
              "server handle: store (answers pulls by reference), fresh (answers every pull "
              "with a newly allocated copy) or add (KVServerDefaultHandle)");
DEFINE_double(raw_timeout_s, 30,
              "kv workload: the raw ZeroMQ baseline gives up (exit 1) when its server does not "
              "answer within this many seconds");
DEFINE_string(workload, "kv",
              "kv: push/pull against raw ZeroMQ; optimizer: server-side optimizer throughput; "
              "chunks: balance and goodput of large tensors chunked vs whole; codecs: gradient "
              "codecs' throughput and push goodput; shm: push/pull through shared memory vs the "
              "socket vs memcpy; waiters: latency of several threads each waiting on its own requests, "
              "receiving in Wait vs not; keys: 1e4 to 1e7 one-float keys per request, key "
              "frames and key caching vs raw keys vs memcpy");

namespace {


void PrintMemory(const char* who, double rss_start) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  ps::VanStats van = ps::Postoffice::Get()->van()->stats();
  std::printf(
      "# memory %s: peak_rss_mib=%.1f rss_start_mib=%.1f rss_end_mib=%.1f minor_faults=%ld "
      "received_mib=%.1f received_copied_mib=%.3f received_messages=%llu "
      "received_in_wait=%llu\n",
      who, bench::PeakRssMiB(), rss_start, bench::CurrentRssMiB(), usage.ru_minflt,
      van.received_bytes / 1048576.0, van.received_copied_bytes / 1048576.0,
      static_cast<unsigned long long>(van.received_messages),
      static_cast<unsigned long long>(van.received_in_wait));
}

// RSS once the node has been idle long enough to give kept buffers back
// (PS_IDLE_TRIM_MS), with the time waited.
void PrintIdleMemory(const char* who) {
  const ps::Config& config = ps::Postoffice::Get()->config();
  if (config.idle_trim_ms <= 0) return;
  int wait_ms = config.idle_trim_ms * 2 + 200;  // the trim runs on a half-period tick
  std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  std::printf("# memory %s: rss_idle_mib=%.1f (after %d ms idle; PS_IDLE_TRIM_MS=%d)\n", who,
              bench::CurrentRssMiB(), wait_ms, config.idle_trim_ms);
}

int RunDriver() {
  ps::KVWorker<float> kv(0, 0);
  // Find the server's raw endpoint.
  ps::SArray<ps::Key> port_key{0};
  ps::SArray<float> port;
  ps::Status s = kv.Wait(kv.ZPull(port_key, &port, nullptr, bench::kCmdRawPort));
  if (!s.ok() || port.size() != 1) {
    std::fprintf(stderr, "bench: cannot learn the raw port: %s\n", s.ToString().c_str());
    return 1;
  }
  std::string host;
  for (const ps::Node& n : ps::Postoffice::Get()->nodes()) {
    if (n.role == ps::Node::kServerRole && n.rank == 0) host = n.host;
  }
  bench::RawClient raw;
  if (!raw.Connect("tcp://" + host + ":" + std::to_string(static_cast<int>(port[0])),
                   static_cast<int>(FLAGS_raw_timeout_s * 1000))) {
    std::fprintf(stderr, "bench: cannot connect the raw socket\n");
    return 1;
  }
  double rss_start = bench::CurrentRssMiB();
  if (FLAGS_csv) {
    std::printf(
        "op,size,window,herdps_mbps,raw_mbps,ratio,herdps_p50_us,herdps_p99_us,raw_p50_us,"
        "raw_p99_us,herdps_requests,raw_requests\n");
  } else {
    std::printf("%-9s %10s %6s %12s %12s %7s %11s %11s %11s %11s\n", "op", "size", "window",
                "herdps MB/s", "raw MB/s", "ratio", "p50 us", "p99 us", "raw p50", "raw p99");
  }
  std::fflush(stdout);  // the header now, the figures as they come
  int failures = 0;
  for (const std::string& op : bench::SplitList(FLAGS_ops)) {
    if (op != "push" && op != "pull" && op != "pushpull") {
      std::fprintf(stderr, "bench: unknown op '%s' (push, pull, pushpull)\n", op.c_str());
      return 2;
    }
    for (const std::string& size_text : bench::SplitList(FLAGS_sizes)) {
      uint64_t size = std::stoull(size_text);
      if (size < sizeof(float) || size % sizeof(float)) {
        std::fprintf(stderr, "bench: size %s is not a positive multiple of 4\n",
                     size_text.c_str());
        return 2;
      }
      ps::SArray<float> vals(size / sizeof(float), 1.0f);
      // A key per size: a key keeps the length of its first push.
      ps::SArray<ps::Key> keys{static_cast<ps::Key>(size)};
      // Pulls need the key to exist; with the add handle the values grow, harmlessly.
      kv.Wait(kv.ZPush(keys, vals));
      for (const std::string& window_text : bench::SplitList(FLAGS_windows)) {
        int window = std::max(1, std::stoi(window_text));
        // Pull outputs must live until their request finishes. Requests finish in
        // issue order and at most `window` are in flight, so a ring of `window` arrays
        // suffices. Each starts empty so that the answer is received without a copy.
        std::vector<ps::SArray<float>> outs(window);
        size_t next_out = 0;
        bench::Op raw_op = op == "push"   ? bench::Op::kPush
                           : op == "pull" ? bench::Op::kPull
                                          : bench::Op::kPushPull;
        bench::Budget budget{FLAGS_rounds, FLAGS_seconds, FLAGS_max_requests};
        auto [mine, theirs] = bench::MeasurePair(
            budget, size, window,
            [&]() -> int {
              if (op == "push") return kv.ZPush(keys, vals);
              ps::SArray<float>* out = &outs[next_out++ % outs.size()];
              out->clear();
              return op == "pull" ? kv.ZPull(keys, out) : kv.ZPushPull(keys, vals, out);
            },
            [&](int ts) { failures += !kv.Wait(ts).ok(); },
            [&]() -> int {
              raw.Send(raw_op, reinterpret_cast<const char*>(vals.data()), size);
              return 0;
            },
            [&](int) { raw.Receive(); });
        double ratio = theirs.mbps > 0 ? mine.mbps / theirs.mbps : 0;
        if (FLAGS_csv) {
          std::printf("%s,%llu,%d,%.2f,%.2f,%.3f,%.1f,%.1f,%.1f,%.1f,%d,%d\n", op.c_str(),
                      static_cast<unsigned long long>(size), window, mine.mbps, theirs.mbps,
                      ratio, mine.p50_us, mine.p99_us, theirs.p50_us, theirs.p99_us,
                      mine.requests, theirs.requests);
        } else {
          std::printf("%-9s %10llu %6d %12.1f %12.1f %7.3f %11.1f %11.1f %11.1f %11.1f\n",
                      op.c_str(), static_cast<unsigned long long>(size), window, mine.mbps,
                      theirs.mbps, ratio, mine.p50_us, mine.p99_us, theirs.p50_us,
                      theirs.p99_us);
        }
        std::fflush(stdout);
        if (failures) {
          std::fprintf(stderr, "bench: %d HerdPS requests failed (see the log)\n", failures);
          raw.Quit();
          return 1;
        }
      }
    }
  }
  raw.Quit();
  std::printf("# in-flight requests tracked at the end: %zu\n", kv.NumInFlight());
  PrintMemory("worker 0", rss_start);
  PrintIdleMemory("worker 0");
  return 0;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::SetUsageMessage("bench: HerdPS vs raw ZeroMQ goodput (run under tracker/launch)");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_server_handle != "store" && FLAGS_server_handle != "fresh" &&
      FLAGS_server_handle != "add") {
    std::fprintf(stderr, "bench: --server_handle must be store, fresh or add\n");
    return 2;
  }
  if (FLAGS_workload != "kv" && FLAGS_workload != "optimizer" && FLAGS_workload != "chunks" &&
      FLAGS_workload != "codecs" && FLAGS_workload != "shm" && FLAGS_workload != "waiters" &&
      FLAGS_workload != "keys") {
    std::fprintf(stderr,
                 "bench: --workload must be kv, optimizer, chunks, codecs, shm, waiters or keys\n");
    return 2;
  }
  try {
    ps::Start(0, argv[0]);
    if (FLAGS_workload == "optimizer") {
      double rss_start = bench::CurrentRssMiB();
      std::shared_ptr<void> servers;
      if (ps::IsServer()) servers = bench::StartOptimizerServers();
      int rc = ps::IsWorker() ? bench::RunOptimizerWorkload(FLAGS_csv) : 0;
      ps::Finalize(0, true);
      if (servers) bench::ReportOptimizerServerMemory(servers, rss_start);
      return rc;
    }
    if (FLAGS_workload == "shm") {
      std::shared_ptr<void> server;
      if (ps::IsServer()) server = bench::StartShmServer();
      int rc = ps::IsWorker() ? bench::RunShmWorkload(FLAGS_csv) : 0;
      ps::Finalize(0, true);
      return rc;
    }
    if (FLAGS_workload == "keys") {
      std::shared_ptr<void> server;
      if (ps::IsServer()) server = bench::StartKeysServer();
      int rc = ps::IsWorker() ? bench::RunKeysWorkload(FLAGS_csv) : 0;
      ps::Finalize(0, true);
      return rc;
    }
    if (FLAGS_workload == "waiters") {
      std::shared_ptr<void> server;
      if (ps::IsServer()) server = bench::StartWaitersServer();
      int rc = ps::IsWorker() ? bench::RunWaitersWorkload(FLAGS_csv) : 0;
      ps::Finalize(0, true);
      return rc;
    }
    if (FLAGS_workload == "chunks" || FLAGS_workload == "codecs") {
      const bool chunks = FLAGS_workload == "chunks";
      std::shared_ptr<void> servers;
      if (ps::IsServer()) servers = chunks ? bench::StartChunkServers() : bench::StartCodecServers();
      int rc = 0;
      if (ps::IsWorker()) rc = chunks ? bench::RunChunkWorkload(FLAGS_csv) : bench::RunCodecWorkload(FLAGS_csv);
      ps::Finalize(0, true);
      return rc;
    }
    std::unique_ptr<ps::KVServer<float>> server;
    bench::RawServer raw;
    double rss_start = bench::CurrentRssMiB();
    if (ps::IsServer()) {
      server = std::make_unique<ps::KVServer<float>>(0);
      bench::StoreHandle handle;
      handle.raw_port = raw.Start(ps::Postoffice::Get()->my_node().host);
      if (handle.raw_port < 0) {
        std::fprintf(stderr, "bench: cannot bind the raw socket\n");
        return 1;
      }
      if (FLAGS_server_handle != "add") {
        handle.fresh_pulls = FLAGS_server_handle == "fresh";
        server->set_request_handle(handle);
      } else {
        ps::KVServerDefaultHandle<float> add;
        int port = handle.raw_port;
        server->set_request_handle(
            [add, port](const ps::KVMeta& m, const ps::KVPairs<float>& d,
                        ps::KVServer<float>* s) mutable {
              if (m.cmd == bench::kCmdRawPort) {
                ps::KVPairs<float> res;
                res.keys = d.keys;
                res.vals = ps::SArray<float>(d.keys.size(), static_cast<float>(port));
                s->Response(m, res);
                return;
              }
              add(m, d, s);
            });
      }
    }
    int rc = 0;
    if (ps::IsWorker() && ps::MyRank() == 0) rc = RunDriver();
    ps::Finalize(0, true);
    if (ps::IsServer()) {
      raw.Stop();
      PrintMemory(("server " + std::to_string(ps::MyRank())).c_str(), rss_start);
    }
    return rc;
  } catch (const ps::Error& e) {
    std::fprintf(stderr, "bench: %s\n", e.what());
    return 1;
  }
}
