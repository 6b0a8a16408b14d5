// The codecs workload of apps/bench: for each gradient codec, encode and decode
// throughput next to memcpy of the same bytes (in the worker, no network), then push
// goodput and bytes per push through the servers next to uncompressed pushes measured
// in alternating rounds, and pulls with fp16 answers next to raw ones.
//
//   tracker/launch -n 1 -s 1 -- build/apps/bench --workload codecs
//
// The gradient is N(0, 1) noise (fixed seed); threshold's tau applies to that scale.
#ifndef HERDPS_APPS_BENCH_CODEC_WORKLOAD_H_
#define HERDPS_APPS_BENCH_CODEC_WORKLOAD_H_

#include <memory>

namespace bench {

// Server side: the store handle the pushes go to. Keep it alive until ps::Finalize.
std::shared_ptr<void> StartCodecServers();

// Worker 0 drives and prints; other workers only wait.
int RunCodecWorkload(bool csv);

}  // namespace bench

#endif  // HERDPS_APPS_BENCH_CODEC_WORKLOAD_H_
