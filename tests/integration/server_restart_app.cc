// Integration: a server's death, with the restart path or with replication
// (docs/fault-tolerance.md). Driven by server_restart_test.py (which kills a server
// mid-run, starts a new process in its place and checks the counts printed here) and
// replication_test.py (which kills a server of a job with PS_REPLICATION=2, or compares
// the replicas' states).
//
// Servers run an OptimizerServer (SGD, learning rate 1, zeros) whose checkpoints come
// from PS_CHECKPOINT_DIR / PS_CHECKPOINT_EVERY; a push of -1 adds 1, so every key is a
// counter. Each worker pushes -1 to --keys_per_push of --keys keys at a time (the next
// ones, round robin: each push a part per server of a key list), with
// --window pushes in flight (waiting for the oldest before it issues the next), until
// --pushes were acknowledged; it counts the acknowledged ones. A push that fails (its
// server died) is not counted: the worker asks KVWorker::Restarts every --retry_ms and
// pushes its key again once the server is back. At the end every worker
// asks Restarts once more and prints
//   "server_restart_app: worker R acknowledged A lost L unacknowledged_applied U restarts N"
// and, after a worker barrier, worker 0 pulls every key and prints
//   "server_restart_app: counted C over K keys".
// With --value_len L each key holds L values, each push adds 1 to all of them (with
// PS_CHUNK_BYTES under 4 L the value is stored in chunks on several servers); C is
// then the sum of all values over L, and worker 0 also prints
//   "server_restart_app: D keys whose values disagree"
// (a chunk that lost or doubled an update, where the others did not).
// A lost-update count that is right gives sum(A) - C == sum(L) - sum(U) (times
// --keys_per_push: C counts keys, A pushes).
//
// Each worker also prints, after its counts, its acknowledged pushes per 50 ms from
// its first push on (wall clock, CLOCK_REALTIME, comparable with the driver's
// time.time()): "server_restart_app: worker R acks per 50 ms from T: n0 n1 ...".
//
// With --save_dir each server saves its whole state to <dir>/server-<rank>.ckpt after
// ps::Finalize (every push acknowledged by then); --optimizer picks the server's
// optimizer (counters need sgd). A node whose ps::Finalize fails (ps::Error: the job gave
// it up) prints why and exits 1.
#include <gflags/gflags.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <deque>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ps/optimizer_server.h"
#include "ps/ps.h"

DEFINE_int32(keys, 64, "counters (keys 0 .. keys-1, spread over the servers)");
DEFINE_int32(pushes, 3000, "acknowledged pushes each worker makes");
DEFINE_int32(keys_per_push, 1, "counters each push adds 1 to (at most --keys)");
DEFINE_int32(value_len, 1, "values of each key (each push adds 1 to all of them)");
DEFINE_bool(push_pull, false, "push with KVWorker::PushPull (the values read are not used)");
DEFINE_int32(push_gap_us, 1000, "pause between two pushes");
DEFINE_int32(window, 1, "pushes in flight per worker (1: each waited for before the next)");
DEFINE_int32(retry_ms, 100, "pause after a failed push");
DEFINE_string(optimizer, "sgd", "the servers' optimizer (sgd with lr 1 makes counters)");
DEFINE_string(save_dir, "", "servers save <dir>/server-<rank>.ckpt after ps::Finalize");
DEFINE_string(marker, "", "ignored; lets the test driver find this run's processes");

namespace {

void Say(const char* format, ...) __attribute__((format(printf, 1, 2)));
void Say(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::printf("server_restart_app: ");
  std::vprintf(format, args);
  std::printf("\n");
  std::fflush(stdout);
  va_end(args);
}

double WallNow() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Tally {
  uint64_t lost = 0;
  uint64_t unacknowledged_applied = 0;
  int restarts = 0;
};

void Note(const std::vector<ps::ServerRestart>& restarts, int rank, Tally* tally) {
  for (const ps::ServerRestart& r : restarts) {
    Say("worker %d: %s", rank, r.DebugString().c_str());
    tally->lost += r.lost();
    tally->unacknowledged_applied += r.applied_unacknowledged();
    ++tally->restarts;
  }
}

int RunWorker() {
  const int rank = ps::MyRank();
  ps::KVWorker<float> kv(0, 0);
  Tally tally;
  uint64_t acknowledged = 0;
  uint64_t failed = 0;
  uint64_t wrong_pulls = 0;  // --push_pull: answers without a value >= 1 per key
  int next_key = rank % FLAGS_keys;
  Say("worker %d pid %d started", rank, static_cast<int>(getpid()));
  const double started = WallNow();
  std::vector<uint32_t> acks_per_bucket;  // per 50 ms since `started`
  // Keys of acknowledged pushes, said once all are (a test that adds a server waits for
  // it: then every key is on a server before the add).
  std::vector<bool> key_acknowledged(static_cast<size_t>(std::max(FLAGS_keys, 0)), false);
  size_t keys_acknowledged = 0;
  // Pushes issued and not waited for yet (their timestamps and keys, oldest first), and
  // the keys of failed pushes, pushed again.
  struct InFlight {
    int timestamp;
    std::vector<ps::Key> keys;
    std::unique_ptr<std::vector<float>> pulled;  // --push_pull: written until it ends
  };
  std::deque<InFlight> in_flight;
  std::deque<std::vector<ps::Key>> again;
  const int per_push = std::min(std::max(FLAGS_keys_per_push, 1), FLAGS_keys);
  const size_t value_len = static_cast<size_t>(std::max(FLAGS_value_len, 1));
  const size_t window = static_cast<size_t>(std::max(FLAGS_window, 1));
  while (acknowledged < static_cast<uint64_t>(FLAGS_pushes)) {
    while (in_flight.size() < window &&
           acknowledged + in_flight.size() < static_cast<uint64_t>(FLAGS_pushes)) {
      std::vector<ps::Key> keys;
      if (!again.empty()) {
        keys = again.front();
        again.pop_front();
      } else {
        for (int i = 0; i < per_push; ++i) {
          keys.push_back(static_cast<ps::Key>(next_key));
          next_key = (next_key + 1) % FLAGS_keys;
        }
        std::sort(keys.begin(), keys.end());
      }
      const std::vector<float> ones(keys.size() * value_len, -1.0f);
      std::unique_ptr<std::vector<float>> pulled;
      int timestamp = 0;
      if (FLAGS_push_pull) {
        pulled = std::make_unique<std::vector<float>>();
        timestamp = kv.PushPull(keys, ones, pulled.get());
      } else {
        timestamp = kv.Push(keys, ones);
      }
      in_flight.push_back(InFlight{timestamp, std::move(keys), std::move(pulled)});
      if (FLAGS_push_gap_us > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(FLAGS_push_gap_us));
      }
    }
    const int timestamp = in_flight.front().timestamp;
    std::vector<ps::Key> keys = std::move(in_flight.front().keys);
    std::unique_ptr<std::vector<float>> pulled = std::move(in_flight.front().pulled);
    in_flight.pop_front();
    ps::Status s = kv.Wait(timestamp);
    if (s.ok()) {
      ++acknowledged;
      if (pulled) {
        // SGD at learning rate 1: each value counts the pushes to its key, this one too.
        bool right = pulled->size() == keys.size() * value_len;
        for (float v : *pulled) right = right && v >= 1.0f;
        if (!right && wrong_pulls++ == 0) {
          Say("worker %d: a push-pull answered %zu values for %zu keys, or a value below 1",
              rank, pulled->size(), keys.size());
        }
      }
      const size_t bucket = static_cast<size_t>((WallNow() - started) / 0.05);
      if (bucket >= acks_per_bucket.size()) acks_per_bucket.resize(bucket + 1, 0);
      ++acks_per_bucket[bucket];
      if (keys_acknowledged < key_acknowledged.size()) {
        for (ps::Key key : keys) {
          if (key < key_acknowledged.size() && !key_acknowledged[key]) {
            key_acknowledged[key] = true;
            if (++keys_acknowledged == key_acknowledged.size()) {
              Say("worker %d: every key acknowledged", rank);
            }
          }
        }
      }
      continue;
    }
    again.push_back(std::move(keys));
    if (failed++ == 0) Say("worker %d: a push failed: %s", rank, s.ToString().c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_retry_ms));
    Note(kv.Restarts(), rank, &tally);
  }
  Note(kv.Restarts(), rank, &tally);
  Say("worker %d acknowledged %llu lost %llu unacknowledged_applied %llu restarts %d failed %llu",
      rank, static_cast<unsigned long long>(acknowledged),
      static_cast<unsigned long long>(tally.lost),
      static_cast<unsigned long long>(tally.unacknowledged_applied), tally.restarts,
      static_cast<unsigned long long>(failed));
  std::string buckets;
  for (uint32_t n : acks_per_bucket) buckets += " " + std::to_string(n);
  Say("worker %d acks per 50 ms from %.3f:%s", rank, started, buckets.c_str());
  if (FLAGS_push_pull) {
    Say("worker %d push-pull answers wrong %llu", rank,
        static_cast<unsigned long long>(wrong_pulls));
  }
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
  if (rank == 0) {
    std::vector<ps::Key> keys;
    for (int k = 0; k < FLAGS_keys; ++k) keys.push_back(static_cast<ps::Key>(k));
    std::vector<float> values;
    ps::Status s = kv.Wait(kv.Pull(keys, &values));
    if (!s.ok()) {
      Say("worker 0: the final pull failed: %s", s.ToString().c_str());
      return 1;
    }
    if (values.size() != keys.size() * value_len) {
      Say("worker 0: the final pull answered %zu values for %zu keys of %zu", values.size(),
          keys.size(), value_len);
      return 1;
    }
    double counted = 0;
    for (float v : values) counted += v;
    Say("counted %.0f over %d keys", counted / static_cast<double>(value_len), FLAGS_keys);
    if (value_len > 1) {
      int disagree = 0;
      for (size_t k = 0; k < keys.size(); ++k) {
        const float* v = values.data() + k * value_len;
        if (std::any_of(v, v + value_len, [v](float x) { return x != v[0]; })) ++disagree;
      }
      Say("%d keys whose values disagree", disagree);
    }
  }
  return 0;
}

// ps::Finalize, or why it failed (ps::Error: the job gave this node up, as a server
// declared dead or one whose add was called off): false then.
bool Finalized() {
  try {
    ps::Finalize(0, true);
    return true;
  } catch (const ps::Error& e) {
    Say("%s %d: ps::Finalize failed: %s", ps::IsServer() ? "server" : "worker", ps::MyRank(),
        e.what());
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0, argv[0]);
  int rc = 0;
  if (ps::IsServer()) {
    ps::OptimizerServerOptions options;
    ps::Status valid = ps::ParseOptimizerKind(FLAGS_optimizer, &options.optimizer.kind);
    if (!valid.ok()) {
      Say("--optimizer: %s", valid.ToString().c_str());
      return 2;
    }
    options.optimizer.lr = options.optimizer.kind == ps::OptimizerKind::kSgd ? 1 : 0.01;
    auto server = std::make_unique<ps::OptimizerServer>(0, options);
    const int rank = ps::MyRank();
    ps::OptimizerServer::Restored restored = server->restored();
    Say("server %d pid %d started%s%s", rank, static_cast<int>(getpid()),
        restored.checkpoint.empty() ? "" : " from ", restored.checkpoint.c_str());
    if (!Finalized()) return 1;
    if (!FLAGS_save_dir.empty()) {
      std::string path = FLAGS_save_dir + "/server-" + std::to_string(rank) + ".ckpt";
      ps::Status saved = server->SaveCheckpoint(path);
      Say("server %d saved %s: %s", rank, path.c_str(), saved.ToString().c_str());
      if (!saved.ok()) return 1;
    }
    return 0;
  }
  if (ps::IsWorker()) rc = RunWorker();
  return Finalized() ? rc : 1;
}
