// How every bench workload's worker ends: it waits for the other workers, so that no
// server stops while one still measures, and turns its count of failed requests into
// the process's exit status.
#ifndef HERDPS_APPS_BENCH_WORKLOAD_END_H_
#define HERDPS_APPS_BENCH_WORKLOAD_END_H_

#include <cstdio>

#include "ps/ps.h"

namespace bench {

// Returns 0 when nothing failed, else 1 after saying how many of `what` failed.
inline int EndWorkerRun(int failures, const char* what = "requests") {
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
  if (failures == 0) return 0;
  std::fprintf(stderr, "bench: %d %s failed (see the log)\n", failures, what);
  return 1;
}

}  // namespace bench

#endif  // HERDPS_APPS_BENCH_WORKLOAD_END_H_
