// IdleTrimmer: PS_IDLE_TRIM_MS, when a node should give back the memory kept for speed
// (malloc's free heap, the free part of the van's shared-memory rings, the kept large
// buffers): once per idle spell, and when it waits in a barrier after traffic.
// Part of the Postoffice; it decides, the Postoffice releases.
//
// Thread safety: none; the Postoffice calls it under its trim lock.
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
  // The node waits in a barrier: its own work before it is done. True when at least
  // 1 MiB moved since the last trim (or a tick saw the node busy since) and the last
  // trim is at least `idle` ago, so a loop of barriers gives memory back (and faults
  // it in again) at most once per period. Leaves the ticks' own count alone.
  bool AtBarrier(uint64_t traffic_bytes, Clock::time_point now);

 private:
  // Traffic below this per tick (heartbeats, ACKs, small requests) neither needs the
  // large buffers malloc keeps nor counts as busy; nor does less since the last trim
  // make a barrier trim.
  static constexpr uint64_t kBusyBytes = 1 << 20;

  std::chrono::milliseconds idle_{0};
  uint64_t bytes_seen_ = 0;     // traffic_bytes at the last tick
  uint64_t bytes_at_trim_ = 0;  // traffic_bytes at the last trim
  Clock::time_point busy_at_;   // the last tick that saw traffic
  bool trimmed_ = true;         // nothing to give back before the first traffic
  Clock::time_point trimmed_at_;  // the last time Tick or AtBarrier said true

  void Note(uint64_t traffic_bytes, Clock::time_point now);
  void Trimmed(uint64_t traffic_bytes, Clock::time_point now);
};

}  // namespace ps

#endif  // HERDPS_PS_RUNTIME_IDLE_TRIMMER_H_
