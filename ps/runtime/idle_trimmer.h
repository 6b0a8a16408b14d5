// IdleTrimmer: PS_IDLE_TRIM_MS, when an idle node should give back the memory kept
// for speed (malloc's free heap, the free part of the van's shared-memory rings).
// Part of the Postoffice; it decides, the Postoffice releases.
//
// Thread safety: none; the control loop only.
#ifndef HERDPS_PS_RUNTIME_IDLE_TRIMMER_H_
#define HERDPS_PS_RUNTIME_IDLE_TRIMMER_H_

#include <chrono>
#include <cstdint>

namespace ps {

class IdleTrimmer {
 public:
  using Clock = std::chrono::steady_clock;

  // Idle means no traffic worth the name for `idle`; busy from `now` on.
  void Start(std::chrono::milliseconds idle, Clock::time_point now);
  // One tick: `traffic_bytes` is the van's bytes sent + received so far. True once per
  // idle spell: time to give memory back.
  bool Tick(uint64_t traffic_bytes, Clock::time_point now);

 private:
  std::chrono::milliseconds idle_{0};
  uint64_t bytes_seen_ = 0;   // traffic_bytes at the last tick
  Clock::time_point busy_at_;  // the last tick that saw traffic
  bool trimmed_ = true;        // nothing to give back before the first traffic
};

}  // namespace ps

#endif  // HERDPS_PS_RUNTIME_IDLE_TRIMMER_H_
