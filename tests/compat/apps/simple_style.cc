// ps-lite style SimpleApp: the scheduler sends n requests to every node, itself
// included (kScheduler + kServerGroup + kWorkerGroup), right after Start; every node
// answers from its request handle and, once Finalize returns, must have answered all n
// (the handle set just after the app was made; requests that came first wait for it).
#include "ps/ps.h"

using namespace ps;

int num = 0;

void ReqHandle(const SimpleData& req, SimpleApp* app) {
  CHECK_EQ(req.head, 1);
  CHECK_EQ(req.body, "test");
  app->Response(req, "ok");
  ++num;
}

int main(int argc, char* argv[]) {
  const int n = 100;
  Start(0, argv[0]);
  SimpleApp app(0, 0);
  app.set_request_handle(ReqHandle);
  int answers = 0;
  app.set_response_handle([&answers](const SimpleData& res, SimpleApp*) {
    if (res.body == "ok") ++answers;
  });
  int failed = 0;
  if (IsScheduler()) {
    std::vector<int> ts;
    for (int i = 0; i < n; ++i) {
      ts.push_back(app.Request(1, "test", kScheduler + kServerGroup + kWorkerGroup));
    }
    for (int t : ts) failed += !app.Wait(t).ok();
  }
  Finalize(0, true);
  LL << "answered " << num << " of " << n << " requests";
  if (num != n || failed) return 1;
  // Every node (the scheduler too) answered every request.
  if (IsScheduler() && answers != n * (1 + NumServers() + NumWorkers())) return 1;
  return 0;
}
