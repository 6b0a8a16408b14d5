#include "chunk_workload.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "measure.h"
#include "ps/optimizer_server.h"
#include "ps/ps.h"
#include "workload_end.h"

DEFINE_int32(model_tensors, 4, "chunks workload: tensors in the model whose balance is reported");
DEFINE_double(model_tensor_mib, 16, "chunks workload: size of each model tensor in MiB");
DEFINE_double(big_tensor_mib, 64, "chunks workload: size of the tensor whose goodput is measured");
DECLARE_int32(rounds);
DECLARE_double(seconds);
DECLARE_int32(max_requests);

namespace bench {
namespace {

constexpr int kChunkedApp = 1;
constexpr int kWholeApp = 2;
constexpr int kStatsApp = 3;  // SimpleApp: "bytes" -> "<chunked app bytes> <whole app bytes>"

struct Servers {
  std::unique_ptr<ps::OptimizerServer> chunked, whole;
  std::unique_ptr<ps::SimpleApp> stats;
};

ps::OptimizerServerOptions Sgd() {
  ps::OptimizerServerOptions o;
  o.optimizer.kind = ps::OptimizerKind::kSgd;
  o.optimizer.lr = 1e-6;
  return o;
}

// Bytes each server stores for the two apps, by server rank.
std::map<int, std::pair<double, double>> StoredBytes(ps::SimpleApp* stats) {
  std::map<int, std::pair<double, double>> out;
  std::mutex mu;
  stats->set_response_handle([&](const ps::SimpleData& got, ps::SimpleApp*) {
    double a = 0, b = 0;
    if (std::sscanf(got.body.c_str(), "%lf %lf", &a, &b) == 2) {
      std::lock_guard<std::mutex> lock(mu);
      out[ps::Postoffice::IDtoRank(got.sender)] = {a, b};
    }
  });
  stats->Wait(stats->Request(0, "bytes", ps::kServerGroup));
  stats->set_response_handle([](const ps::SimpleData&, ps::SimpleApp*) {});
  return out;
}

void PrintBalance(const std::map<int, std::pair<double, double>>& bytes, bool csv) {
  double max[2] = {0, 0}, sum[2] = {0, 0};
  for (const auto& kv : bytes) {
    double v[2] = {kv.second.first, kv.second.second};
    for (int i = 0; i < 2; ++i) max[i] = std::max(max[i], v[i]), sum[i] += v[i];
    if (!csv) {
      std::printf("# server %d stores %.1f MiB chunked, %.1f MiB whole\n", kv.first,
                  v[0] / 1048576.0, v[1] / 1048576.0);
    }
  }
  const double n = static_cast<double>(std::max<size_t>(bytes.size(), 1));
  const double ratio[2] = {sum[0] > 0 ? max[0] / (sum[0] / n) : 0,
                           sum[1] > 0 ? max[1] / (sum[1] / n) : 0};
  if (csv) {
    std::printf("balance,servers,tensors,tensor_mib,chunked_max_over_mean,whole_max_over_mean\n");
    std::printf("balance,%zu,%d,%.1f,%.3f,%.3f\n", bytes.size(), FLAGS_model_tensors,
                FLAGS_model_tensor_mib, ratio[0], ratio[1]);
  } else {
    std::printf("model of %d x %.1f MiB over %zu servers: bytes per server max/mean %.3f "
                "chunked (PS_CHUNK_BYTES=%llu), %.3f whole\n",
                FLAGS_model_tensors, FLAGS_model_tensor_mib, bytes.size(), ratio[0],
                static_cast<unsigned long long>(ps::Postoffice::Get()->chunk_bytes()), ratio[1]);
  }
}

}  // namespace

std::shared_ptr<void> StartChunkServers() {
  auto servers = std::make_shared<Servers>();
  servers->chunked = std::make_unique<ps::OptimizerServer>(kChunkedApp, Sgd());
  servers->whole = std::make_unique<ps::OptimizerServer>(kWholeApp, Sgd());
  servers->stats = std::make_unique<ps::SimpleApp>(kStatsApp, kStatsApp);
  Servers* raw = servers.get();
  servers->stats->set_request_handle([raw](const ps::SimpleData& req, ps::SimpleApp* app) {
    app->Response(req, std::to_string(raw->chunked->PayloadBytes()) + " " +
                           std::to_string(raw->whole->PayloadBytes()));
  });
  return servers;
}

int RunChunkWorkload(bool csv) {
  if (ps::MyRank() != 0) {
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
    return 0;
  }
  if (ps::Postoffice::Get()->chunk_bytes() == 0) {
    std::fprintf(stderr, "bench: the chunks workload needs chunking (PS_CHUNK_BYTES > 0)\n");
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
    return 2;
  }
  ps::KVWorker<float> chunked(kChunkedApp, 0);
  ps::KVWorker<float> whole(kWholeApp, 0);
  whole.set_chunking(false);
  ps::SimpleApp stats(kStatsApp, kStatsApp);
  int failures = 0;

  // 1. Balance: the model's tensors pushed once to each app.
  const size_t tensor_floats = static_cast<size_t>(FLAGS_model_tensor_mib * 1048576 / 4);
  ps::SArray<float> tensor(tensor_floats, 1.0f);
  for (int t = 0; t < FLAGS_model_tensors; ++t) {
    ps::SArray<ps::Key> key{static_cast<ps::Key>(t + 1)};
    failures += !chunked.Wait(chunked.ZPush(key, tensor)).ok();
    failures += !whole.Wait(whole.ZPush(key, tensor)).ok();
  }
  PrintBalance(StoredBytes(&stats), csv);

  // 2. Goodput of one big tensor, chunked vs whole, in alternating rounds.
  const size_t big_floats = static_cast<size_t>(FLAGS_big_tensor_mib * 1048576 / 4);
  const uint64_t bytes = big_floats * sizeof(float);
  ps::SArray<float> big(big_floats, 0.5f);
  ps::SArray<ps::Key> big_key{1000};
  failures += !chunked.Wait(chunked.ZPush(big_key, big)).ok();
  failures += !whole.Wait(whole.ZPush(big_key, big)).ok();
  Budget budget{FLAGS_rounds, FLAGS_seconds, FLAGS_max_requests};
  if (csv) {
    std::printf("op,size,servers,chunked_mbps,whole_mbps,ratio,chunked_p50_us,whole_p50_us\n");
  } else {
    std::printf("%-5s %10s %8s %14s %12s %7s %11s %11s\n", "op", "size", "servers",
                "chunked MB/s", "whole MB/s", "ratio", "chunked p50", "whole p50");
  }
  // Pulls into a sized array: written in place by the chunks as they come.
  ps::SArray<float> out_chunked(big_floats), out_whole(big_floats);
  for (const char* op : {"push", "pull"}) {
    const bool push = std::string(op) == "push";
    auto [c, w] = MeasurePair(
        budget, bytes, 1,
        [&]() {
          return push ? chunked.ZPush(big_key, big) : chunked.ZPull(big_key, &out_chunked);
        },
        [&](int ts) { failures += !chunked.Wait(ts).ok(); },
        [&]() { return push ? whole.ZPush(big_key, big) : whole.ZPull(big_key, &out_whole); },
        [&](int ts) { failures += !whole.Wait(ts).ok(); });
    const double ratio = w.mbps > 0 ? c.mbps / w.mbps : 0;
    const int servers = ps::NumServers();
    if (csv) {
      std::printf("%s,%llu,%d,%.2f,%.2f,%.3f,%.1f,%.1f\n", op,
                  static_cast<unsigned long long>(bytes), servers, c.mbps, w.mbps, ratio,
                  c.p50_us, w.p50_us);
    } else {
      std::printf("%-5s %10llu %8d %14.1f %12.1f %7.3f %11.1f %11.1f\n", op,
                  static_cast<unsigned long long>(bytes), servers, c.mbps, w.mbps, ratio,
                  c.p50_us, w.p50_us);
    }
    std::fflush(stdout);
  }
  ps::RequestPipeline::Counters counters = chunked.counters();
  std::printf("# chunked worker sent %llu parts, %llu of them chunks\n",
              static_cast<unsigned long long>(counters.parts),
              static_cast<unsigned long long>(counters.chunks));
  return EndWorkerRun(failures);
}

}  // namespace bench
