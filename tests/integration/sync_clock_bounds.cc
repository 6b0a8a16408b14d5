// Integration: under synchronous aggregation (PS_CONSISTENCY=bsp, 1 worker, 1 server)
// the server takes only the clocks the model allows and leaves no request waiting.
// The worker sends requests with clocks of its choosing through a Customer of its own
// (a KVWorker stamps its real clock); each check prints FAILED when it does not hold.
//
//   1. A push and a pull of clock 10^9 are refused at once with InvalidArgument (the
//      pull would otherwise wait for rounds that never close), and a push without a
//      clock too; a push of the worker's own clock still works.
//   2. A pull of clock 2, which the worker never reaches, waits; the server is then
//      destroyed (between two barriers) and must answer it with Unavailable.
#include <gflags/gflags.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ps/internal/customer.h"
#include "ps/optimizer_server.h"
#include "ps/ps.h"

namespace {

// Requests to server 0 with any clock, answered to a Customer of this app.
class RawRequests {
 public:
  explicit RawRequests(int customer_id)
      : customer_(0, customer_id, [this](ps::Message& msg) { OnAnswer(msg); }) {}

  int Send(bool push, int64_t clock, ps::Key key) {
    const int server = ps::Postoffice::ServerRankToID(0);
    uint64_t id = 0;
    int ts = customer_.NewRequest({server}, &id);
    ps::Message msg;
    msg.meta.app_id = 0;
    msg.meta.customer_id = customer_.customer_id();
    msg.meta.incarnation = customer_.incarnation();
    msg.meta.request = true;
    msg.meta.push = push;
    msg.meta.pull = !push;
    msg.meta.timestamp = ts;
    msg.meta.request_id = id;
    msg.meta.recipient = server;
    msg.meta.clock = clock;
    msg.AddData(ps::SArray<ps::Key>{key});
    if (push) msg.AddData(ps::SArray<float>{1.0f});
    ps::Status sent = ps::Postoffice::Get()->Send(msg);
    if (!sent.ok()) customer_.FinishRequest(ts, sent);
    return ts;
  }
  ps::Status Wait(int ts) { return customer_.WaitRequest(ts); }

 private:
  void OnAnswer(ps::Message& msg) {
    if (msg.meta.request) return;
    customer_.FinishRequest(msg.meta.timestamp,
                            ps::Status::FromWire(msg.meta.status_code, msg.meta.status_message));
  }
  ps::Customer customer_;
};

int failures = 0;

void Expect(bool ok, const std::string& what, const ps::Status& s) {
  std::printf("%s: %s -> %s\n", ok ? "ok" : "FAILED", what.c_str(), s.ToString().c_str());
  if (!ok) ++failures;
}

bool Says(const ps::Status& s, const std::string& what) {
  return s.message().find(what) != std::string::npos;
}

void Barrier() { ps::Postoffice::Get()->Barrier(0, ps::kServerGroup + ps::kWorkerGroup); }

int RunWorker() {
  ps::KVWorker<float> kv(0, 0);
  RawRequests raw(1);
  const ps::Key key = 3;
  ps::Status s = kv.Wait(kv.Push(std::vector<ps::Key>{key}, std::vector<float>{1.0f}));
  Expect(s.ok(), "push of the worker's clock 0", s);

  s = raw.Wait(raw.Send(/*push=*/true, 1000000000, key));
  Expect(s.code() == ps::Status::Code::kInvalidArgument && Says(s, "clocks ahead"),
         "push of clock 10^9", s);
  s = raw.Wait(raw.Send(/*push=*/true, -1, key));
  Expect(s.code() == ps::Status::Code::kInvalidArgument && Says(s, "KVWorker"),
         "push without a clock", s);
  s = raw.Wait(raw.Send(/*push=*/false, 1000000000, key));
  Expect(s.code() == ps::Status::Code::kInvalidArgument && Says(s, "clocks ahead"),
         "pull of clock 10^9", s);

  // Clock 2 is within what the server takes, but this worker never ends clock 1.
  int waiting = raw.Send(/*push=*/false, 2, key);
  // Answered after the server has handled the waiting pull (one connection, one shard).
  std::vector<float> w;
  s = kv.Wait(kv.Pull(std::vector<ps::Key>{key}, &w));
  Expect(s.ok() && w.size() == 1, "pull of the worker's clock 0 behind the waiting one", s);
  Barrier();  // the server destroys its OptimizerServer now
  s = raw.Wait(waiting);
  Expect(s.code() == ps::Status::Code::kUnavailable && Says(s, "shutting down"),
         "pull of clock 2 when the server stops", s);
  Barrier();
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  // Line by line: when a request is never answered, the launcher's timeout kills the
  // node, and the checks printed so far show which one it was.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  ps::Start(0, argv[0]);
  int rc = 0;
  if (ps::IsServer()) {
    ps::OptimizerServerOptions options;
    options.optimizer.kind = ps::OptimizerKind::kSgd;
    options.threads = 1;
    options.sync_aggregation = true;
    auto server = std::make_unique<ps::OptimizerServer>(0, options);
    Barrier();
    server.reset();
    Barrier();
  } else if (ps::IsWorker()) {
    rc = RunWorker();
  }
  ps::Finalize(0, /*do_barrier=*/true);
  return rc;
}
