// OrderPlugin: the scheduler plugin that runs CD-GraB's balancer (a PairBalancer, see
// ps/internal/order_balancer.h) for the workers' example orders. Workers talk to it with
// an OrderClient (ps/order_client.h) under the reserved app id kOrderAppId; the wire
// protocol is in ps/internal/order_protocol.h, the rules in docs/orders.md.
//
// Who takes part: every worker of the job that is alive and has not finished (sent
// kOrderFinish). Epoch t starts in the balancer once each of them has begun it
// (kOrderBegin); a worker that dies or leaves stops being waited for. So every worker of
// a job that uses cdgrab must run an OrderClient with cdgrab. A job whose workers never
// talk to the plugin costs nothing but its idle thread.
//
// A worker one epoch ahead (it has its next order and has begun the next epoch before
// the slowest worker finished this one) has its pairs buffered here until the epoch
// starts; no worker can be two epochs ahead. With the balancer's own buffer, at most
// (num_workers - 1) * floor(n / 2) pairs wait at any time.
//
// Threading: a SchedulerPlugin (one call at a time, on its own thread).
#ifndef HERDPS_PS_ORDER_PLUGIN_H_
#define HERDPS_PS_ORDER_PLUGIN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "ps/internal/order_balancer.h"
#include "ps/scheduler_plugin.h"

namespace ps {

class OrderPlugin : public SchedulerPlugin {
 public:
  void OnStart(PluginContext* ctx) override;
  void OnRequest(const SimpleData& request, PluginContext* ctx) override;
  void OnMembershipChange(const MembershipView& view, PluginContext* ctx) override;

  // The balancer's epoch: -1 until epoch 0 starts.
  int64_t epoch() const { return balancer_ ? balancer_->epoch() : -1; }
  // Pairs received and not yet balanced: waiting in the balancer for a slower worker,
  // or sent for the next epoch before it started.
  size_t buffered_pairs() const;

 private:
  // One worker of the job, by rank (the balancer's worker index).
  struct Worker {
    int id = 0;                // node id
    bool stopped = false;      // finished, died or left: never waited for again
    int64_t begun = -1;        // the last epoch it began
    int received = 0;          // pairs of epoch `begun` received
    std::vector<int> order;    // its order for epoch `begun`, until the balancer starts it
    std::vector<float> early;  // pairs of epoch `begun` received before it started
    bool next_sent = false;    // its next order of the balancer's epoch went out
  };

  void Begin(Worker* w, int rank, const SimpleData& request, PluginContext* ctx);
  void Pairs(Worker* w, int rank, const SimpleData& request, PluginContext* ctx);
  // The worker takes part no more. The pairs of the balancer's epoch it sent in full stay
  // (nobody waits for them); with some missing it is removed from the epoch.
  void Stop(Worker* w, int rank);
  // Sends every next order that is ready, and starts the next epoch once every worker
  // that takes part has begun it; repeatedly, as one may enable the other.
  void Update(PluginContext* ctx);
  void StartEpoch(int64_t epoch);

  std::vector<Worker> workers_;  // by rank
  // Fixed by the first kOrderBegin; every later one must agree.
  bool configured_ = false;
  int num_examples_ = 0;
  int dim_ = 0;
  uint64_t seed_ = 0;
  std::unique_ptr<PairBalancer> balancer_;  // from the start of epoch 0
};

}  // namespace ps

#endif  // HERDPS_PS_ORDER_PLUGIN_H_
