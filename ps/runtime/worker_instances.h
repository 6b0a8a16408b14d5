// WorkerInstances: the workers of a process beyond its first (ps-lite's Start for
// another customer while the first waits for the job to form): each is one more worker
// of the job, sharing the process's endpoints and identity, with its own node id, rank,
// barriers and Finalize. Part of the Postoffice; internal to the runtime.
//
// Thread safety: all methods are thread-safe; any() is lock-free.
#ifndef HERDPS_PS_RUNTIME_WORKER_INSTANCES_H_
#define HERDPS_PS_RUNTIME_WORKER_INSTANCES_H_

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "ps/internal/message.h"

namespace ps {

class WorkerInstances {
 public:
  // A new Start: no instances; `first_customer` is the first worker's customer.
  void Reset(int first_customer);
  // Whether `customer_id` is the first worker's or an instance's.
  bool Knows(int customer_id) const;
  // Registers `customer_id` as one more worker, a copy of `first` with the next
  // instance number. False if it is the first's or has one already. Throws ps::Error
  // when the process has as many as a node id can tell apart.
  bool Add(int customer_id, const Node& first);
  // Whether any instance beyond the first exists.
  bool any() const { return any_.load(std::memory_order_acquire); }
  // The nodes of the instances (their joins); ids are kEmpty until the table names them.
  std::vector<Node> Nodes() const;
  // Takes each instance's id and rank from the node table: the entry with the
  // process's `identity` and the instance's number.
  void Name(const std::vector<Node>& table, const std::string& identity);
  // The node id of customer_id's instance, or `otherwise` when it has none.
  int IdOf(int customer_id, int otherwise) const;
  // Whether `id` is one of the instances' (kEmpty never is).
  bool Has(int id) const;

 private:
  mutable std::mutex mu_;  // guards instances_ and first_customer_
  std::vector<std::pair<int, Node>> instances_;  // (customer id, node)
  int first_customer_ = 0;
  std::atomic<bool> any_{false};  // !instances_.empty()
};

}  // namespace ps

#endif  // HERDPS_PS_RUNTIME_WORKER_INSTANCES_H_
