// The waiters workload of apps/bench: several threads of one worker, each pushing and
// pulling its own key one request at a time and waiting for each, with the waiting
// threads receiving the data channel themselves (PS_RECEIVE_IN_WAIT) and without, in
// alternating rounds of one run: per-request latency (p50, p99, max) of both.
//
//   tracker/launch -n 1 -s 1 -- build/apps/bench --workload waiters
//
// The worker's van switches at run time (Van::SetPath("receive_in_wait")).
#ifndef HERDPS_APPS_BENCH_WAITERS_WORKLOAD_H_
#define HERDPS_APPS_BENCH_WAITERS_WORKLOAD_H_

#include <memory>

namespace bench {

// Server side: the store handle the requests go to. Keep it alive until ps::Finalize.
std::shared_ptr<void> StartWaitersServer();

// Worker 0 drives and prints; other workers only wait.
int RunWaitersWorkload(bool csv);

}  // namespace bench

#endif  // HERDPS_APPS_BENCH_WAITERS_WORKLOAD_H_
