// Integration: data that reaches a server before its node table is admitted and handed
// to the server's request handle by the thread that receives the data channel, never by
// the node's control loop (which runs no app code).
//
// The server sets its KVServer's handle before ps::Start, so the handle exists when such
// data is admitted; each worker starts without the closing barrier (StartAsync) and
// pushes at once. Run with PS_RESEND=1 and a drop rate on the server: a node table the
// server loses is resent later, and the workers' pushes that came meanwhile wait for it. The server
// says how many messages came before its node table (NodeStats::before_table) and how
// many requests ran its handle on the control loop (which must be none); the test
// driver runs the job several times.
#include <gflags/gflags.h>

#include <atomic>
#include <memory>
#include <vector>

#include "app_expect.h"
#include "ps/internal/event_loop.h"
#include "ps/internal/postoffice.h"
#include "ps/ps.h"

DEFINE_int32(pushes, 20, "pushes per worker");

namespace {

int failures = 0;
std::atomic<int> handled{0}, on_loop{0};

void Handle(const ps::KVMeta& meta, const ps::KVPairs<float>& data, ps::KVServer<float>* server) {
  ++handled;
  ps::EventLoop* loop = ps::Postoffice::Get()->control_loop();
  if (loop && loop->InLoopThread()) ++on_loop;
  ps::KVPairs<float> res;
  if (meta.pull) {
    res.keys = data.keys;
    res.vals = ps::SArray<float>(data.keys.size(), 1.0f);
  }
  server->Response(meta, res);
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  const char* role = std::getenv("PS_ROLE");
  const bool is_server = role && std::string(role) == "server";
  const bool is_worker = role && std::string(role) == "worker";
  std::unique_ptr<ps::KVServer<float>> server;
  if (is_server) {
    server = std::make_unique<ps::KVServer<float>>(0);
    server->set_request_handle(Handle);
  }
  if (is_worker) {
    ps::StartAsync(0, argv[0]);
  } else {
    ps::Start(0, argv[0]);
  }
  if (is_worker) {
    ps::KVWorker<float> kv(0, 0);
    for (int i = 0; i < FLAGS_pushes; ++i) {
      ps::Status s = kv.Wait(kv.Push({static_cast<ps::Key>(ps::MyRank() * 1000 + i)}, {1.0f}));
      EXPECT(s.ok(), "push %d: %s", i, s.ToString().c_str());
    }
  }
  const uint64_t before_table = ps::Postoffice::Get()->stats().before_table;
  ps::Finalize(0, true);
  if (is_server) {
    Say("server %d: %d requests, %llu messages before its node table, %d on the control loop",
        ps::MyRank(), handled.load(), static_cast<unsigned long long>(before_table),
        on_loop.load());
    EXPECT(on_loop.load() == 0, "%d requests ran their handle on the control loop",
           on_loop.load());
  }
  return failures ? 1 : 0;
}
