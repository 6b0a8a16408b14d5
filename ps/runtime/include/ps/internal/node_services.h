// NodeServices: what runs beside a node's runtime and follows its life: the job's
// clocks on every node, the scheduler's plugins on the scheduler. The runtime calls
// these hooks at fixed points of Start and Finalize and knows no service by name; the
// floor above it (ps/services, JobServices) implements them and installs itself
// (Postoffice::SetServices) when the library loads, before any node starts.
//
// Thread safety: OnJoined, OnLeaving and OnStopping come from the thread
// in ps::Start / ps::Finalize, in that order, once per Start..Finalize; OnMembershipChange
// comes from the control loop at any time while the runtime runs (also before
// OnJoined), and must only hand work on.
#ifndef PS_INTERNAL_NODE_SERVICES_H_
#define PS_INTERNAL_NODE_SERVICES_H_

namespace ps {

class Postoffice;
struct MembershipView;

class NodeServices {
 public:
  virtual ~NodeServices() = default;
  // The node has joined: its table, consistency model and placement are set. Runs
  // before the Start barrier, so that a service's first messages may follow it at once.
  virtual void OnJoined(Postoffice* postoffice) = 0;
  // A Finalize call, before its barrier.
  virtual void OnLeaving(Postoffice* postoffice) = 0;
  // The last Finalize, after this node left the job and before the runtime stops:
  // the services end their work and release what they hold of the runtime.
  virtual void OnStopping() = 0;
  // The job's membership is now `view` (valid for the process).
  virtual void OnMembershipChange(const MembershipView* view) = 0;
};

}  // namespace ps

#endif  // PS_INTERNAL_NODE_SERVICES_H_
