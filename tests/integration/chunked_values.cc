// Integration: values longer than the job's chunk size (PS_CHUNK_BYTES) travel and are
// stored in chunks, and every way of pulling them gives back exactly what was pushed.
//
// Run with a small PS_CHUNK_BYTES (the test sets 4096: 1024 floats). Each worker pushes
// (rank + 1) * Grad(key, j) to small keys and to large ones (several chunks, the last
// one partial), in one request and in requests of their own. The server applies SGD
// with lr 1 from zero values, so after a barrier key k holds -W(W+1)/2 * rounds *
// Grad(k, j) (the default handle adds: +): small integers, exact in float.
//
// --server optimizer: the built-in OptimizerServer, which stores chunks.
// --server default: KVServerDefaultHandle, which takes whole values only: workers learn
// that by asking the servers before their first chunk, and send every value whole
// (still exact).
#include <gflags/gflags.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ps/optimizer_server.h"
#include "app_expect.h"
#include "ps/ps.h"

DEFINE_string(server, "optimizer", "optimizer | default (see the file comment)");
DEFINE_int32(rounds, 3, "push rounds");

namespace {

int failures = 0;

constexpr int kChunkValues = 1024;  // PS_CHUNK_BYTES=4096 of floats

float Grad(ps::Key key, int j) { return static_cast<float>((key + j) % 7 + 1); }

// Small keys around two large ones: 3.5 chunks (4, the last one half) and exactly 4.
const std::vector<ps::Key> kKeys = {3, 10, 11, 20, 500, 501};
int LenOf(ps::Key key) {
  if (key == 10) return kChunkValues * 7 / 2;
  if (key == 20) return kChunkValues * 4;
  return 1 + static_cast<int>(key % 3);
}

std::vector<float> Values(const std::vector<ps::Key>& keys, float scale) {
  std::vector<float> vals;
  for (ps::Key k : keys) {
    for (int j = 0; j < LenOf(k); ++j) vals.push_back(scale * Grad(k, j));
  }
  return vals;
}

std::vector<int> Lens(const std::vector<ps::Key>& keys) {
  std::vector<int> lens;
  for (ps::Key k : keys) lens.push_back(LenOf(k));
  return lens;
}

int RunWorker() {
  const int rank = ps::MyRank(), workers = ps::NumWorkers();
  ps::KVWorker<float> kv(0, 0);
  const float mine = static_cast<float>(rank + 1);
  for (int r = 0; r < FLAGS_rounds; ++r) {
    if (r % 2 == 0) {  // every key in one request
      ps::Status s = kv.Wait(kv.Push(kKeys, Values(kKeys, mine), Lens(kKeys)));
      EXPECT(s.ok(), "push: %s", s.ToString().c_str());
    } else {  // the large keys alone, zero-copy, both in flight at once
      std::vector<int> ts;
      for (ps::Key k : {ps::Key{10}, ps::Key{20}}) {
        ps::SArray<ps::Key> keys{k};
        ps::SArray<float> vals(Values({k}, mine));
        ts.push_back(kv.ZPush(keys, vals));
      }
      std::vector<ps::Key> small = {3, 11, 500, 501};
      ts.push_back(kv.Push(small, Values(small, mine), Lens(small)));
      for (int t : ts) {
        ps::Status s = kv.Wait(t);
        EXPECT(s.ok(), "push: %s", s.ToString().c_str());
      }
    }
  }
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);

  // SGD with lr 1 from zeros subtracts every push; the default handle adds them.
  const float sign = FLAGS_server == "optimizer" ? -1.0f : 1.0f;
  const float total = sign * static_cast<float>(FLAGS_rounds) * workers * (workers + 1) / 2;
  auto check = [&](const std::vector<ps::Key>& keys, const float* got, size_t n,
                   const char* how) {
    std::vector<float> want = Values(keys, total);
    size_t wrong = 0;
    for (size_t i = 0; i < want.size() && i < n; ++i) wrong += got[i] != want[i];
    EXPECT(n == want.size() && wrong == 0, "%s: %zu of %zu values wrong (got %zu)", how, wrong,
           want.size(), n);
  };

  // Every key at once, with lens: the large ones come back assembled from chunks.
  std::vector<float> out;
  std::vector<int> lens;
  ps::Status s = kv.Wait(kv.Pull(kKeys, &out, &lens));
  EXPECT(s.ok(), "pull: %s", s.ToString().c_str());
  check(kKeys, out.data(), out.size(), "pull of every key");
  EXPECT(lens == Lens(kKeys), "lens differ");

  // A large key into a sized array: written in place.
  ps::SArray<float> sized(LenOf(20), -1.0f);
  float* before = sized.data();
  s = kv.Wait(kv.ZPull(ps::SArray<ps::Key>{20}, &sized));
  EXPECT(s.ok() && sized.data() == before, "sized pull: %s", s.ToString().c_str());
  check({20}, sized.data(), sized.size(), "sized pull of a large key");

  // PushPull of a large key sees its own push applied.
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
  if (rank == 0) {
    std::vector<float> after;
    s = kv.Wait(kv.PushPull({20}, std::vector<float>(LenOf(20), 1.0f), &after));
    std::vector<float> want = Values({20}, total);
    size_t wrong = after.size() == want.size() ? 0 : want.size();
    for (size_t i = 0; i < after.size() && i < want.size(); ++i) wrong += after[i] != want[i] + sign;
    EXPECT(s.ok() && wrong == 0, "pushpull of a large key: %s, %zu wrong", s.ToString().c_str(),
           wrong);
  }
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);

  ps::RequestPipeline::Counters c = kv.counters();
  if (FLAGS_server == "optimizer") {
    // 4 + 4 chunks per push of the large keys, and their pulls.
    EXPECT(c.chunks >= static_cast<uint64_t>(FLAGS_rounds) * 8, "only %llu chunks sent",
           static_cast<unsigned long long>(c.chunks));
    // A worker that never pushed: one large key into a sized array works; into an
    // empty one the server says the key is stored in chunks.
    ps::KVWorker<float> fresh(0, 1);
    ps::SArray<float> whole(LenOf(10));
    s = fresh.Wait(fresh.ZPull(ps::SArray<ps::Key>{10}, &whole));
    EXPECT(s.ok(), "fresh sized pull: %s", s.ToString().c_str());
    if (rank != 0) check({10}, whole.data(), whole.size(), "fresh worker's sized pull");
    std::vector<float> unknown;
    s = fresh.Wait(fresh.Pull({20}, &unknown));
    EXPECT(s.code() == ps::Status::Code::kInvalidArgument &&
               s.message().find("stored in chunks") != std::string::npos,
           "pull of a chunked key of unknown length: %s", s.ToString().c_str());
  } else {
    // The default handle takes whole values only: the worker asks before its first
    // chunk, and sends none.
    EXPECT(c.chunks == 0, "%llu chunks sent to a handle that takes whole values only",
           static_cast<unsigned long long>(c.chunks));
  }
  if (failures == 0) {
    std::printf("worker %d: exact; %llu parts, %llu of them chunks\n", rank,
                static_cast<unsigned long long>(c.parts), static_cast<unsigned long long>(c.chunks));
  }
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0, argv[0]);
  std::unique_ptr<ps::OptimizerServer> optimizer;
  std::unique_ptr<ps::KVServer<float>> plain;
  if (ps::IsServer()) {
    if (FLAGS_server == "optimizer") {
      ps::OptimizerServerOptions options;
      options.optimizer.lr = 1.0;
      optimizer = std::make_unique<ps::OptimizerServer>(0, options);
    } else {
      plain = std::make_unique<ps::KVServer<float>>(0);
      plain->set_request_handle(ps::KVServerDefaultHandle<float>());
    }
  }
  int rc = ps::IsWorker() ? RunWorker() : 0;
  ps::Finalize(0, true);
  return rc;
}
