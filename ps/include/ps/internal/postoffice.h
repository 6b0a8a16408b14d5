// Postoffice: the node's runtime. It reads the Config, starts the van, joins the job
// through the scheduler, keeps the node table and the key ring, runs barriers and
// routes incoming data messages to Customers.
//
// Thread safety: one per process (Get()); all public methods are thread-safe.
// Errors an app can cause (bad environment, calls out of order, an unreachable
// scheduler) throw ps::Error with a message that says what to fix.
#ifndef PS_INTERNAL_POSTOFFICE_H_
#define PS_INTERNAL_POSTOFFICE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ps/base.h"
#include "ps/internal/config.h"
#include "ps/internal/consistent_hash_ring.h"
#include "ps/internal/customer.h"
#include "ps/internal/log_limiter.h"
#include "ps/internal/message.h"
#include "ps/internal/van.h"

namespace ps {

class SchedulerRole;

class Postoffice {
 public:
  static Postoffice* Get();

  // Joins the job (first call) and, if do_barrier, waits until every node has.
  // Later calls (one per extra customer) only run the barrier.
  void Start(int customer_id, const char* argv0, bool do_barrier);
  // Leaves the job: barrier (if do_barrier), then on the last matching call runs the
  // exit callback and stops the van.
  void Finalize(int customer_id, bool do_barrier);

  // Blocks until every node in `node_group` has called Barrier with the same
  // customer_id. Throws ps::Error if this node is not in the group.
  void Barrier(int customer_id, int node_group);

  // Sends msg with this node as sender. See Van::Send.
  Status Send(Message& msg);

  void AddCustomer(Customer* customer);
  void RemoveCustomer(Customer* customer);
  void RegisterExitCallback(const std::function<void()>& cb) { exit_callback_ = cb; }

  // The node ids in a group (a bit mask of kScheduler / kServerGroup / kWorkerGroup)
  // or the single id given.
  std::vector<int> GetNodeIDs(int node_group) const;

  static int WorkerRankToID(int rank) { return rank * 2 + 9; }
  static int ServerRankToID(int rank) { return rank * 2 + 8; }
  static int IDtoRank(int id) { return id < 8 ? 0 : (id - 8) / 2; }

  const Config& config() const { return config_; }
  const ConsistentHashRing& ring() const { return ring_; }
  Van* van() { return van_.get(); }
  int my_id() const { return my_node_.id; }
  const Node& my_node() const { return my_node_; }
  std::vector<Node> nodes() const;
  int num_workers() const { return config_.num_workers; }
  int num_servers() const { return config_.num_servers; }
  int my_rank() const { return my_node_.rank; }
  bool is_worker() const { return config_.role == Node::kWorkerRole; }
  bool is_server() const { return config_.role == Node::kServerRole; }
  bool is_scheduler() const { return config_.role == Node::kSchedulerRole; }
  bool verbose() const { return config_.verbose; }
  bool started() const { return start_count_ > 0; }

  // For SchedulerRole: installs the node table on the scheduler itself.
  void InstallNodeTable(const std::vector<Node>& nodes, int my_id);

 private:
  Postoffice() = default;
  void OnMessage(Message&& msg);
  void HandleControl(Message& msg);
  void HandleNodeTable(const Message& msg);
  void HandleBarrierRelease(const Message& msg);
  void DispatchData(Message& msg);
  void ReplyError(const Message& request, const Status& status);
  // Answers held requests whose app has not appeared within the grace period.
  void ExpireEarlyMessages();

  Config config_;
  std::unique_ptr<Van> van_;
  std::unique_ptr<SchedulerRole> scheduler_;
  Node my_node_;
  ConsistentHashRing ring_;
  std::function<void()> exit_callback_;
  int start_count_ = 0;  // Start calls not yet matched by Finalize; under start_mu_
  std::mutex start_mu_;

  // Joining the job. Guarded by state_mu_.
  mutable std::mutex state_mu_;
  std::condition_variable state_cv_;
  // Set once the node table is installed; read without the lock on the data path.
  std::atomic<bool> ready_{false};
  Status join_error_;
  std::vector<Node> nodes_;
  // Ids of the nodes in the table, for checking senders on the data path. Written
  // before ready_ is set and never after, so readers that saw ready_ need no lock.
  std::unordered_set<int> node_ids_;
  // Barrier releases seen, per (group, customer_id).
  std::map<std::pair<int, int>, uint64_t> barrier_releases_;

  // Customers by (app_id, customer_id), and data that arrived before its customer (or
  // before the node table): delivered in order when they appear. dispatch_mu_ is held
  // shared while a customer runs, so removing one waits for its handler to finish.
  std::shared_mutex dispatch_mu_;
  std::map<std::pair<int, int>, Customer*> customers_;
  struct EarlyMessage {
    Message msg;
    std::chrono::steady_clock::time_point arrived;
  };
  std::deque<EarlyMessage> early_messages_;
  size_t early_bytes_ = 0;  // payload bytes held in early_messages_
  std::atomic<bool> has_early_{false};  // !early_messages_.empty(), readable unlocked
  LogLimiter stray_log_;  // data from unknown nodes or for unknown customers
};

}  // namespace ps

#endif  // PS_INTERNAL_POSTOFFICE_H_
