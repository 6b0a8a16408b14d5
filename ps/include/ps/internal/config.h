// Config: everything a node needs to know to join its job, read from the environment
// by the runtime (the library never reads command-line flags).
#ifndef PS_INTERNAL_CONFIG_H_
#define PS_INTERNAL_CONFIG_H_

#include <cstdint>
#include <functional>
#include <string>

#include "ps/internal/message.h"
#include "ps/status.h"

namespace ps {

struct Config {
  Node::Role role = Node::kWorkerRole;  // PS_ROLE: scheduler | server | worker
  int num_workers = 0;                  // PS_NUM_WORKER
  int num_servers = 0;                  // PS_NUM_SERVER
  std::string scheduler_host;           // PS_SCHEDULER_URI
  int scheduler_port = 0;               // PS_SCHEDULER_PORT
  std::string node_host;                // PS_NODE_HOST, else PS_INTERFACE's address
  std::string interface;                // PS_INTERFACE
  int node_port = 0;                    // PS_PORT: 0 picks a free one (not the scheduler)
  std::string transport = "tcp";        // PS_TRANSPORT: tcp | ipc
  int rank_hint = -1;                   // PS_RANK: the launcher's label for this node
  int ring_virtual_nodes = 128;         // PS_RING_VIRTUAL_NODES: ring points per server
  int server_threads = 0;               // PS_SERVER_THREADS: shard threads; 0 = cores
  int start_timeout_s = 300;            // PS_START_TIMEOUT: seconds to wait for the job
  int64_t max_message_bytes = int64_t{4} << 30;  // PS_MAX_MESSAGE_BYTES
  bool verbose = false;                 // PS_VERBOSE: 1 logs every control message
  // PS_TUNE_MALLOC: 1 (default) makes glibc keep large freed buffers for reuse (see
  // Postoffice::Start); 0 leaves malloc as the process configured it.
  bool tune_malloc = true;

  // Fills `config` from `getenv`. Each PS_* name also accepts its ps-lite DMLC_*
  // alias (DMLC_ROLE, DMLC_NUM_WORKER, DMLC_NUM_SERVER, DMLC_PS_ROOT_URI,
  // DMLC_PS_ROOT_PORT, DMLC_NODE_HOST, DMLC_INTERFACE, DMLC_NODE_PORT, DMLC_LOCAL=1 for
  // ipc); the PS_ name wins when both are set. Returns InvalidArgument naming the variable and
  // the accepted values when one is missing or malformed.
  static Status FromEnvironment(Config* config,
                                const std::function<const char*(const char*)>& getenv);
  static Status FromEnvironment(Config* config);
};

}  // namespace ps

#endif  // PS_INTERNAL_CONFIG_H_
