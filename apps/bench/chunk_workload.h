// The chunks workload of apps/bench: how evenly a model of a few large tensors spreads
// over the servers with and without chunking (stored bytes per server, max/mean), and
// push / pull goodput of one large tensor chunked vs whole, in the same run.
//
//   tracker/launch -n 1 -s 4 -- build/apps/bench --workload chunks
//
// Both sides run the built-in OptimizerServer (SGD): app 1 gets chunked requests, app 2
// the same keys whole (KVWorker::set_chunking(false)).
#ifndef HERDPS_APPS_BENCH_CHUNK_WORKLOAD_H_
#define HERDPS_APPS_BENCH_CHUNK_WORKLOAD_H_

#include <memory>

namespace bench {

// Server side: the two optimizer servers and the statistics app. Keep the returned
// object alive until ps::Finalize.
std::shared_ptr<void> StartChunkServers();

// Worker 0 drives and prints; other workers only take part in barriers.
int RunChunkWorkload(bool csv);

}  // namespace bench

#endif  // HERDPS_APPS_BENCH_CHUNK_WORKLOAD_H_
