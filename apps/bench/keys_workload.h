// The keys workload of apps/bench: push and pull of many one-float keys per request
// (1e4 .. 1e7), with the key list on the wire as the defaults send it (key frames and
// key caching, docs/pipeline.md) against raw keys (both switched off), in alternating
// rounds of one run; keys per second, wire bytes per key, and memcpy of the same keys
// and values in the same run as the ceiling.
//
//   tracker/launch -n 1 -s 1 -- build/apps/bench --workload keys
//
// The server answers pushes without storing (as ps-lite's test_kv_app_benchmark does)
// and pulls with zeros from a buffer kept per size, so what is measured is the keys'
// path: planning, framing, the van, parsing, the answer's assembly.
#ifndef HERDPS_APPS_BENCH_KEYS_WORKLOAD_H_
#define HERDPS_APPS_BENCH_KEYS_WORKLOAD_H_

#include <memory>

namespace bench {

// Server side: the KV server of the workload. Keep the returned object alive until
// ps::Finalize.
std::shared_ptr<void> StartKeysServer();

// Worker 0 drives and prints; other workers only take part in the final barrier.
int RunKeysWorkload(bool csv);

}  // namespace bench

#endif  // HERDPS_APPS_BENCH_KEYS_WORKLOAD_H_
