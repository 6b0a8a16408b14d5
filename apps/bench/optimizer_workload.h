// The optimizer workload of apps/bench: server throughput (keys/s) of every
// server-side optimizer with 1 and T shard threads, and the server's memory per key.
#ifndef HERDPS_APPS_BENCH_OPTIMIZER_WORKLOAD_H_
#define HERDPS_APPS_BENCH_OPTIMIZER_WORKLOAD_H_

#include <memory>
#include <vector>

namespace bench {

// Server side: starts one OptimizerServer per (optimizer, threads) configuration plus
// the statistics app. Keep the returned object alive until ps::Finalize.
std::shared_ptr<void> StartOptimizerServers();

// Worker side: drives every configuration; worker 0 prints the table.
int RunOptimizerWorkload(bool csv);

// Server side, after ps::Finalize: prints keys held and memory per key.
void ReportOptimizerServerMemory(const std::shared_ptr<void>& servers, double rss_start_mib);

}  // namespace bench

#endif  // HERDPS_APPS_BENCH_OPTIMIZER_WORKLOAD_H_
