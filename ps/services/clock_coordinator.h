// ClockCoordinator: the scheduler plugin that keeps the job's clocks. It counts the
// clocks each worker has ended, keeps the minimum over the live workers that have not
// finished, and pushes every new minimum to all workers and servers; a worker that
// ends a clock is answered at once with the minimum and waits (in its ClockClient)
// until the minimum lets it go on. Workers that die, leave or finish stop counting,
// so nobody waits for them. A server that takes a dead one's place gets the current
// minimum when it joins.
//
// Threading: a SchedulerPlugin (one call at a time, on its own thread).
#ifndef HERDPS_PS_CLOCK_COORDINATOR_H_
#define HERDPS_PS_CLOCK_COORDINATOR_H_

#include <cstdint>
#include <map>
#include <string>

#include "ps/consistency.h"
#include "ps/scheduler_plugin.h"

namespace ps {

class ClockCoordinator : public SchedulerPlugin {
 public:
  explicit ClockCoordinator(const ConsistencyModel& model) : model_(model) {}

  void OnStart(PluginContext* ctx) override;
  void OnRequest(const SimpleData& request, PluginContext* ctx) override;
  void OnMembershipChange(const MembershipView& view, PluginContext* ctx) override;

 private:
  struct WorkerClock {
    int64_t ended = 0;      // clocks ended
    bool finished = false;  // ends no more clocks
  };
  // Recomputes the minimum over the counted workers and pushes it if it grew.
  void Update(const MembershipView& view, PluginContext* ctx);

  const ConsistencyModel model_;
  std::map<int, WorkerClock> workers_;  // by node id
  int64_t minimum_ = 0;
  std::map<int, std::string> server_identity_;  // by node id: the process it last knew
};

}  // namespace ps

#endif  // HERDPS_PS_CLOCK_COORDINATOR_H_
