#include "keys_workload.h"

#include <gflags/gflags.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "measure.h"
#include "ps/ps.h"
#include "workload_end.h"

DEFINE_string(key_counts, "10000,100000,1000000,10000000",
              "keys workload: keys per request, comma-separated");
DEFINE_string(key_layouts, "dense,strided,sparse",
              "keys workload: dense (0..n-1), strided (ps-lite's benchmark: 2^64 / n * i + "
              "rank), sparse (sorted, random gaps of 1 to 64)");
DECLARE_int32(rounds);
DECLARE_double(seconds);
DECLARE_int32(max_requests);

namespace bench {
namespace {

constexpr int kApp = 0;

// Pushes are acknowledged, pulls answered with zeros of the keys' count.
struct KeysServer {
  std::unique_ptr<ps::KVServer<float>> server;
  std::mutex mu;
  std::map<size_t, ps::SArray<float>> zeros;  // by count, reused
  void Handle(const ps::KVMeta& meta, const ps::KVPairs<float>& data, ps::KVServer<float>* s) {
    if (!meta.pull) {
      s->Response(meta);
      return;
    }
    ps::KVPairs<float> res;
    res.keys = data.keys;
    {
      std::lock_guard<std::mutex> lock(mu);
      ps::SArray<float>& z = zeros[data.keys.size()];
      if (z.empty()) z = ps::SArray<float>(data.keys.size(), 0.0f);
      res.vals = z;
    }
    s->Response(meta, res);
  }
};

ps::SArray<ps::Key> Layout(const std::string& layout, size_t n) {
  ps::SArray<ps::Key> keys(n);
  const ps::Key rank = static_cast<ps::Key>(ps::MyRank());
  std::mt19937_64 rng(n);
  ps::Key k = 0;
  for (size_t i = 0; i < n; ++i) {
    if (layout == "dense") {
      keys[i] = i;
    } else if (layout == "strided") {
      keys[i] = UINT64_MAX / n * i + rank;
    } else {
      keys[i] = k += 1 + rng() % 64;
    }
  }
  return keys;
}

// Wire bytes (sent and received by this worker) of one request of `issue`.
template <typename Issue>
double WireBytes(ps::KVWorker<float>* kv, Issue issue, int* failures) {
  ps::Van* van = ps::Postoffice::Get()->van();
  const ps::VanStats before = van->stats();
  *failures += !kv->Wait(issue()).ok();
  const ps::VanStats after = van->stats();
  return static_cast<double>(after.sent_bytes - before.sent_bytes + after.received_bytes -
                             before.received_bytes);
}

// Keys per second of copying the keys and their values once (the memory's ceiling for
// any transport on this host), the median of five.
double MemcpyKeysPerSecond(const ps::SArray<ps::Key>& keys) {
  const size_t n = keys.size();
  std::vector<ps::Key> key_copy(n);
  std::vector<float> vals(n, 1.0f), val_copy(n);
  std::vector<double> rates;
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    std::memcpy(key_copy.data(), keys.data(), n * sizeof(ps::Key));
    std::memcpy(val_copy.data(), vals.data(), n * sizeof(float));
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    rates.push_back(s > 0 ? n / s : 0);
  }
  return Percentile(rates, 0.5);
}

}  // namespace

std::shared_ptr<void> StartKeysServer() {
  auto s = std::make_shared<KeysServer>();
  s->server = std::make_unique<ps::KVServer<float>>(kApp);
  KeysServer* raw = s.get();
  s->server->set_request_handle(
      [raw](const ps::KVMeta& m, const ps::KVPairs<float>& d, ps::KVServer<float>* server) {
        raw->Handle(m, d, server);
      });
  return s;
}

int RunKeysWorkload(bool csv) {
  if (ps::MyRank() != 0) return EndWorkerRun(0);
  ps::KVWorker<float> fast(kApp, 0);  // the defaults: key frames and key caching
  ps::KVWorker<float> plain(kApp, 1);
  plain.set_key_encoding(false);
  plain.set_key_caching(false);
  int failures = 0;
  const Budget budget{FLAGS_rounds, FLAGS_seconds, FLAGS_max_requests};
  if (csv) {
    std::printf("op,layout,keys,keys_per_s,raw_keys_per_s,ratio,bytes_per_key,"
                "raw_bytes_per_key,memcpy_keys_per_s,of_memcpy\n");
  } else {
    std::printf("%-4s %-7s %9s %12s %12s %6s %9s %9s %12s %9s\n", "op", "layout", "keys",
                "keys/s", "raw keys/s", "ratio", "B/key", "raw B/key", "memcpy k/s",
                "of memcpy");
  }
  for (const std::string& layout : SplitList(FLAGS_key_layouts)) {
    for (const std::string& count_text : SplitList(FLAGS_key_counts)) {
      const size_t n = std::stoull(count_text);
      const ps::SArray<ps::Key> keys = Layout(layout, n);
      const ps::SArray<float> vals(n, 0.5f);
      ps::SArray<float> out_fast(n), out_plain(n);
      const double memcpy_rate = MemcpyKeysPerSecond(keys);
      for (const char* op : {"push", "pull"}) {
        const bool push = std::string(op) == "push";
        auto issue_fast = [&] {
          return push ? fast.ZPush(keys, vals) : fast.ZPull(keys, &out_fast);
        };
        auto issue_plain = [&] {
          return push ? plain.ZPush(keys, vals) : plain.ZPull(keys, &out_plain);
        };
        auto [f, p] = MeasurePair(
            budget, n * sizeof(float), 1, issue_fast,
            [&](int ts) { failures += !fast.Wait(ts).ok(); }, issue_plain,
            [&](int ts) { failures += !plain.Wait(ts).ok(); });
        const double fast_bytes = WireBytes(&fast, issue_fast, &failures) / n;
        const double plain_bytes = WireBytes(&plain, issue_plain, &failures) / n;
        // MB/s of values of one float a key: keys/s = MB/s * 1e6 / 4.
        const double fast_rate = f.mbps * 1e6 / sizeof(float);
        const double plain_rate = p.mbps * 1e6 / sizeof(float);
        const double ratio = plain_rate > 0 ? fast_rate / plain_rate : 0;
        const double of_memcpy = memcpy_rate > 0 ? fast_rate / memcpy_rate : 0;
        std::printf(csv ? "%s,%s,%zu,%.0f,%.0f,%.3f,%.3f,%.3f,%.0f,%.4f\n"
                        : "%-4s %-7s %9zu %12.4g %12.4g %6.2f %9.3f %9.3f %12.4g %9.4f\n",
                    op, layout.c_str(), n, fast_rate, plain_rate, ratio, fast_bytes,
                    plain_bytes, memcpy_rate, of_memcpy);
        std::fflush(stdout);
      }
    }
  }
  const ps::RequestPipeline::Counters c = fast.counters();
  std::printf("# with the defaults: %llu parts, %llu of them as kept list ids, %llu sent "
              "again with their keys\n",
              static_cast<unsigned long long>(c.parts),
              static_cast<unsigned long long>(c.cached_key_lists),
              static_cast<unsigned long long>(c.key_lists_resent));
  return EndWorkerRun(failures);
}

}  // namespace bench
