// HerdPS: the whole public API in one include.
//
//   ps::Start(0);                       // join the job (reads PS_* from the environment)
//   if (ps::IsServer()) { ... KVServer<float> ... }
//   if (ps::IsWorker()) { ... KVWorker<float> ... }
//   ps::Finalize(0, true);              // leave it
//
// Start and Finalize throw ps::Error when the node cannot join (bad environment, the
// scheduler unreachable within PS_START_TIMEOUT seconds).
#ifndef PS_PS_H_
#define PS_PS_H_

#include <cstring>
#include <functional>
// What ps-lite's ps/ps.h brings along, so that its apps compile unchanged.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ps/base.h"
#include "ps/consistency.h"
#include "ps/environment.h"
#include "ps/internal/job_services.h"
#include "ps/internal/postoffice.h"
#include "ps/kv_app.h"
#include "ps/logging.h"
#include "ps/sarray.h"
#include "ps/simple_app.h"
#include "ps/status.h"

namespace ps {

// Number of workers / servers in the job.
inline int NumWorkers() { return Postoffice::Get()->num_workers(); }
inline int NumServers() { return Postoffice::Get()->num_servers(); }
inline bool IsWorker() { return Postoffice::Get()->is_worker(); }
inline bool IsServer() { return Postoffice::Get()->is_server(); }
inline bool IsScheduler() { return Postoffice::Get()->is_scheduler(); }
// This node's rank among the nodes of its role, 0-based.
inline int MyRank() { return Postoffice::Get()->my_rank(); }

// Joins the job and waits until every node has (a barrier). The job services (the
// clocks, the scheduler's plugins) start with the node.
inline void Start(int customer_id, const char* argv0 = nullptr) {
  JobServices::Get();
  Postoffice::Get()->Start(customer_id, argv0, true);
}
// The older ps-lite spelling: Start(argv0) for customer 0.
inline void Start(const char* argv0 = nullptr) { Start(0, argv0); }
// Joins the job without waiting for the others.
inline void StartAsync(int customer_id, const char* argv0 = nullptr) {
  JobServices::Get();
  Postoffice::Get()->Start(customer_id, argv0, false);
}
// Leaves the job, by default after a barrier with every node.
inline void Finalize(int customer_id = 0, const bool do_barrier = true) {
  Postoffice::Get()->Finalize(customer_id, do_barrier);
}
// Runs cb in Finalize, after the final barrier and before the network shuts down.
inline void RegisterExitCallback(const std::function<void()>& cb) {
  Postoffice::Get()->RegisterExitCallback(cb);
}

}  // namespace ps

#endif  // PS_PS_H_
