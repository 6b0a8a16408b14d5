// Integration: compressed pushes and fp16 pulls end to end, against a local reference.
//
// One worker, two servers running the OptimizerServer with SGD, lr 1, zero initial
// values: a key's value is minus the sum of the gradients the server decoded. The
// worker pushes R rounds of gradients to keys in several key ranges, each range with a
// codec of its own (KVWorker::set_compression with per-range codecs), keys alone and
// several in one part, small values and one chunked value (run with PS_CHUNK_BYTES=4096).
// For each deterministic codec the worker replays the same slices through its own
// Compressor and ResidualStore and DecodeFrame: the servers must hold exactly minus the
// sum of those decoded values (same float operations, same order). randomk's indices
// depend on a per-worker nonce, so for it only the conservation of mass is checked.
// Finally: a pull with fp16 answers equals the halves of the stored values, a push of
// NaN through topk throws and sends nothing, and hand-made garbage frames are answered
// with InvalidArgument while the servers go on.
#include <gflags/gflags.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <random>
#include <string>
#include <vector>

#include "ps/compression_policy.h"
#include "ps/internal/codec_frame.h"
#include "ps/internal/customer.h"
#include "ps/optimizer_server.h"
#include "app_expect.h"
#include "ps/ps.h"

DEFINE_int32(rounds, 40, "push rounds");

namespace {

int failures = 0;

constexpr ps::Key kRangeWidth = 1000;
// Range c (keys [1000 c, 1000 c + 1000)) uses codec c.
const char* const kCodecs[] = {"none", "fp16", "topk:0.1", "threshold:0.5", "onebit",
                               "randomk:0.25:seed=3"};
constexpr int kNumCodecs = 6;
constexpr int kChunkValues = 1024;  // PS_CHUNK_BYTES=4096

// The keys of one range: three alone (1, 40 and 2.5 chunks of values) and a group of
// eight 3-value keys pushed together.
struct Slice {
  ps::Key key;
  int len;
};
std::vector<Slice> SlicesOf(int codec) {
  ps::Key base = kRangeWidth * codec;
  std::vector<Slice> s = {{base + 1, 1}, {base + 2, 40}, {base + 3, kChunkValues * 5 / 2}};
  for (int i = 0; i < 8; ++i) s.push_back({base + 10 + static_cast<ps::Key>(i), 3});
  return s;
}

std::vector<float> Gradient(std::mt19937* rng, int len) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(len);
  for (float& x : g) x = std::round(normal(*rng) * 64.0f) / 64.0f;  // exact in fp16 mostly
  return g;
}

int RunWorker() {
  ps::KVWorker<float> kv(0, 0);
  ps::CompressionPolicy policy;
  for (int c = 0; c < kNumCodecs; ++c) {
    ps::CodecSpec spec;
    ps::Status s = ps::CodecSpec::Parse(kCodecs[c], &spec);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    policy.ranges.push_back({ps::Range(kRangeWidth * c, kRangeWidth * (c + 1)), spec});
  }
  kv.set_compression(policy);

  // The reference: per (key, chunk) slice, the decoded sum, and its own residuals.
  struct Reference {
    std::unique_ptr<ps::Compressor> codec;
    ps::ResidualStore residuals;
    std::vector<std::vector<float>> applied;  // per slice, minus the decoded sums
    std::vector<double> pushed;               // per slice, the sum of all gradient values
  };
  std::vector<Reference> refs(kNumCodecs);
  std::mt19937 rng(7);
  for (int c = 0; c < kNumCodecs; ++c) {
    refs[c].codec = ps::Compressor::Create(policy.ranges[c].second);
    for (const Slice& s : SlicesOf(c)) refs[c].applied.emplace_back(s.len, 0.0f);
    refs[c].pushed.assign(SlicesOf(c).size(), 0.0);
  }
  auto reference_push = [&](int c, size_t slice, ps::Key key, int32_t chunk, const float* g,
                            size_t n, size_t offset) {
    Reference& ref = refs[c];
    ps::SArray<char> frame;
    ref.codec->Encode(g, n, ref.residuals.Get(key, chunk, n), 0, &frame);
    std::vector<float> decoded(n);
    ps::Status s = ps::DecodeFrame(frame.data(), frame.size(), decoded.data(), n);
    EXPECT(s.ok(), "reference decode: %s", s.ToString().c_str());
    for (size_t i = 0; i < n; ++i) ref.applied[slice][offset + i] -= decoded[i];
  };

  for (int r = 0; r < FLAGS_rounds; ++r) {
    for (int c = 0; c < kNumCodecs; ++c) {
      std::vector<Slice> slices = SlicesOf(c);
      // The three single keys, one push each.
      for (size_t i = 0; i < 3; ++i) {
        std::vector<float> g = Gradient(&rng, slices[i].len);
        ps::Status s = kv.Wait(kv.Push({slices[i].key}, g));
        EXPECT(s.ok(), "push %s: %s", kCodecs[c], s.ToString().c_str());
        for (float x : g) refs[c].pushed[i] += x;
        if (slices[i].len > kChunkValues) {
          for (int chunk = 0; chunk * kChunkValues < slices[i].len; ++chunk) {
            size_t off = static_cast<size_t>(chunk) * kChunkValues;
            size_t n = std::min<size_t>(kChunkValues, slices[i].len - off);
            reference_push(c, i, slices[i].key, chunk, g.data() + off, n, off);
          }
        } else {
          reference_push(c, i, slices[i].key, -1, g.data(), g.size(), 0);
        }
      }
      // The group, in one push: each server's keys share one frame. The reference
      // cannot know the split, so the group is checked by conservation only.
      std::vector<ps::Key> keys;
      std::vector<float> g;
      for (size_t i = 3; i < slices.size(); ++i) {
        keys.push_back(slices[i].key);
        std::vector<float> part = Gradient(&rng, slices[i].len);
        for (float x : part) refs[c].pushed[i] += x;
        g.insert(g.end(), part.begin(), part.end());
      }
      ps::Status s = kv.Wait(kv.Push(keys, g));
      EXPECT(s.ok(), "group push %s: %s", kCodecs[c], s.ToString().c_str());
    }
  }

  // Check: exact for the single keys of deterministic codecs; conservation everywhere
  // (what the servers hold plus what the residuals keep back is what was pushed; the
  // residuals are bounded, so after many rounds their share is small).
  for (int c = 0; c < kNumCodecs; ++c) {
    std::vector<Slice> slices = SlicesOf(c);
    const bool deterministic = std::string(kCodecs[c]).rfind("randomk", 0) != 0;
    for (size_t i = 0; i < slices.size(); ++i) {
      std::vector<float> got;
      ps::Status s = kv.Wait(kv.Pull({slices[i].key}, &got));
      EXPECT(s.ok() && static_cast<int>(got.size()) == slices[i].len, "pull %s key %llu: %s",
             kCodecs[c], static_cast<unsigned long long>(slices[i].key), s.ToString().c_str());
      if (!s.ok() || static_cast<int>(got.size()) != slices[i].len) continue;
      if (i < 3 && deterministic) {
        size_t wrong = 0;
        for (size_t j = 0; j < got.size(); ++j) wrong += got[j] != refs[c].applied[i][j];
        EXPECT(wrong == 0, "%s key %llu: %zu of %zu values differ from the reference",
               kCodecs[c], static_cast<unsigned long long>(slices[i].key), wrong, got.size());
      }
      double held = 0;
      for (float x : got) held -= x;
      // Each value's residual is bounded by a few gradients' size; R rounds of
      // gradients of size ~1 sum to ~sqrt(R) per value.
      const double bound = 8.0 * slices[i].len + 1e-3 * std::fabs(refs[c].pushed[i]);
      EXPECT(std::fabs(held - refs[c].pushed[i]) <= bound,
             "%s key %llu: servers hold %.3f of %.3f pushed", kCodecs[c],
             static_cast<unsigned long long>(slices[i].key), held, refs[c].pushed[i]);
    }
  }
  ps::RequestPipeline::Counters counters = kv.counters();
  EXPECT(counters.push_value_bytes < counters.push_raw_bytes,
         "compression sent %llu value bytes for %llu raw",
         static_cast<unsigned long long>(counters.push_value_bytes),
         static_cast<unsigned long long>(counters.push_raw_bytes));

  // fp16 pull answers: the halves of the stored values.
  {
    ps::KVWorker<float> exact_kv(0, 1);
    ps::KVWorker<float> half_kv(0, 2);
    ps::CompressionPolicy halves;
    halves.pull_fp16 = true;
    half_kv.set_compression(halves);
    std::vector<ps::Key> keys = {2, 1002, 2002};
    std::vector<float> exact, half;
    ps::Status s1 = exact_kv.Wait(exact_kv.Pull(keys, &exact));
    ps::Status s2 = half_kv.Wait(half_kv.Pull(keys, &half));
    size_t wrong = exact.size() == half.size() ? 0 : 1;
    for (size_t i = 0; i < exact.size() && i < half.size(); ++i) {
      wrong += half[i] != ps::HalfToFloat(ps::FloatToHalf(exact[i]));
    }
    EXPECT(s1.ok() && s2.ok() && wrong == 0, "fp16 pull: %s %s, %zu wrong",
           s1.ToString().c_str(), s2.ToString().c_str(), wrong);
  }

  // A value topk cannot encode: the push throws and nothing is sent.
  try {
    kv.Push({2001}, std::vector<float>{NAN});
    EXPECT(false, "a NaN pushed through topk did not throw");
  } catch (const ps::Error& e) {
  }
  EXPECT(kv.NumInFlight() == 0, "%zu requests in flight", kv.NumInFlight());

  // Garbage frames, sent by hand as compressed pushes: each answered InvalidArgument.
  std::mutex mu;
  std::condition_variable cv;
  std::vector<ps::Status> answers;
  ps::Customer raw(0, 9, [&](ps::Message& msg) {
    std::lock_guard<std::mutex> lock(mu);
    answers.push_back(ps::Status::FromWire(msg.meta.status_code, msg.meta.status_message));
    cv.notify_all();
  });
  std::vector<std::string> garbage = {std::string("\xC1\x02\x00\x00", 4),  // truncated
                                      std::string(40, '\xff'),             // no marker
                                      std::string()};                      // empty
  {
    // A valid topk frame of 8 values sent for keys whose lens say 9.
    ps::CodecSpec spec;
    ps::CodecSpec::Parse("topk:k=2", &spec);
    std::vector<float> v = {1, 2, 3, 4, 5, 6, 7, 8};
    ps::SArray<char> frame;
    ps::Compressor::Create(spec)->Encode(v.data(), v.size(), nullptr, 0, &frame);
    garbage.emplace_back(frame.data(), frame.size());
  }
  for (const std::string& bytes : garbage) {
    ps::Message msg;
    msg.meta.app_id = 0;
    msg.meta.customer_id = 9;
    msg.meta.request = true;
    msg.meta.push = true;
    msg.meta.compression = static_cast<int>(ps::Codec::kTopk);
    msg.meta.recipient = ps::Postoffice::ServerRankToID(0);
    uint64_t id = 0;
    msg.meta.timestamp = raw.NewRequest({msg.meta.recipient}, &id);
    msg.meta.request_id = id;
    msg.meta.incarnation = raw.incarnation();
    msg.AddData(ps::SArray<ps::Key>{5000});
    ps::SArray<char> frame(bytes.size());
    if (!bytes.empty()) std::memcpy(frame.data(), bytes.data(), bytes.size());
    msg.meta.data_type.push_back(ps::DataType::kChar);
    msg.data.push_back(frame);
    msg.AddData(ps::SArray<int>{9});
    ps::Status sent = ps::Postoffice::Get()->Send(msg);
    EXPECT(sent.ok(), "send: %s", sent.ToString().c_str());
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return answers.size() == garbage.size(); });
    EXPECT(answers.size() == garbage.size(), "%zu of %zu garbage frames answered", answers.size(),
           garbage.size());
    for (const ps::Status& a : answers) {
      EXPECT(a.code() == ps::Status::Code::kInvalidArgument &&
                 a.message().find("compressed values") != std::string::npos,
             "garbage frame answered %s", a.ToString().c_str());
    }
  }
  raw.Close();
  // The servers went on: a last pull works.
  std::vector<float> after;
  ps::Status s = kv.Wait(kv.Pull({1}, &after));
  EXPECT(s.ok(), "pull after garbage: %s", s.ToString().c_str());
  if (failures == 0) {
    std::printf("worker: exact; %llu value bytes pushed for %llu raw (%.1fx)\n",
                static_cast<unsigned long long>(counters.push_value_bytes),
                static_cast<unsigned long long>(counters.push_raw_bytes),
                static_cast<double>(counters.push_raw_bytes) / counters.push_value_bytes);
  }
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0, argv[0]);
  std::unique_ptr<ps::OptimizerServer> server;
  if (ps::IsServer()) {
    ps::OptimizerServerOptions options;
    options.optimizer.lr = 1.0;
    server = std::make_unique<ps::OptimizerServer>(0, options);
  }
  int rc = ps::IsWorker() ? RunWorker() : 0;
  ps::Finalize(0, true);
  return rc;
}
