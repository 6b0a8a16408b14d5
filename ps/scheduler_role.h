// SchedulerRole: what the scheduler node does for the job: it admits nodes, assigns
// their ids and ranks, hands every node the node table, and releases barriers.
//
// Thread safety: used only on the scheduler's van receive thread.
#ifndef HERDPS_PS_SCHEDULER_ROLE_H_
#define HERDPS_PS_SCHEDULER_ROLE_H_

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "ps/internal/config.h"
#include "ps/internal/message.h"

namespace ps {

class Postoffice;

class SchedulerRole {
 public:
  SchedulerRole(Postoffice* postoffice, const Config& config, const Node& self);

  // A node asks to join. Once all expected nodes have, ranks are assigned (by the
  // launcher's rank hints when they form a permutation, else by arrival) and the
  // table goes to every node.
  void HandleAddNode(const Message& msg);
  // A node entered a barrier; when the whole group has, everyone in it is released.
  void HandleBarrier(const Message& msg);

 private:
  void AssignAndBroadcast();
  void Reply(int recipient_id, const std::string& endpoint, Message& msg);

  Postoffice* postoffice_;
  Config config_;
  Node self_;
  std::vector<Node> joining_;  // arrival order
  bool complete_ = false;
  // Senders that entered each (group, customer_id) barrier and are not released yet.
  std::map<std::pair<int, int>, std::set<int>> barrier_arrivals_;
};

}  // namespace ps

#endif  // HERDPS_PS_SCHEDULER_ROLE_H_
