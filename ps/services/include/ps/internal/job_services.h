// JobServices: the job services of this process, as the runtime sees them
// (NodeServices): the node's clocks (ClockClient) on workers and servers, the
// scheduler plugins (the clock coordinator, the order plugin, the app's own) on the
// scheduler. The one instance installs itself in the Postoffice when the library loads
// (and ps::Start asks for it, to say so where a node starts).
//
// Thread safety: Get() from any thread; clocks() from any thread between the node's
// join and its Finalize (it is null outside, and on the scheduler); the NodeServices
// hooks as that interface says.
#ifndef PS_INTERNAL_JOB_SERVICES_H_
#define PS_INTERNAL_JOB_SERVICES_H_

#include <atomic>
#include <memory>

#include "ps/internal/clock_client.h"
#include "ps/internal/node_services.h"

namespace ps {

class PluginSeat;

class JobServices final : public NodeServices {
 public:
  // The process's instance, installed in Postoffice::Get() on the first call; never
  // destroyed (the runtime may call it until exit).
  static JobServices* Get();

  // This node's clocks (see ps/internal/clock_client.h); null on the scheduler and
  // outside Start..Finalize.
  ClockClient* clocks() { return clocks_.load(std::memory_order_acquire); }

  void OnJoined(Postoffice* postoffice) override;
  void OnLeaving(Postoffice* postoffice) override;
  void OnStopping() override;
  void OnMembershipChange(const MembershipView* view) override;

 private:
  JobServices();
  ~JobServices() override;

  std::unique_ptr<PluginSeat> plugins_;  // the scheduler's; idle elsewhere
  std::unique_ptr<ClockClient> owned_clocks_;  // changed only by Start/Finalize's thread
  std::atomic<ClockClient*> clocks_{nullptr};  // owned_clocks_, for any thread
};

}  // namespace ps

#endif  // PS_INTERNAL_JOB_SERVICES_H_
