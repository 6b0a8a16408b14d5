// PluginSeat: runs the registered SchedulerPlugins on the scheduler, each on its own
// SimpleApp thread.
//
// Thread safety: Start and Stop from the thread running ps::Start / ps::Finalize;
// OnMembershipChange from the control loop (it only posts to the plugins' threads).
#ifndef HERDPS_PS_PLUGIN_SEAT_H_
#define HERDPS_PS_PLUGIN_SEAT_H_

#include <memory>
#include <mutex>
#include <vector>

#include "ps/scheduler_plugin.h"

namespace ps {

class Postoffice;

class PluginSeat {
 public:
  explicit PluginSeat(Postoffice* postoffice);
  ~PluginSeat();
  // Creates every registered plugin and calls OnStart on its thread.
  void Start();
  void OnMembershipChange(const MembershipView* view);
  // Calls OnStop on each plugin's thread and destroys the plugins.
  void Stop();

 private:
  class Seat;
  Postoffice* postoffice_;
  std::mutex mu_;  // guards seats_
  std::vector<std::unique_ptr<Seat>> seats_;
};

}  // namespace ps

#endif  // HERDPS_PS_PLUGIN_SEAT_H_
