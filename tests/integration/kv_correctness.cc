// Integration: push/pull correctness over thousands of keys, several servers and
// workers, every output flavour (vector, pre-sized SArray, empty SArray, lens), plus
// the errors an app can meet (unsorted keys, a pull of a key never pushed).
//
// Each worker pushes value (rank + 1) * Base(key, j) to every key for several rounds;
// after a worker barrier every key must hold rounds * W(W+1)/2 * Base(key, j). Values
// are doubles holding integers, so sums are exact.
#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "app_expect.h"
#include "ps/ps.h"

DEFINE_int32(keys, 5000, "number of keys");
DEFINE_int32(rounds, 3, "push rounds");
DEFINE_int32(fail_rank, -1, "if >= 0, this worker exits with code 1 right after Start");

namespace {

int failures = 0;

double Base(ps::Key key, int j) { return static_cast<double>(key % 1000 + 1 + j); }
int LenOf(ps::Key key) { return 1 + static_cast<int>(key % 3); }

int RunWorker() {
  ps::KVWorker<double> kv(0, 0);
  int rank = ps::MyRank();
  int workers = ps::NumWorkers();

  // The same random 64-bit keys on every worker (fixed seed), sorted and unique.
  std::mt19937_64 rng(12345);
  std::set<ps::Key> unique;
  while (static_cast<int>(unique.size()) < FLAGS_keys) unique.insert(rng());
  std::vector<ps::Key> keys(unique.begin(), unique.end());
  std::vector<int> lens;
  std::vector<double> vals;
  for (ps::Key k : keys) {
    lens.push_back(LenOf(k));
    for (int j = 0; j < LenOf(k); ++j) vals.push_back((rank + 1) * Base(k, j));
  }

  // Misuse is reported at the call, before anything is sent.
  std::vector<ps::Key> unsorted = {5, 3};
  try {
    kv.Push(unsorted, std::vector<double>{1, 2});
    EXPECT(false, "Push with unsorted keys did not throw");
  } catch (const ps::Error& e) {
    EXPECT(std::string(e.what()).find("sorted") != std::string::npos, "message: %s", e.what());
  }
  try {
    kv.Push(keys, vals);  // lens missing: values do not divide evenly
    EXPECT(false, "Push with mismatched values did not throw");
  } catch (const ps::Error& e) {
  }

  for (int r = 0; r < FLAGS_rounds; ++r) {
    // Several pushes in flight at once, each over every server.
    std::vector<int> ts;
    size_t half = keys.size() / 2, half_vals = 0;
    for (size_t i = 0; i < half; ++i) half_vals += lens[i];
    ts.push_back(kv.Push(std::vector<ps::Key>(keys.begin(), keys.begin() + half),
                         std::vector<double>(vals.begin(), vals.begin() + half_vals),
                         std::vector<int>(lens.begin(), lens.begin() + half)));
    ts.push_back(kv.Push(std::vector<ps::Key>(keys.begin() + half, keys.end()),
                         std::vector<double>(vals.begin() + half_vals, vals.end()),
                         std::vector<int>(lens.begin() + half, lens.end())));
    for (int t : ts) {
      ps::Status s = kv.Wait(t);
      EXPECT(s.ok(), "push: %s", s.ToString().c_str());
    }
  }
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);

  double scale = static_cast<double>(FLAGS_rounds) * workers * (workers + 1) / 2;
  auto check = [&](const std::vector<ps::Key>& ks, const double* got, size_t n,
                   const char* how) {
    size_t at = 0, wrong = 0;
    for (ps::Key k : ks) {
      for (int j = 0; j < LenOf(k); ++j, ++at) {
        if (at >= n || got[at] != scale * Base(k, j)) ++wrong;
      }
    }
    EXPECT(at == n && wrong == 0, "%s: %zu of %zu values wrong (got %zu)", how, wrong, at, n);
  };

  // 1. std::vector output with lens.
  std::vector<double> out;
  std::vector<int> out_lens;
  ps::Status s = kv.Wait(kv.Pull(keys, &out, &out_lens));
  EXPECT(s.ok(), "pull: %s", s.ToString().c_str());
  check(keys, out.data(), out.size(), "vector pull");
  EXPECT(out_lens == lens, "lens differ");

  // 2. Zero-copy pull into an empty SArray, of a strided subset.
  std::vector<ps::Key> subset;
  for (size_t i = rank; i < keys.size(); i += 7) subset.push_back(keys[i]);
  ps::SArray<ps::Key> zkeys(subset);
  ps::SArray<double> zout;
  s = kv.Wait(kv.ZPull(zkeys, &zout));
  EXPECT(s.ok(), "zpull: %s", s.ToString().c_str());
  check(subset, zout.data(), zout.size(), "empty SArray pull");

  // 3. Into a pre-sized SArray: the values must land in the caller's buffer.
  size_t subset_vals = 0;
  for (ps::Key k : subset) subset_vals += LenOf(k);
  ps::SArray<double> sized(subset_vals, -1.0);
  double* before = sized.data();
  s = kv.Wait(kv.ZPull(zkeys, &sized));
  EXPECT(s.ok(), "sized zpull: %s", s.ToString().c_str());
  EXPECT(sized.data() == before, "pre-sized output was reallocated");
  check(subset, sized.data(), sized.size(), "pre-sized SArray pull");

  // 4. A pre-sized SArray of the wrong size is an error, not a crash.
  ps::SArray<double> wrong_size(3);
  s = kv.Wait(kv.ZPull(zkeys, &wrong_size));
  EXPECT(!s.ok(), "pull into a wrong-sized array succeeded");

  // 5. A key nobody pushed.
  std::vector<double> missing;
  s = kv.Wait(kv.Pull(std::vector<ps::Key>{keys[0] ^ 1}, &missing));
  EXPECT(s.code() == ps::Status::Code::kNotFound, "missing key: %s", s.ToString().c_str());

  // 6. A request with no keys finishes at once, whatever the number of servers.
  std::vector<double> none;
  s = kv.Wait(kv.Pull(std::vector<ps::Key>{}, &none));
  EXPECT(s.ok() && none.empty(), "empty pull: %s", s.ToString().c_str());

  // 7. Callbacks run before Wait returns.
  bool called = false;
  kv.Wait(kv.Pull(keys, &out, nullptr, 0, [&called] { called = true; }));
  EXPECT(called, "callback did not run");

  // 8. A KVWorker destroyed with requests in flight: the answers that come back later
  // are dropped, nothing crashes (keys of its own, so no other check sees them).
  {
    ps::KVWorker<double> short_lived(0, 7);
    for (int i = 0; i < 50; ++i) {
      short_lived.Push({static_cast<ps::Key>(rank * 100 + i + 1)}, {1.0});
    }
  }

  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
  // 9. PushPull by worker 0 only: sees its own push applied.
  if (rank == 0) {
    std::vector<ps::Key> one = {keys[1]};
    std::vector<double> add(LenOf(keys[1]), 1.0), after;
    s = kv.Wait(kv.PushPull(one, add, &after));
    EXPECT(s.ok() && after.size() == add.size() && after[0] == scale * Base(keys[1], 0) + 1,
           "pushpull: %s size %zu/%zu got %.1f want %.1f", s.ToString().c_str(), after.size(),
           add.size(), after.empty() ? -1.0 : after[0], scale * Base(keys[1], 0) + 1);
  }
  // 10. Push and Pull of std::vectors read them during the call only: overwritten
  // right after Push returns (one value per key, so the push is split by server
  // straight from the vectors), the servers still get what was pushed; a pull's
  // keys may go before it finishes. Keys of this worker's own.
  {
    std::mt19937_64 own_rng(777 + rank);
    std::set<ps::Key> own_set;
    while (own_set.size() < 3000) {
      ps::Key k = own_rng();
      if (!unique.count(k)) own_set.insert(k);
    }
    std::vector<ps::Key> own(own_set.begin(), own_set.end());
    std::vector<double> pushed(own.size());
    for (size_t i = 0; i < own.size(); ++i) pushed[i] = static_cast<double>(i + 1);
    std::vector<ps::Key> keys_sent = own;
    std::vector<double> vals_sent = pushed;
    int t = kv.Push(keys_sent, vals_sent);
    std::fill(keys_sent.begin(), keys_sent.end(), ps::Key{0});
    std::fill(vals_sent.begin(), vals_sent.end(), -1.0);
    s = kv.Wait(t);
    EXPECT(s.ok(), "push of overwritten vectors: %s", s.ToString().c_str());
    std::vector<double> back;
    std::vector<ps::Key> keys_asked = own;
    t = kv.Pull(keys_asked, &back);
    keys_asked.clear();
    keys_asked.shrink_to_fit();
    s = kv.Wait(t);
    EXPECT(s.ok() && back == pushed, "pull after overwritten vectors: %s, %zu values",
           s.ToString().c_str(), back.size());
  }

  EXPECT(kv.NumInFlight() == 0, "%zu requests still tracked", kv.NumInFlight());
  if (failures == 0) std::printf("worker %d: %zu keys correct\n", rank, keys.size());
  return failures ? 1 : 0;
}

// One line of this node's delivery counters, read by drivers that run the job with
// PS_RESEND / PS_DROP_RATE (tests/integration/resend_test.py) to see that drops and
// resends really happened. Printed after Finalize, so it counts the whole job.
void PrintStats() {
  ps::NodeStats s = ps::Postoffice::Get()->stats();
  std::printf(
      "stats: injected_drops=%llu resent=%llu duplicates=%llu held=%zu awaiting_ack=%zu "
      "from_gone_nodes=%llu\n",
      static_cast<unsigned long long>(s.injected_drops),
      static_cast<unsigned long long>(s.resent_messages),
      static_cast<unsigned long long>(s.duplicates), s.held_out_of_order, s.awaiting_ack,
      static_cast<unsigned long long>(s.from_gone_nodes));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0, argv[0]);
  if (ps::IsWorker() && ps::MyRank() == FLAGS_fail_rank) {
    std::fprintf(stderr, "worker %d exits with 1 as asked\n", FLAGS_fail_rank);
    std::exit(1);
  }
  std::unique_ptr<ps::KVServer<double>> server;
  if (ps::IsServer()) {
    server = std::make_unique<ps::KVServer<double>>(0);
    server->set_request_handle(ps::KVServerDefaultHandle<double>());
  }
  int rc = ps::IsWorker() ? RunWorker() : 0;
  ps::Finalize(0, true);
  PrintStats();
  return rc;
}
