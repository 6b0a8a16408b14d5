// Integration: the van's shared-memory path in real jobs (driven by shm.cmake and
// shm_test.py). Every node prints "shm_app: <role> <rank> pid <pid> started" once it
// has joined, and its van's shared-memory counters ("shm_app: <role> <rank> stats:
// ...") before it exits.
//
// Modes (--mode), as the workers see them; servers run KVServerDefaultHandle<double>
// (pushes add up) and the scheduler waits in ps::Finalize:
//
//  exact  Each worker pushes (rank + 1) * Base(key, j) to keys of 128 KiB, 1 MiB and
//         3 MiB for --rounds rounds, then after a worker barrier pulls every key into
//         a std::vector (copied out), into an empty SArray (the received frame
//         itself) and into a pre-sized SArray, keeping the views alive until all are
//         checked: every value must be rounds * W(W+1)/2 * Base(key, j) exactly.
//         Then each worker pushes one double to each of 2 million keys in one run at
//         once (with one server, the app's vectors as they are: a key frame and the
//         values; split by server, each server's keys as a bitmap of the run: either
//         way the push's key bytes are under a sixteenth of raw) and pulls them back,
//         and then every key but each 1000th (not one run: at several servers, each
//         part's keys raw, over key caching's bound of 8 MiB / W workers, so never
//         kept, and lent): W(W+1)/2 *
//         Base(key, 0) each. The servers answer those pulls with the request's own
//         keys, or with --answer_keys=copy a copy of them (which the worker checks
//         against its part's keys, its bitmap or their hash), or with
//         --answer_keys=wrong a copy whose last key differs: each pull must fail
//         saying so.
//         --expect_shm=1: each node's van must have sent and received frames through
//         shared memory (workers: pushes out, answers in; servers: the reverse) and
//         dropped nothing; 0: no frame went through shared memory. --expect_lent=1: the
//         workers' pushes of 2 million keys were written in place in lent ring blocks
//         (Van::LendSendBuffers, VanStats::shm_lent_frames); 0: nothing was.
//  loop   Each worker pushes and pulls a 1 MiB key of its own, checking each pull,
//         and prints "shm_app: worker <rank> shm in use" once its van has both sent and
//         received through shared memory. Worker --forever_rank never stops (the test
//         kills it); the others stop after --run_s, or once --stop_file exists, and
//         finalize.
//  idle   One worker pushes and pulls 4 keys of 8 MiB at once (32 MiB in flight each
//         way, through the rings and malloc), drops everything it received, notes its
//         RSS, then idles. --expect_release=1: at least 24 MiB must go back to the
//         system within 20 s; 0: no more than 4 MiB may have after 2 s.
//  barrier  The same work, then every node enters a barrier; the worker notes its RSS
//         just before and just after. --expect_release=1: at least 24 MiB must have
//         gone back by the time the barrier returns; 0: no more than 4 MiB.
#include <gflags/gflags.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "app_expect.h"
#include "ps/ps.h"

DEFINE_string(mode, "exact", "exact | loop | idle | barrier");
DEFINE_int32(rounds, 4, "exact: push rounds");
DEFINE_int32(expect_shm, -1,
             "exact: 1: shared memory must have been used; 0: must not; -1: either");
DEFINE_int32(forever_rank, -1, "loop: this worker never stops");
DEFINE_double(run_s, 10, "loop: how long the other workers run at most");
DEFINE_string(stop_file, "", "loop: the other workers also stop once this file exists");
DEFINE_string(marker, "", "ignored; lets the test driver find this run's processes");
DEFINE_int32(expect_release, -1,
             "idle, barrier: 1: kept memory must go back; 0: must stay");
DEFINE_string(answer_keys, "same",
              "exact: servers answer the split pull with the request's keys (same), a copy "
              "of them (copy), or a copy with the last key changed (wrong: the pull fails)");
DEFINE_int32(expect_lent, -1,
             "exact: 1: workers must have sent frames from lent ring blocks; 0: must not");

namespace {

int failures = 0;

std::string me = "node";  // "<role> <rank>", once joined

std::string Me() { return me; }

double Base(ps::Key key, size_t j) { return static_cast<double>((key * 7 + j) % 1000 + 1); }

// Keys and their lengths in doubles: 128 KiB, 1 MiB, 3 MiB.
const std::vector<std::pair<ps::Key, size_t>> kKeys = {
    {11, (128 << 10) / 8}, {22, (1 << 20) / 8}, {33, (3 << 20) / 8}};

ps::VanStats Stats() { return ps::Postoffice::Get()->van()->stats(); }

void PrintStats() {
  ps::VanStats v = Stats();
  Say("shm_app: %s stats: shm_sent_frames=%llu shm_lent_frames=%llu shm_sent_bytes=%llu "
      "shm_received_frames=%llu shm_received_bytes=%llu shm_fallback_frames=%llu "
      "shm_copied_bytes=%llu shm_accepted_rings=%llu shm_refused_rings=%llu "
      "dropped_messages=%llu",
      Me().c_str(), (unsigned long long)v.shm_sent_frames, (unsigned long long)v.shm_lent_frames,
      (unsigned long long)v.shm_sent_bytes,
      (unsigned long long)v.shm_received_frames, (unsigned long long)v.shm_received_bytes,
      (unsigned long long)v.shm_fallback_frames, (unsigned long long)v.shm_copied_bytes,
      (unsigned long long)v.shm_accepted_rings, (unsigned long long)v.shm_refused_rings,
      (unsigned long long)v.dropped_messages);
}

// What the node's van must show after the job, per --expect_shm.
void CheckStats(bool sends, bool receives) {
  ps::VanStats v = Stats();
  if (FLAGS_expect_shm == 1) {
    if (sends) EXPECT(v.shm_sent_bytes > 0, "%s sent nothing through shared memory", Me().c_str());
    if (receives) {
      EXPECT(v.shm_received_bytes > 0, "%s received nothing through shared memory", Me().c_str());
    }
    EXPECT(v.shm_refused_rings == 0, "%s: a peer refused its ring", Me().c_str());
    EXPECT(v.dropped_messages == 0, "%s dropped %llu messages", Me().c_str(),
           (unsigned long long)v.dropped_messages);
  } else if (FLAGS_expect_shm == 0) {
    EXPECT(v.shm_sent_frames == 0 && v.shm_received_frames == 0 && v.shm_accepted_rings == 0,
           "%s used shared memory with PS_SHM=0", Me().c_str());
  }
}

constexpr ps::Key kSplitFirst = ps::Key{1} << 20;  // the split push's first key

// KVServerDefaultHandle<double>, except for pulls of the split keys with --answer_keys
// copy or wrong (see the top).
struct ServerHandle {
  ps::KVServerDefaultHandle<double> inner;
  void operator()(const ps::KVMeta& meta, const ps::KVPairs<double>& req,
                  ps::KVServer<double>* server) {
    if (FLAGS_answer_keys == "same" || meta.push || req.keys.empty() ||
        req.keys[0] < kSplitFirst) {
      inner(meta, req, server);
      return;
    }
    ps::KVPairs<double> res;
    res.keys = ps::SArray<ps::Key>(req.keys.size());
    std::copy(req.keys.begin(), req.keys.end(), res.keys.begin());
    if (FLAGS_answer_keys == "wrong") res.keys[res.keys.size() - 1] += 1;
    res.vals = ps::SArray<double>(req.keys.size());
    for (size_t i = 0; i < req.keys.size(); ++i) {
      auto it = inner.store.find(req.keys[i]);
      res.vals[i] = it == inner.store.end() ? 0 : it->second[0];
    }
    server->Response(meta, res);
  }
};

// One push of a double to each of 2 million keys, split by server, then a pull back.
void RunSplitPush(ps::KVWorker<double>& kv) {
  const size_t n = 2000000;
  const ps::Key first = kSplitFirst;
  std::vector<ps::Key> keys(n);
  std::vector<double> vals(n);
  const int rank = ps::MyRank(), workers = ps::NumWorkers();
  for (size_t i = 0; i < n; ++i) {
    keys[i] = first + i;
    vals[i] = (rank + 1) * Base(keys[i], 0);
  }
  const ps::RequestPipeline::Counters before = kv.counters();
  ps::Status s = kv.Wait(kv.Push(keys, vals));
  EXPECT(s.ok(), "split push: %s", s.ToString().c_str());
  // One run of keys: a key frame to one server, a bitmap of the run to each of several
  // (a bit a position: about 2 bits a key at two servers) rather than 8 bytes a key.
  // Resent parts (PS_RESEND) count in both figures.
  const ps::RequestPipeline::Counters after = kv.counters();
  const uint64_t key_bytes = after.push_key_bytes - before.push_key_bytes;
  const uint64_t raw_key_bytes = after.push_raw_key_bytes - before.push_raw_key_bytes;
  EXPECT(raw_key_bytes >= n * sizeof(ps::Key) && key_bytes * 16 < raw_key_bytes,
         "split push: %llu key bytes on the wire for %llu raw", (unsigned long long)key_bytes,
         (unsigned long long)raw_key_bytes);
  std::fill(vals.begin(), vals.end(), -1.0);  // the push must not read them afterwards
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
  // The keys as one run (each server's share as a bitmap of the run), then every key
  // but each 1000th (not one run: each share's keys raw, in a lent block at several
  // servers).
  std::vector<ps::Key> gaps;
  for (size_t i = 0; i < n; ++i) {
    if (i % 1000 != 999) gaps.push_back(keys[i]);
  }
  const double factor = workers * (workers + 1) / 2.0;
  for (const auto& [asked, what] : {std::make_pair(&keys, "split pull of one run"),
                                    std::make_pair(&gaps, "split pull with gaps")}) {
    std::vector<double> got;
    s = kv.Wait(kv.Pull(*asked, &got));
    if (FLAGS_answer_keys == "wrong") {
      EXPECT(!s.ok() && s.message().find("keys other than those asked") != std::string::npos,
             "%s answered with other keys: %s", what, s.ToString().c_str());
      continue;
    }
    EXPECT(s.ok() && got.size() == asked->size(), "%s: %s, %zu values", what,
           s.ToString().c_str(), got.size());
    size_t wrong = 0;
    for (size_t i = 0; i < asked->size() && i < got.size(); ++i) {
      wrong += got[i] != factor * Base((*asked)[i], 0);
    }
    EXPECT(wrong == 0, "%s: %zu of %zu values wrong", what, wrong, asked->size());
  }
}

void RunExact() {
  ps::KVWorker<double> kv(0, 0);
  const int rank = ps::MyRank(), workers = ps::NumWorkers();
  for (int r = 0; r < FLAGS_rounds; ++r) {
    for (const auto& [key, len] : kKeys) {
      std::vector<double> vals(len);
      for (size_t j = 0; j < len; ++j) vals[j] = (rank + 1) * Base(key, j);
      ps::Status s = kv.Wait(kv.Push({key}, vals));
      EXPECT(s.ok(), "push of key %llu: %s", (unsigned long long)key, s.ToString().c_str());
    }
  }
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
  const double factor = FLAGS_rounds * workers * (workers + 1) / 2.0;
  std::vector<ps::SArray<double>> views;  // kept until all is checked
  auto check = [&](const double* got, size_t n, ps::Key key, size_t len, const char* how) {
    EXPECT(n == len, "%s pull of key %llu: %zu values, expected %zu", how, (unsigned long long)key,
           n, len);
    size_t wrong = 0;
    for (size_t j = 0; j < n && j < len; ++j) wrong += got[j] != factor * Base(key, j);
    EXPECT(wrong == 0, "%s pull of key %llu: %zu wrong values", how, (unsigned long long)key,
           wrong);
  };
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [key, len] : kKeys) {
      std::vector<double> vec;
      ps::Status s = kv.Wait(kv.Pull({key}, &vec));
      EXPECT(s.ok(), "pull: %s", s.ToString().c_str());
      check(vec.data(), vec.size(), key, len, "vector");
      ps::SArray<double> view;
      s = kv.Wait(kv.ZPull(ps::SArray<ps::Key>{key}, &view));
      EXPECT(s.ok(), "zpull: %s", s.ToString().c_str());
      views.push_back(view);
      ps::SArray<double> sized(len);
      s = kv.Wait(kv.ZPull(ps::SArray<ps::Key>{key}, &sized));
      EXPECT(s.ok(), "zpull into a sized array: %s", s.ToString().c_str());
      check(sized.data(), sized.size(), key, len, "sized SArray");
    }
  }
  for (size_t i = 0; i < views.size(); ++i) {
    const auto& [key, len] = kKeys[i % kKeys.size()];
    check(views[i].data(), views[i].size(), key, len, "empty SArray");
  }
  RunSplitPush(kv);
  CheckStats(true, true);
  const uint64_t lent = Stats().shm_lent_frames;
  if (FLAGS_expect_lent == 1) EXPECT(lent > 0, "%s lent no ring block", Me().c_str());
  if (FLAGS_expect_lent == 0) {
    EXPECT(lent == 0, "%s sent %llu frames from lent blocks", Me().c_str(),
           (unsigned long long)lent);
  }
}

void RunLoop() {
  ps::KVWorker<double> kv(0, 0);
  const int rank = ps::MyRank();
  const ps::Key key = 100 + rank;
  const size_t len = (1 << 20) / 8;
  std::vector<double> vals(len);
  for (size_t j = 0; j < len; ++j) vals[j] = Base(key, j);
  const bool forever = rank == FLAGS_forever_rank;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(FLAGS_run_s);
  bool said = false;
  auto stop_asked = [] { return !FLAGS_stop_file.empty() && access(FLAGS_stop_file.c_str(), F_OK) == 0; };
  for (uint64_t pushes = 1; forever || (std::chrono::steady_clock::now() < end && !stop_asked());
       ++pushes) {
    ps::Status s = kv.Wait(kv.Push({key}, vals));
    EXPECT(s.ok(), "push: %s", s.ToString().c_str());
    std::vector<double> got;
    s = kv.Wait(kv.Pull({key}, &got));
    EXPECT(s.ok() && got.size() == len && got[len - 1] == pushes * vals[len - 1], "pull %llu: %s",
           (unsigned long long)pushes, s.ToString().c_str());
    if (failures) break;
    ps::VanStats v = Stats();
    if (!said && v.shm_sent_frames > 0 && v.shm_received_frames > 0) {
      Say("shm_app: %s shm in use", Me().c_str());
      said = true;
    }
  }
  Say("shm_app: %s finished", Me().c_str());
}

double RssMiB() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024.0) / 1024.0;
}

// Pushes and pulls 4 keys of 8 MiB at once, three times, and drops what came back.
void MoveLargeValues(ps::KVWorker<double>* kv) {
  constexpr size_t kLen = (8 << 20) / 8;
  const std::vector<ps::Key> keys = {201, 202, 203, 204};
  std::vector<double> vals(keys.size() * kLen, 1.0);
  for (int round = 0; round < 3; ++round) {
    ps::Status s = kv->Wait(kv->Push(keys, vals));
    EXPECT(s.ok(), "push: %s", s.ToString().c_str());
    std::vector<double> got;
    s = kv->Wait(kv->Pull(keys, &got));
    EXPECT(s.ok() && got.size() == vals.size() && got.back() == round + 1.0, "pull: %s",
           s.ToString().c_str());
  }
}

void CheckReleased(double busy, double after, const char* when) {
  Say("shm_app: %s rss after the work %.1f MiB, %s %.1f MiB", Me().c_str(), busy, when, after);
  if (FLAGS_expect_release == 1) {
    EXPECT(busy - after >= 24, "%s gave back only %.1f MiB %s", Me().c_str(), busy - after,
           when);
  } else if (FLAGS_expect_release == 0) {
    EXPECT(busy - after <= 4, "%s gave back %.1f MiB %s with idle trimming off", Me().c_str(),
           busy - after, when);
  }
}

void RunIdle() {
  ps::KVWorker<double> kv(0, 0);
  MoveLargeValues(&kv);
  CheckStats(true, true);
  const double busy = RssMiB();
  // Released: looked at until 24 MiB went back or 20 s passed (the nodes' idle ticks
  // may come late on a loaded machine). Kept: looked at once after 2 s.
  const bool release = FLAGS_expect_release == 1;
  const auto began = std::chrono::steady_clock::now();
  double idle = busy;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(release ? 100 : 2000));
    idle = RssMiB();
  } while (release && busy - idle < 24 &&
           std::chrono::steady_clock::now() - began < std::chrono::seconds(20));
  char when[64];
  std::snprintf(when, sizeof(when), "after %.1f s idle",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  CheckReleased(busy, idle, when);
}

void RunBarrier() {
  ps::KVWorker<double> kv(0, 0);
  MoveLargeValues(&kv);
  CheckStats(true, true);
  const double busy = RssMiB();
  const auto began = std::chrono::steady_clock::now();
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup + ps::kServerGroup);
  const double after = RssMiB();
  char when[64];
  std::snprintf(when, sizeof(when), "right after a barrier of %.0f ms",
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                          began)
                    .count());
  CheckReleased(busy, after, when);
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_mode != "exact" && FLAGS_mode != "loop" && FLAGS_mode != "idle" &&
      FLAGS_mode != "barrier") {
    std::fprintf(stderr, "shm_app: --mode must be exact, loop, idle or barrier\n");
    return 2;
  }
  try {
    ps::Start(0, argv[0]);
    me = std::string(ps::IsWorker()   ? "worker"
                     : ps::IsServer() ? "server"
                                      : "scheduler") +
         " " + std::to_string(ps::MyRank());
    Say("shm_app: %s pid %d started", Me().c_str(), static_cast<int>(getpid()));
    std::unique_ptr<ps::KVServer<double>> server;
    if (ps::IsServer()) {
      server = std::make_unique<ps::KVServer<double>>(0);
      server->set_request_handle(ServerHandle());
    }
    if (ps::IsWorker()) {
      if (FLAGS_mode == "exact") RunExact();
      if (FLAGS_mode == "loop") RunLoop();
      if (FLAGS_mode == "idle") RunIdle();
      if (FLAGS_mode == "barrier") RunBarrier();
    }
    if (ps::IsServer() && FLAGS_mode == "barrier") {
      ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup + ps::kServerGroup);
    }
    ps::Finalize(0, true);
    // A server that holds none of the keys (with several servers) has nothing to show.
    if (ps::IsServer() && FLAGS_mode == "exact" && Stats().received_bytes >= (1 << 20)) {
      CheckStats(true, true);
    }
    PrintStats();
    Say("shm_app: %s finalized", Me().c_str());
  } catch (const ps::Error& e) {
    std::fprintf(stderr, "shm_app: %s: %s\n", Me().c_str(), e.what());
    return 1;
  }
  if (failures) std::fprintf(stderr, "shm_app: %s: %d checks failed\n", Me().c_str(), failures);
  return failures ? 1 : 0;
}
