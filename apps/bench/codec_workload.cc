#include "codec_workload.h"

#include <gflags/gflags.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "measure.h"
#include "ps/compression_policy.h"
#include "ps/internal/codec_frame.h"
#include "ps/ps.h"
#include "store_handle.h"
#include "workload_end.h"

DEFINE_string(codecs, "none,fp16,topk:0.01,topk:0.001,threshold:2.5,onebit,randomk:0.01",
              "codecs workload: the codecs to measure (CodecSpec forms)");
DEFINE_string(codec_sizes, "1048576,16777216", "codecs workload: push sizes in bytes");
DECLARE_int32(rounds);
DECLARE_double(seconds);
DECLARE_int32(max_requests);

namespace bench {
namespace {

constexpr int kCodecApp = 4;

// MB/s of `bytes` processed per call of fn, over about `seconds`.
template <typename Fn>
double Throughput(size_t bytes, double seconds, Fn fn) {
  fn();  // warm-up: page faults, caches
  auto start = Clock::now();
  int calls = 0;
  double elapsed = 0;
  do {
    fn();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  return static_cast<double>(bytes) * calls / elapsed / 1e6;
}

struct Servers {
  std::unique_ptr<ps::KVServer<float>> store;
};

}  // namespace

std::shared_ptr<void> StartCodecServers() {
  auto servers = std::make_shared<Servers>();
  servers->store = std::make_unique<ps::KVServer<float>>(kCodecApp);
  servers->store->set_request_handle(StoreHandle());
  return servers;
}

int RunCodecWorkload(bool csv) {
  if (ps::MyRank() != 0) {
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
    return 0;
  }
  std::vector<ps::CodecSpec> specs;
  for (const std::string& text : SplitList(FLAGS_codecs)) {
    ps::CodecSpec spec;
    ps::Status s = ps::CodecSpec::Parse(text, &spec);
    if (!s.ok()) {
      std::fprintf(stderr, "bench: --codecs: %s\n", s.message().c_str());
      ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
      return 2;
    }
    specs.push_back(spec);
  }
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int failures = 0;

  // 1. Encode / decode throughput next to memcpy, in this process.
  if (csv) {
    std::printf("codec,size,encoded_bytes,encode_mbps,decode_mbps,memcpy_mbps,encode_vs_memcpy,"
                "decode_vs_memcpy\n");
  } else {
    std::printf("%-22s %10s %13s %11s %11s %11s %8s %8s\n", "codec", "size", "encoded bytes",
                "encode MB/s", "decode MB/s", "memcpy MB/s", "enc/cpy", "dec/cpy");
  }
  for (const std::string& size_text : SplitList(FLAGS_codec_sizes)) {
    const size_t bytes = std::stoull(size_text) / 4 * 4;
    const size_t n = bytes / 4;
    std::vector<float> g(n), out(n);
    for (float& x : g) x = normal(rng);
    for (const ps::CodecSpec& spec : specs) {
      std::unique_ptr<ps::Compressor> codec = ps::Compressor::Create(spec);
      ps::SArray<char> frame;
      uint64_t nonce = 0;
      const double budget = FLAGS_seconds / 5;
      // Without error feedback: a residual would grow round after round with the same
      // gradient and change what threshold sends; the pushes below keep residuals.
      double enc = Throughput(bytes, budget, [&] {
        codec->Encode(g.data(), n, nullptr, nonce++, &frame);
      });
      ps::Status decoded = ps::DecodeFrame(frame.data(), frame.size(), out.data(), n);
      if (!decoded.ok()) {
        std::fprintf(stderr, "bench: %s frame does not decode: %s\n", spec.ToString().c_str(),
                     decoded.ToString().c_str());
        ++failures;
      }
      double dec = Throughput(bytes, budget, [&] {
        ps::DecodeFrame(frame.data(), frame.size(), out.data(), n);
      });
      double cpy = Throughput(bytes, budget, [&] {
        std::memcpy(out.data(), g.data(), bytes);
        asm volatile("" : : "r"(out.data()) : "memory");  // keep the copy
      });
      const std::string name = spec.ToString();
      if (csv) {
        std::printf("%s,%zu,%zu,%.1f,%.1f,%.1f,%.3f,%.3f\n", name.c_str(), bytes, frame.size(),
                    enc, dec, cpy, enc / cpy, dec / cpy);
      } else {
        std::printf("%-22s %10zu %13zu %11.1f %11.1f %11.1f %8.3f %8.3f\n", name.c_str(), bytes,
                    frame.size(), enc, dec, cpy, enc / cpy, dec / cpy);
      }
      std::fflush(stdout);
    }
  }

  // 2. Pushes through the servers: each codec against uncompressed pushes, alternating.
  if (csv) {
    std::printf("op,codec,size,bytes_per_push,x_fewer,goodput_mbps,none_goodput_mbps,ratio,"
                "p50_us,none_p50_us\n");
  } else {
    std::printf("\n%-5s %-22s %10s %14s %8s %13s %13s %7s %9s %9s\n", "op", "codec", "size",
                "bytes/push", "x fewer", "goodput MB/s", "none MB/s", "ratio", "p50 us",
                "none p50");
  }
  Budget budget{FLAGS_rounds, FLAGS_seconds, FLAGS_max_requests};
  ps::KVWorker<float> plain(kCodecApp, 0);
  int customer = 1;
  for (const std::string& size_text : SplitList(FLAGS_codec_sizes)) {
    const size_t bytes = std::stoull(size_text) / 4 * 4;
    // Pushes cycle through a few independent gradients, so that error feedback sees a
    // stream of fresh ones, as in training.
    std::vector<ps::SArray<float>> grads(4, ps::SArray<float>(bytes / 4));
    for (auto& g : grads) {
      g = ps::SArray<float>(bytes / 4);
      for (float& x : g) x = normal(rng);
    }
    size_t next = 0;
    ps::SArray<ps::Key> key{static_cast<ps::Key>(bytes)};
    auto report = [&](const char* op, const std::string& name, double per_push, const Result& c,
                      const Result& w) {
      const double ratio = w.mbps > 0 ? c.mbps / w.mbps : 0;
      const double fewer = per_push > 0 ? static_cast<double>(bytes) / per_push : 0;
      if (csv) {
        std::printf("%s,%s,%zu,%.0f,%.1f,%.2f,%.2f,%.3f,%.1f,%.1f\n", op, name.c_str(), bytes,
                    per_push, fewer, c.mbps, w.mbps, ratio, c.p50_us, w.p50_us);
      } else {
        std::printf("%-5s %-22s %10zu %14.0f %8.1f %13.1f %13.1f %7.3f %9.1f %9.1f\n", op,
                    name.c_str(), bytes, per_push, fewer, c.mbps, w.mbps, ratio, c.p50_us,
                    w.p50_us);
      }
      std::fflush(stdout);
    };
    for (const ps::CodecSpec& spec : specs) {
      ps::KVWorker<float> kv(kCodecApp, customer++);
      ps::CompressionPolicy policy;
      policy.push = spec;
      kv.set_compression(policy);
      ps::RequestPipeline::Counters before = kv.counters();
      auto [c, w] = MeasurePair(
          budget, bytes, 1, [&] { return kv.ZPush(key, grads[next++ % grads.size()]); },
          [&](int ts) {
            ps::Status s = kv.Wait(ts);
            if (!s.ok()) std::fprintf(stderr, "bench: push: %s\n", s.ToString().c_str());
            failures += !s.ok();
          },
          [&] { return plain.ZPush(key, grads[next++ % grads.size()]); },
          [&](int ts) { failures += !plain.Wait(ts).ok(); });
      ps::RequestPipeline::Counters after = kv.counters();
      const double pushes = static_cast<double>(c.requests + 3);  // + the warm-up
      report("push", spec.ToString(), (after.push_value_bytes - before.push_value_bytes) / pushes,
             c, w);
    }
    // Pulls: fp16 answers next to raw ones.
    ps::KVWorker<float> half(kCodecApp, customer++);
    ps::CompressionPolicy halves;
    halves.pull_fp16 = true;
    half.set_compression(halves);
    ps::SArray<float> out_half(bytes / 4), out_raw(bytes / 4);
    auto [h, r] = MeasurePair(
        budget, bytes, 1, [&] { return half.ZPull(key, &out_half); },
        [&](int ts) { failures += !half.Wait(ts).ok(); },
        [&] { return plain.ZPull(key, &out_raw); },
        [&](int ts) {
          ps::Status s = plain.Wait(ts);
          if (!s.ok()) std::fprintf(stderr, "bench: pull: %s\n", s.ToString().c_str());
          failures += !s.ok();
        });
    report("pull", "fp16 answers", bytes / 2.0 + ps::FrameHeaderBytes(bytes / 4), h, r);
  }
  return EndWorkerRun(failures, "requests or decodes");
}

}  // namespace bench
