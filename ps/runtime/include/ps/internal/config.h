// Config: everything a node needs to know to join its job, read from the environment
// by the runtime (the library never reads command-line flags).
#ifndef PS_INTERNAL_CONFIG_H_
#define PS_INTERNAL_CONFIG_H_

#include <cstdint>
#include <functional>
#include <string>

#include "ps/consistency.h"
#include "ps/internal/consistent_hash_ring.h"
#include "ps/internal/message.h"
#include "ps/status.h"

namespace ps {

struct Config {
  Node::Role role = Node::kWorkerRole;  // PS_ROLE: scheduler | server | worker
  int num_workers = 0;                  // PS_NUM_WORKER
  int num_servers = 0;                  // PS_NUM_SERVER
  std::string scheduler_host;           // PS_SCHEDULER_URI
  int scheduler_port = 0;               // PS_SCHEDULER_PORT
  // PS_NODE_HOST, else on the scheduler PS_SCHEDULER_URI when it is a numeric IPv4
  // address (as ps-lite binds the root URI), else PS_INTERFACE's address, else
  // loopback when the scheduler is there, else this host's first non-loopback address.
  std::string node_host;
  std::string node_host_source;  // which of those gave node_host (logged at start)
  // Where the scheduler binds instead of node_host: 0.0.0.0 with ps-lite's
  // DMLC_USE_KUBERNETES (non-zero); empty otherwise.
  std::string bind_host;
  int send_high_water_mark = 0;         // DMLC_PS_WATER_MARK: ZeroMQ's SNDHWM; 0: its default
  std::string interface;                // PS_INTERFACE
  // PS_PORT, else ps-lite's DMLC_PORT or PORT: 0 picks a free one (not the scheduler).
  int node_port = 0;
  int control_port = 0;                 // PS_CONTROL_PORT: the same, for the control channel
  std::string transport = "tcp";        // PS_TRANSPORT: tcp | ipc
  int rank_hint = -1;                   // PS_RANK: the launcher's label for this node
  int ring_virtual_nodes = 128;         // PS_RING_VIRTUAL_NODES: ring points per server
  int server_threads = 0;               // PS_SERVER_THREADS: shard threads; 0 = cores
  int start_timeout_s = 300;            // PS_START_TIMEOUT: seconds to wait for the job
  int64_t max_message_bytes = int64_t{4} << 30;  // PS_MAX_MESSAGE_BYTES
  bool verbose = false;                 // PS_VERBOSE: 1 logs every control message
  // Liveness. Every node sends the scheduler a heartbeat each interval; a node silent
  // for the timeout is declared dead (and a node whose scheduler is silent that long
  // exits non-zero). Interval 0 turns heartbeats and liveness off.
  double heartbeat_interval_s = 1;      // PS_HEARTBEAT_INTERVAL (seconds, fractions allowed)
  double heartbeat_timeout_s = 10;      // PS_HEARTBEAT_TIMEOUT (seconds)
  // A request not answered in this many seconds ends with Timeout; 0: no deadline
  // (requests still end when a node they wait for dies).
  int request_timeout_s = 300;          // PS_REQUEST_TIMEOUT
  // Reliable delivery: resend every message until acknowledged, drop duplicates.
  bool resend = false;                  // PS_RESEND: 1 turns it on
  int resend_timeout_ms = 1000;         // PS_RESEND_TIMEOUT: first resend after (ms)
  // Fault injection for tests and experiments: each received message is dropped with
  // this probability (an independent draw per message), from a generator seeded by
  // PS_DROP_SEED (default: random).
  double drop_rate = 0;                 // PS_DROP_RATE in [0, 1)
  uint64_t drop_seed = 0;               // PS_DROP_SEED; 0 = random
  // Fault injection for tests: the N-th push an OptimizerServer takes from a worker as
  // the keys' server is applied, and its answer not sent, as if lost; 0: none.
  uint64_t lose_push_answer = 0;        // PS_LOSE_PUSH_ANSWER
  // The job's join token: a node joins only with the scheduler's token. Empty: the
  // job is open to anyone who can reach the scheduler (the scheduler says so).
  std::string job_token;                // PS_JOB_TOKEN
  // CURVE (docs/security.md). PS_SECURE=1 encrypts every connection and admits only
  // nodes holding the job's secret key, which comes from PS_CURVE_SECRET_KEY (40
  // characters of Z85) or from the file PS_CURVE_SECRET_KEY_FILE names (readable by its
  // owner only). PS_SECURE=1 without a key, or a key without PS_SECURE, is an error.
  bool secure = false;                  // PS_SECURE
  std::string curve_secret_key;         // empty unless secure
  // PS_TUNE_MALLOC: 1 makes glibc keep large freed buffers for reuse while messages
  // flow (see Postoffice::Start); 0 (default) leaves malloc as the process configured
  // it: a library does not change its host's allocator unless asked. The runtime's own
  // large buffers are reused without it (NewLargeBuffer).
  bool tune_malloc = false;
  // PS_SHM: 1 (default) lets large data frames to nodes on this host travel through
  // shared memory (docs/architecture.md, "Shared memory"); 0 keeps everything on the
  // sockets. PS_SHM_BYTES: the size of each shared-memory ring (one per pair of
  // processes and direction that exchange large frames).
  bool shm = true;
  // PS_RECEIVE_IN_WAIT: 1 (default) lets a thread waiting for a KV answer receive the
  // data channel itself, one thread hand-off fewer per answer (Van::ReceiveWhileWaiting);
  // 0 leaves all receiving to the receive thread.
  bool receive_in_wait = true;
  // PS_COALESCE: 1 (default) sends small data messages that follow each other closely
  // together, one frame per burst and peer (docs/architecture.md, "Coalescing"); 0
  // sends every message on its own.
  bool coalesce = true;
  // PS_COALESCE_FIRST: 1 (default) lets a worker's first request of a window wait in
  // its batch for the rest of the window, once the worker issues windows and waits for
  // them (sent by its Wait, or about 0.5 ms later; docs/architecture.md, "Coalescing");
  // 0 sends a request issued with nothing else in flight at once. Nothing without
  // PS_COALESCE.
  bool coalesce_first = true;
  // PS_KEY_ENCODING: 1 (default) sends sorted key lists of KV requests and answers as
  // key frames (ps/internal/key_frame.h) where that is shorter; 0 sends keys raw.
  bool key_encoding = true;
  // PS_KEY_CACHE_BYTES: key caching (docs/pipeline.md): each server app keeps up to this
  // many bytes of key lists its workers sent, and each worker remembers up to this many
  // divided by the number of workers per server; a list sent again goes as its id. 0
  // turns key caching off.
  static constexpr uint64_t kDefaultKeyCacheBytes = uint64_t{8} << 20;
  uint64_t key_cache_bytes = kDefaultKeyCacheBytes;
  static constexpr uint64_t kDefaultShmBytes = uint64_t{64} << 20;
  uint64_t shm_bytes = kDefaultShmBytes;
  // PS_IDLE_TRIM_MS: a node whose van has been idle (under 1 MiB of messages between
  // checks, every half period and at least 50 ms apart) for this long hands free
  // memory back to the system, once per idle spell: what malloc keeps (malloc_trim),
  // the free pages of its shared-memory rings and its kept large buffers. A worker or
  // server does the same when it enters and when it leaves a barrier of several nodes
  // after 1 MiB of traffic, at most once per this period. 0: never.
  int idle_trim_ms = 1000;
  // PS_CONSISTENCY: bsp | ssp:S | asp (default asp). Only the scheduler's counts: it
  // hands its model to every node that joins (a node whose own setting differs says
  // so in its log).
  ConsistencyModel consistency;
  bool consistency_set = false;  // PS_CONSISTENCY was given
  // PS_KEY_PLACEMENT: ring (default) | range. Only the scheduler's counts, as above.
  ConsistentHashRing::Placement key_placement = ConsistentHashRing::kRing;
  bool key_placement_set = false;
  // PS_CHUNK_BYTES: a key's value longer than this travels, and is stored, in chunks
  // of this many bytes spread over the servers (docs/pipeline.md); 0 turns chunking
  // off. Only the scheduler's counts, as above.
  static constexpr uint64_t kDefaultChunkBytes = uint64_t{4} << 20;
  static constexpr uint64_t kMinChunkBytes = 1024;
  uint64_t chunk_bytes = kDefaultChunkBytes;
  bool chunk_bytes_set = false;
  // PS_REPLICATION: each key (and chunk) lives on this many servers, its owner and the
  // next ones of the ring (docs/fault-tolerance.md); 1 to PS_NUM_SERVER.
  // Only the scheduler's counts, as above.
  int replication = 1;
  bool replication_set = false;
  // PS_REPLICATE_ROUNDS: with PS_REPLICATION=2, servers that aggregate pushes in rounds
  // (OptimizerServerOptions::sync_aggregation) copy each closed round to the keys'
  // replicas instead of every push, and workers keep the pushes of rounds not copied
  // yet (docs/fault-tolerance.md). Servers are not added, replaced, retired nor let
  // leave in such a job. Only the scheduler's counts, as above.
  bool replicate_rounds = false;
  bool replicate_rounds_set = false;
  // PS_REREPLICATE_AFTER: with replication, a server dead this long (seconds) whose place
  // no new process took is retired: the live servers copy its keys among themselves
  // until each is on PS_REPLICATION servers again, and it leaves the table. 0: never.
  // Only the scheduler's counts.
  double rereplicate_after_s = 30;
  // PS_RING_CHANGE_TIMEOUT: how long (seconds) a ring change may take before the
  // scheduler calls it off: a server added that does not hold its keys by then is not
  // added, a leave or a dead server's re-replication is called off (and asked or tried
  // again). Negative: unset, RingChangeTimeoutSeconds's default; 0: never. Only the
  // scheduler's counts.
  double ring_change_timeout_s = -1;
  // PS_CATCH_UP_RATE: the most MB per second a server sends to one other while the ring
  // changes (a server added or leaving, any replication) or a new server in a dead one's
  // place catches up (with replication): a slice of keys at a time, requests served
  // between slices. 0: no bound.
  double catch_up_rate_mb = 256;
  // PS_LEAVE_ON_SIGTERM: a server that gets SIGTERM leaves the running job gracefully
  // (Postoffice::Withdraw: its keys move to the others first) instead of dying; a
  // second SIGTERM ends it at once. Off by default.
  bool leave_on_sigterm = false;
  // PS_CHECKPOINT_DIR: where an OptimizerServer whose options name no folder writes
  // <dir>/server-<rank>.ckpt and resumes from it (docs/fault-tolerance.md). Empty: no
  // checkpoints. PS_CHECKPOINT_EVERY: when, as comma-separated terms "<seconds>[s]" and
  // "<count>pushes" (whichever comes first); with a folder but no interval, every
  // kDefaultCheckpointSeconds.
  static constexpr double kDefaultCheckpointSeconds = 60;
  std::string checkpoint_dir;
  double checkpoint_every_seconds = 0;
  uint64_t checkpoint_every_pushes = 0;
  // The scheduler's view of a running job (docs/operability.md). PS_STALL_REPORT: when
  // nothing has progressed for this many seconds while nodes wait, the scheduler logs
  // who waits for whom, once per stall; 0: never. PS_METRICS_PORT ("PORT" or
  // "ADDRESS:PORT"): the scheduler serves the job's metrics in the Prometheus text
  // format over HTTP there (on 127.0.0.1 when no address is given); unset: off.
  double stall_report_s = 30;
  std::string metrics_host = "127.0.0.1";
  int metrics_port = 0;

  // Fills `config` from `getenv`. Each PS_* name also accepts its ps-lite alias
  // (DMLC_ROLE, DMLC_NUM_WORKER, DMLC_NUM_SERVER, DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT,
  // DMLC_NODE_HOST, DMLC_INTERFACE, DMLC_PORT and PORT, DMLC_LOCAL non-zero for ipc,
  // PS_DROP_MSG in percent); the PS_ name wins when both are set. ps-lite's other
  // variables are honoured (DMLC_PS_WATER_MARK, DMLC_USE_KUBERNETES) or refused
  // (DMLC_PS_VAN_TYPE other than zmq). kNames lists every name read. Returns
  // InvalidArgument naming the variable and the accepted values when one is missing or
  // malformed.
  static Status FromEnvironment(Config* config,
                                const std::function<const char*(const char*)>& getenv);
  static Status FromEnvironment(Config* config);

  // Every environment variable FromEnvironment reads (docs list the same).
  static const char* const kNames[];
};

// The ring change deadline config names: PS_RING_CHANGE_TIMEOUT, or when unset 10
// PS_HEARTBEAT_TIMEOUTs, at least 60 s (100 s with the default heartbeats). Keys move at
// the speed of memory or of the network: a catch-up that takes this long is one that
// cannot finish, or one of servers that hold tens of GB, which need more. 0: never (so
// is a job without liveness checks, PS_HEARTBEAT_INTERVAL=0).
inline double RingChangeTimeoutSeconds(const Config& config) {
  if (config.ring_change_timeout_s >= 0) return config.ring_change_timeout_s;
  return 10 * config.heartbeat_timeout_s > 60 ? 10 * config.heartbeat_timeout_s : 60;
}

// A node whose liveness checks (every fraction of a second) find that this much time
// passed since the last one did not run meanwhile (it was stopped, or starved of CPU):
// the silence it would see is its own, and others get a new PS_HEARTBEAT_TIMEOUT.
inline double LivenessStallSeconds(double heartbeat_timeout_s) {
  return heartbeat_timeout_s / 2 > 1 ? heartbeat_timeout_s / 2 : 1;
}

// Seconds as people write them in the environment: "10", "0.5" (not "10.000000").
std::string SecondsText(double seconds);

}  // namespace ps

#endif  // PS_INTERNAL_CONFIG_H_
