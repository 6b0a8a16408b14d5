// Integration: the job half of the forgery test (forgery_test.py runs it with 1 server
// and 2 workers, and runs tests/integration/forger.cc, a process outside the job, in
// between). The nodes print what the forger needs (endpoints, the ids of a request in
// flight) and "READY <phase>" when a phase is set up; the driver answers by running the
// forger and then writing <sync_dir>/forger_<phase>_done holding how many messages it
// forged. Each node checks its own outcomes and prints one "STATS" line at the end.
//
// Phases, on worker 0 unless said otherwise:
//   push     worker 0 pushes (k+1) to keys 0..K-1; the forger pushes other values in
//            the workers' names; once the server has counted them as forged, a pull
//            must give exactly (k+1).
//   answer   worker 0 pulls through a server handle that holds its answer until
//            worker 0 writes <sync_dir>/release_slow; the forger answers in the
//            server's name, copying the request's ids; once worker 0 counted them,
//            the pull must still be in flight, and then give exactly (k+1).
//   barrier  worker 0 waits in a worker barrier; the forger releases it in the
//            scheduler's name; worker 1 enters the barrier only after worker 0 counted
//            the forgeries (plus 1 s), so an early release is seen by worker 0.
//   final    worker 1 pushes 2(k+1); after a barrier both pull 3(k+1).
#include <gflags/gflags.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ps/ps.h"

DEFINE_string(sync_dir, "", "directory shared with the driver for the phase hand-offs");
DEFINE_int32(keys, 400, "keys 0..keys-1 are pushed and pulled");
DEFINE_int32(wait_s, 60, "bound on every wait for the driver or the other worker");
DEFINE_bool(print_identity, false,
            "print this node's routing identity (for the driver's self-check only: with "
            "it the forger passes the sender check and the test must fail)");

namespace {

constexpr int kCmdForged = 1;  // pull: the server's forged_messages, as one value
constexpr int kCmdSlow = 2;    // pull: answered once <sync_dir>/release_slow exists

std::atomic<int> failures{0};  // the main thread and the barrier watcher
#define EXPECT(cond, ...)                         \
  do {                                            \
    if (!(cond)) {                                \
      std::printf("FAILED %s: ", #cond);          \
      std::printf(__VA_ARGS__);                   \
      std::printf("\n");                          \
      std::fflush(stdout);                        \
      ++failures;                                 \
    }                                             \
  } while (0)

using Clock = std::chrono::steady_clock;

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

std::string SyncPath(const std::string& name) { return FLAGS_sync_dir + "/" + name; }

bool Exists(const std::string& name) {
  struct stat st;
  return stat(SyncPath(name).c_str(), &st) == 0;
}

void Touch(const std::string& name) {
  std::string tmp = SyncPath(name + ".tmp");
  { std::ofstream(tmp) << "1\n"; }
  std::rename(tmp.c_str(), SyncPath(name).c_str());
}

// Waits (bounded) for the driver's file <name>; returns the number in it, -1 if it
// never came.
long WaitForFile(const std::string& name) {
  auto deadline = Clock::now() + std::chrono::seconds(FLAGS_wait_s);
  while (Clock::now() < deadline) {
    if (Exists(name)) {
      long n = -1;
      std::ifstream(SyncPath(name)) >> n;
      return n;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

uint64_t MyForged() { return ps::Postoffice::Get()->stats().forged_messages; }

// Polls until count() >= target or the bound passes; returns the last count.
template <typename F>
uint64_t WaitForCount(F count, uint64_t target) {
  auto deadline = Clock::now() + std::chrono::seconds(FLAGS_wait_s);
  uint64_t n = count();
  while (n < target && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    n = count();
  }
  return n;
}

void PrintStats(const char* who) {
  ps::NodeStats s = ps::Postoffice::Get()->stats();
  std::printf("STATS %s forged_messages=%llu refused_joins=%llu from_gone_nodes=%llu\n", who,
              static_cast<unsigned long long>(s.forged_messages),
              static_cast<unsigned long long>(s.refused_joins),
              static_cast<unsigned long long>(s.from_gone_nodes));
  std::fflush(stdout);
}

std::vector<ps::Key> AllKeys() {
  std::vector<ps::Key> keys;
  for (int k = 0; k < FLAGS_keys; ++k) keys.push_back(static_cast<ps::Key>(k));
  return keys;
}

// m(k+1) for each key k in 0..K-1.
std::vector<float> Scaled(float m) {
  std::vector<float> vals;
  for (int k = 0; k < FLAGS_keys; ++k) vals.push_back(m * static_cast<float>(k + 1));
  return vals;
}

size_t CountWrong(const std::vector<float>& got, float m) {
  if (got.size() != static_cast<size_t>(FLAGS_keys)) return FLAGS_keys;
  size_t wrong = 0;
  for (int k = 0; k < FLAGS_keys; ++k) wrong += got[k] != m * static_cast<float>(k + 1);
  return wrong;
}

// The server: a float store (push adds, pull reads) plus the two test commands.
class TestServer {
 public:
  TestServer() : server_(0) {
    server_.set_request_handle(
        [this](const ps::KVMeta& m, const ps::KVPairs<float>& d, ps::KVServer<float>* srv) {
          Handle(m, d, srv);
        });
  }
  ~TestServer() {
    for (auto& t : delayed_) t.join();
  }

 private:
  void Handle(const ps::KVMeta& m, const ps::KVPairs<float>& d, ps::KVServer<float>* srv) {
    if (m.cmd == kCmdForged) {
      ps::KVPairs<float> res;
      res.keys = d.keys;
      res.vals = ps::SArray<float>(1, static_cast<float>(MyForged()));
      srv->Response(m, res);
      return;
    }
    if (m.push) {
      for (size_t i = 0; i < d.keys.size(); ++i) store_[d.keys[i]] += d.vals[i];
    }
    if (!m.pull) {
      srv->Response(m);
      return;
    }
    ps::KVPairs<float> res;
    res.keys = d.keys;
    res.vals.resize(d.keys.size());
    for (size_t i = 0; i < d.keys.size(); ++i) res.vals[i] = store_[d.keys[i]];
    if (m.cmd != kCmdSlow) {
      srv->Response(m, res);
      return;
    }
    std::printf("SLOW_PULL request_id=%llu incarnation=%llu timestamp=%d\n",
                static_cast<unsigned long long>(m.request_id),
                static_cast<unsigned long long>(m.incarnation), m.timestamp);
    std::fflush(stdout);
    // Answered later from another thread, so that this server keeps serving meanwhile.
    delayed_.emplace_back([m, res, srv] {
      auto deadline = Clock::now() + std::chrono::seconds(FLAGS_wait_s);
      while (!Exists("release_slow") && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      srv->Response(m, res);
    });
  }

  std::map<ps::Key, float> store_;  // the handle's thread only
  std::vector<std::thread> delayed_;
  ps::KVServer<float> server_;  // last: closed first, so no handle runs after
};

// Waits for request ts at most --wait_s. A request still unanswered then may write its
// output later, into a vector that is gone: the node stops at once instead.
ps::Status Finish(ps::KVWorker<float>& kv, int ts) {
  ps::Status s = kv.Wait(ts, std::chrono::seconds(FLAGS_wait_s));
  if (s.code() == ps::Status::Code::kTimeout) {
    std::printf("FAILED: request %d not answered within %d s; exiting\n", ts, FLAGS_wait_s);
    std::fflush(stdout);
    std::_Exit(1);
  }
  return s;
}

uint64_t ServerForged(ps::KVWorker<float>& kv) {
  std::vector<float> out;
  ps::Status s = Finish(kv, kv.Pull({0}, &out, nullptr, kCmdForged));
  return s.ok() && out.size() == 1 ? static_cast<uint64_t>(out[0]) : 0;
}

void PhasePush(ps::KVWorker<float>& kv, const std::vector<ps::Key>& keys) {
  ps::Status s = Finish(kv, kv.Push(keys, Scaled(1)));
  EXPECT(s.ok(), "worker 0's push: %s", s.ToString().c_str());
  uint64_t base = ServerForged(kv);
  Say("READY push");
  long forged = WaitForFile("forger_push_done");
  EXPECT(forged > 0, "the driver never reported the forged pushes");
  uint64_t counted = WaitForCount([&] { return ServerForged(kv); }, base + std::max(0L, forged));
  std::vector<float> out;
  s = Finish(kv, kv.Pull(keys, &out));
  size_t wrong = CountWrong(out, 1);
  std::printf("PHASE push: forger sent %ld, server counted %llu forged; pull %s, %zu keys, "
              "%zu wrong\n",
              forged, static_cast<unsigned long long>(counted - base), s.ToString().c_str(),
              out.size(), wrong);
  std::fflush(stdout);
  EXPECT(counted >= base + forged, "the server did not count every forged push");
  EXPECT(s.ok() && wrong == 0, "pulled values changed by forged pushes");
}

void PhaseAnswer(ps::KVWorker<float>& kv, const std::vector<ps::Key>& keys) {
  uint64_t base = MyForged();
  std::vector<float> out;
  int ts = kv.Pull(keys, &out, nullptr, kCmdSlow);
  Say("READY answer ts=" + std::to_string(ts));
  long forged = WaitForFile("forger_answer_done");
  EXPECT(forged > 0, "the driver never reported the forged answers");
  uint64_t counted = WaitForCount(MyForged, base + std::max(0L, forged));
  // Every forged answer has been looked at: the pull must still be waiting for the
  // real one.
  ps::Status early = kv.Wait(ts, std::chrono::milliseconds(0));
  Touch("release_slow");
  ps::Status s = Finish(kv, ts);
  size_t wrong = CountWrong(out, 1);
  std::printf("PHASE answer: forger sent %ld, worker 0 counted %llu forged; before the real "
              "answer the pull was %s; pull %s, %zu keys, %zu wrong; dropped_answers=%llu\n",
              forged, static_cast<unsigned long long>(counted - base),
              early.code() == ps::Status::Code::kTimeout ? "in flight" : "FINISHED",
              s.ToString().c_str(), out.size(), wrong,
              static_cast<unsigned long long>(kv.dropped_answers()));
  std::fflush(stdout);
  EXPECT(counted >= base + forged, "worker 0 did not count every forged answer");
  EXPECT(early.code() == ps::Status::Code::kTimeout,
         "a forged answer finished the pull: %s", early.ToString().c_str());
  EXPECT(s.ok() && wrong == 0, "pulled values are not the server's");
}

void PhaseBarrier() {
  uint64_t base = MyForged();
  std::thread watcher([base] {
    // Barrier below is entered within microseconds; the forgeries must find it waiting.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Say("READY barrier");
    long forged = WaitForFile("forger_barrier_done");
    uint64_t counted = WaitForCount(MyForged, base + std::max(0L, forged));
    std::printf("PHASE barrier: forger sent %ld, worker 0 counted %llu forged\n", forged,
                static_cast<unsigned long long>(counted - base));
    std::fflush(stdout);
    EXPECT(forged > 0 && counted >= base + forged,
           "worker 0 did not count every forged barrier release");
    Touch("w0_saw_barrier_forgeries");
  });
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
  bool worker1_there = Exists("w1_entering_barrier");
  watcher.join();
  std::printf("PHASE barrier: released %s worker 1 entered it\n",
              worker1_there ? "after" : "BEFORE");
  std::fflush(stdout);
  EXPECT(worker1_there, "the barrier was released before worker 1 entered it");
}

void RunWorker() {
  ps::KVWorker<float> kv(0, 0);
  std::vector<ps::Key> keys = AllKeys();
  int rank = ps::MyRank();
  std::printf("RANK worker %d id %d\n", rank, ps::Postoffice::Get()->my_id());
  std::fflush(stdout);
  if (rank == 0) {
    const ps::Node& me = ps::Postoffice::Get()->my_node();
    Say("ENDPOINT worker0 " + me.endpoint + " " + me.control_endpoint);
    PhasePush(kv, keys);
    PhaseAnswer(kv, keys);
    PhaseBarrier();
  } else {
    long seen = WaitForFile("w0_saw_barrier_forgeries");
    EXPECT(seen > 0, "worker 0 never reported the barrier forgeries");
    std::this_thread::sleep_for(std::chrono::seconds(1));
    Touch("w1_entering_barrier");
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
    ps::Status s = Finish(kv, kv.Push(keys, Scaled(2)));
    EXPECT(s.ok(), "worker 1's push: %s", s.ToString().c_str());
  }
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
  std::vector<float> out;
  ps::Status s = Finish(kv, kv.Pull(keys, &out));
  size_t wrong = CountWrong(out, 3);
  std::printf("PHASE final: worker %d pull %s, %zu keys, %zu wrong\n", rank,
              s.ToString().c_str(), out.size(), wrong);
  std::fflush(stdout);
  EXPECT(s.ok() && wrong == 0, "final values are not what the workers pushed");
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_sync_dir.empty()) {
    std::fprintf(stderr, "--sync_dir is required\n");
    return 2;
  }
  ps::Start(0, argv[0]);
  if (FLAGS_print_identity) {
    Say("IDENTITY node " + std::to_string(ps::Postoffice::Get()->my_id()) + " " +
        ps::Postoffice::Get()->my_node().identity);
  }
  std::unique_ptr<TestServer> server;
  if (ps::IsServer()) {
    const ps::Node& me = ps::Postoffice::Get()->my_node();
    Say("ENDPOINT server " + me.endpoint + " " + me.control_endpoint);
    server = std::make_unique<TestServer>();
  }
  if (ps::IsWorker()) RunWorker();
  // The scheduler's count of refused joins goes with its role at Finalize; the joins
  // were all refused before the job came together, i.e. before Start returned.
  if (ps::IsScheduler()) PrintStats("scheduler");
  ps::Finalize(0, true);
  server.reset();
  if (ps::IsServer()) PrintStats("server");
  if (ps::IsWorker()) PrintStats(ps::MyRank() == 0 ? "worker0" : "worker1");
  return failures ? 1 : 0;
}
