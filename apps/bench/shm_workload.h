// The shm workload of apps/bench: HerdPS push and pull goodput between a worker and a
// server on one host through the van's shared-memory path, over the socket (tcp or
// ipc, as launched), and a plain memcpy of the same bytes, all measured in the same
// run in interleaved rounds.
//
//   tracker/launch -n 1 -s 1 -- build/apps/bench --workload shm
//
// Both vans switch between the paths at run time (Van::SetPath("shm"); the server on a
// command from the driver), so each round of each point measures one of the three.
#ifndef HERDPS_APPS_BENCH_SHM_WORKLOAD_H_
#define HERDPS_APPS_BENCH_SHM_WORKLOAD_H_

#include <memory>

namespace bench {

// Server side: the store handle the requests go to, which also switches the server's
// van on the driver's command. Keep it alive until ps::Finalize.
std::shared_ptr<void> StartShmServer();

// Worker 0 drives and prints; other workers only wait.
int RunShmWorkload(bool csv);

}  // namespace bench

#endif  // HERDPS_APPS_BENCH_SHM_WORKLOAD_H_
