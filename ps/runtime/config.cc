#include "ps/internal/config.h"

#include <cstdlib>
#include <string>

#include "config_fields.h"
#include "ps/environment.h"

namespace ps {
namespace {

using config_fields::Getenv;
using config_fields::Lookup;
using config_fields::ParseBool;
using config_fields::ParseDouble;
using config_fields::ParseInt;
using config_fields::ReadCheckpointSettings;
using config_fields::ReadObservability;
using config_fields::ReadCurveSettings;
using config_fields::ReadNodeAddress;

// The job's shape: this node's role, how many workers and servers, where the scheduler is.
Status ReadJobShape(const Getenv& getenv, Config* c) {
  Config& cfg = *c;
  const char* role = Lookup(getenv, "PS_ROLE", "DMLC_ROLE");
  if (!role) {
    return Status::InvalidArgument(
        "PS_ROLE is not set (expected scheduler, server or worker); start nodes with "
        "tracker/launch, which sets it");
  }
  std::string r = role;
  if (r == "scheduler") {
    cfg.role = Node::kSchedulerRole;
  } else if (r == "server") {
    cfg.role = Node::kServerRole;
  } else if (r == "worker") {
    cfg.role = Node::kWorkerRole;
  } else {
    return Status::InvalidArgument("PS_ROLE='" + r + "' is not scheduler, server or worker");
  }

  int64_t v = 0;
  const char* text = Lookup(getenv, "PS_NUM_WORKER", "DMLC_NUM_WORKER");
  if (!text) return Status::InvalidArgument("PS_NUM_WORKER is not set (number of workers, >= 1)");
  Status s = ParseInt("PS_NUM_WORKER", text, 1, 1 << 20, &v);
  if (!s.ok()) return s;
  cfg.num_workers = static_cast<int>(v);

  text = Lookup(getenv, "PS_NUM_SERVER", "DMLC_NUM_SERVER");
  if (!text) return Status::InvalidArgument("PS_NUM_SERVER is not set (number of servers, >= 1)");
  if (!(s = ParseInt("PS_NUM_SERVER", text, 1, 1 << 20, &v)).ok()) return s;
  cfg.num_servers = static_cast<int>(v);

  text = Lookup(getenv, "PS_SCHEDULER_URI", "DMLC_PS_ROOT_URI");
  if (!text) return Status::InvalidArgument("PS_SCHEDULER_URI is not set (the scheduler's host)");
  cfg.scheduler_host = text;

  text = Lookup(getenv, "PS_SCHEDULER_PORT", "DMLC_PS_ROOT_PORT");
  if (!text) return Status::InvalidArgument("PS_SCHEDULER_PORT is not set (the scheduler's port)");
  if (!(s = ParseInt("PS_SCHEDULER_PORT", text, 1, 65535, &v)).ok()) return s;
  cfg.scheduler_port = static_cast<int>(v);
  return Status::OK();
}

// How nodes talk: tcp or ipc (ps-lite's names too), the send queue's bound.
Status ReadTransport(const Getenv& getenv, Config* c) {
  Config& cfg = *c;
  const char* text = nullptr;
  int64_t v = 0;
  Status s;
  if ((text = Lookup(getenv, "PS_TRANSPORT", nullptr))) {
    cfg.transport = text;
    if (cfg.transport != "tcp" && cfg.transport != "ipc") {
      return Status::InvalidArgument("PS_TRANSPORT='" + cfg.transport + "' is not tcp or ipc");
    }
  } else if ((text = Lookup(getenv, "DMLC_LOCAL", nullptr)) && std::atoi(text) != 0) {
    cfg.transport = "ipc";  // ps-lite: any non-zero number
  }
  if ((text = Lookup(getenv, "DMLC_PS_VAN_TYPE", nullptr)) && std::string(text) != "zmq") {
    return Status::InvalidArgument("DMLC_PS_VAN_TYPE='" + std::string(text) +
                                   "': HerdPS has one van, ZeroMQ over tcp or ipc "
                                   "(PS_TRANSPORT); unset it or set it to zmq");
  }
  if ((text = Lookup(getenv, "DMLC_PS_WATER_MARK", nullptr))) {
    if (!(s = ParseInt("DMLC_PS_WATER_MARK", text, 0, 1 << 30, &v)).ok()) return s;
    cfg.send_high_water_mark = static_cast<int>(v);
  }
  return Status::OK();
}

// The node's own sizes and switches: ring, server threads, start timeout, message bound, malloc.
Status ReadNodeTuning(const Getenv& getenv, Config* c) {
  Config& cfg = *c;
  const char* text = nullptr;
  int64_t v = 0;
  Status s;
  if ((text = Lookup(getenv, "PS_RING_VIRTUAL_NODES", nullptr))) {
    if (!(s = ParseInt("PS_RING_VIRTUAL_NODES", text, 1, 1 << 16, &v)).ok()) return s;
    cfg.ring_virtual_nodes = static_cast<int>(v);
  }
  if ((text = Lookup(getenv, "PS_SERVER_THREADS", nullptr))) {
    if (!(s = ParseInt("PS_SERVER_THREADS", text, 1, 1024, &v)).ok()) return s;
    cfg.server_threads = static_cast<int>(v);
  }
  if ((text = Lookup(getenv, "PS_START_TIMEOUT", nullptr))) {
    if (!(s = ParseInt("PS_START_TIMEOUT", text, 1, 1 << 24, &v)).ok()) return s;
    cfg.start_timeout_s = static_cast<int>(v);
  }
  if ((text = Lookup(getenv, "PS_MAX_MESSAGE_BYTES", nullptr))) {
    if (!(s = ParseInt("PS_MAX_MESSAGE_BYTES", text, 1024, int64_t{1} << 40, &v)).ok()) return s;
    cfg.max_message_bytes = v;
  }
  if ((text = Lookup(getenv, "PS_VERBOSE", nullptr))) cfg.verbose = std::string(text) != "0";
  if ((text = Lookup(getenv, "PS_TUNE_MALLOC", nullptr))) {
    cfg.tune_malloc = std::string(text) != "0";
  }
  if ((text = Lookup(getenv, "PS_IDLE_TRIM_MS", nullptr))) {
    if (!(s = ParseInt("PS_IDLE_TRIM_MS", text, 0, 86400000, &v)).ok()) return s;
    cfg.idle_trim_ms = static_cast<int>(v);
  }
  return Status::OK();
}

// The data path: shared memory and its ring size, receiving in waits.
Status ReadDataPath(const Getenv& getenv, Config* c) {
  Config& cfg = *c;
  const char* text = nullptr;
  int64_t v = 0;
  Status s;
  if ((text = Lookup(getenv, "PS_SHM", nullptr))) {
    if (!(s = ParseBool("PS_SHM", text, &cfg.shm)).ok()) return s;
  }
  if ((text = Lookup(getenv, "PS_COALESCE", nullptr))) {
    if (!(s = ParseBool("PS_COALESCE", text, &cfg.coalesce)).ok()) return s;
  }
  if ((text = Lookup(getenv, "PS_COALESCE_FIRST", nullptr))) {
    if (!(s = ParseBool("PS_COALESCE_FIRST", text, &cfg.coalesce_first)).ok()) return s;
  }
  if ((text = Lookup(getenv, "PS_RECEIVE_IN_WAIT", nullptr))) {
    if (!(s = ParseBool("PS_RECEIVE_IN_WAIT", text, &cfg.receive_in_wait)).ok()) return s;
  }
  if ((text = Lookup(getenv, "PS_KEY_ENCODING", nullptr))) {
    if (!(s = ParseBool("PS_KEY_ENCODING", text, &cfg.key_encoding)).ok()) return s;
  }
  if ((text = Lookup(getenv, "PS_KEY_CACHE_BYTES", nullptr))) {
    if (!(s = ParseInt("PS_KEY_CACHE_BYTES", text, 0, int64_t{1} << 40, &v)).ok()) return s;
    cfg.key_cache_bytes = static_cast<uint64_t>(v);
  }
  if ((text = Lookup(getenv, "PS_SHM_BYTES", nullptr))) {
    // At most shm::kMaxRingBytes (van/shm_segment.h): receivers refuse larger offers.
    if (!(s = ParseInt("PS_SHM_BYTES", text, int64_t{1} << 20, int64_t{1} << 36, &v)).ok()) {
      return s;
    }
    cfg.shm_bytes = static_cast<uint64_t>(v);
  }
  return Status::OK();
}

// Failure handling: heartbeats, request timeouts, resend, injected drops.
Status ReadLiveness(const Getenv& getenv, Config* c) {
  Config& cfg = *c;
  const char* text = nullptr;
  int64_t v = 0;
  Status s;
  double d = 0;
  if ((text = Lookup(getenv, "PS_HEARTBEAT_INTERVAL", nullptr))) {
    if (!(s = ParseDouble("PS_HEARTBEAT_INTERVAL", text, 0, 3600, &d)).ok()) return s;
    if (d > 0 && d < 0.01) {
      return Status::InvalidArgument("PS_HEARTBEAT_INTERVAL='" + std::string(text) +
                                     "' is below 0.01 s (0 turns heartbeats off)");
    }
    cfg.heartbeat_interval_s = d;
  }
  if ((text = Lookup(getenv, "PS_HEARTBEAT_TIMEOUT", nullptr))) {
    if (!(s = ParseDouble("PS_HEARTBEAT_TIMEOUT", text, 0.1, 86400, &d)).ok()) return s;
    cfg.heartbeat_timeout_s = d;
  }
  if (cfg.heartbeat_interval_s > 0 && cfg.heartbeat_timeout_s < 2 * cfg.heartbeat_interval_s) {
    return Status::InvalidArgument(
        "PS_HEARTBEAT_TIMEOUT=" + SecondsText(cfg.heartbeat_timeout_s) +
        " s is less than two PS_HEARTBEAT_INTERVALs (" + SecondsText(cfg.heartbeat_interval_s) +
        " s): one late heartbeat would declare a live node dead");
  }
  if ((text = Lookup(getenv, "PS_REQUEST_TIMEOUT", nullptr))) {
    if (!(s = ParseInt("PS_REQUEST_TIMEOUT", text, 0, 1 << 24, &v)).ok()) return s;
    cfg.request_timeout_s = static_cast<int>(v);
  }
  if ((text = Lookup(getenv, "PS_RESEND", nullptr))) {
    if (!(s = ParseBool("PS_RESEND", text, &cfg.resend)).ok()) return s;
  }
  if ((text = Lookup(getenv, "PS_RESEND_TIMEOUT", nullptr))) {
    if (!(s = ParseInt("PS_RESEND_TIMEOUT", text, 1, 3600 * 1000, &v)).ok()) return s;
    cfg.resend_timeout_ms = static_cast<int>(v);
  }
  if ((text = Lookup(getenv, "PS_DROP_RATE", nullptr))) {
    if (!(s = ParseDouble("PS_DROP_RATE", text, 0, 0.99, &d)).ok()) return s;
    cfg.drop_rate = d;
  } else if ((text = Lookup(getenv, "PS_DROP_MSG", nullptr))) {
    // ps-lite's name, in percent.
    if (!(s = ParseInt("PS_DROP_MSG", text, 0, 99, &v)).ok()) return s;
    cfg.drop_rate = static_cast<double>(v) / 100;
  }
  if ((text = Lookup(getenv, "PS_DROP_SEED", nullptr))) {
    if (!(s = ParseInt("PS_DROP_SEED", text, 0, INT64_MAX, &v)).ok()) return s;
    cfg.drop_seed = static_cast<uint64_t>(v);
  }
  if ((text = Lookup(getenv, "PS_LOSE_PUSH_ANSWER", nullptr))) {
    if (!(s = ParseInt("PS_LOSE_PUSH_ANSWER", text, 0, INT64_MAX, &v)).ok()) return s;
    cfg.lose_push_answer = static_cast<uint64_t>(v);
  }
  if (cfg.drop_rate > 0 && !cfg.resend) {
    return Status::InvalidArgument("PS_DROP_RATE=" + SecondsText(cfg.drop_rate) +
                                   " drops messages but PS_RESEND is off: nothing would "
                                   "recover them; set PS_RESEND=1");
  }
  return Status::OK();
}

// What the scheduler hands every node: consistency, key placement, chunk size,
// replication, the job token.
Status ReadJobPolicy(const Getenv& getenv, Config* c) {
  Config& cfg = *c;
  const char* text = nullptr;
  int64_t v = 0;
  Status s;
  if ((text = Lookup(getenv, "PS_CONSISTENCY", nullptr))) {
    if (!(s = ConsistencyModel::Parse(text, &cfg.consistency)).ok()) {
      return Status::InvalidArgument("PS_CONSISTENCY: " + s.message());
    }
    cfg.consistency_set = true;
  }
  if ((text = Lookup(getenv, "PS_KEY_PLACEMENT", nullptr))) {
    std::string placement = text;
    if (placement != "ring" && placement != "range") {
      return Status::InvalidArgument("PS_KEY_PLACEMENT='" + placement +
                                     "' is not ring (consistent hashing) or range (ps-lite's "
                                     "equal key ranges)");
    }
    cfg.key_placement =
        placement == "range" ? ConsistentHashRing::kRanges : ConsistentHashRing::kRing;
    cfg.key_placement_set = true;
  }
  if ((text = Lookup(getenv, "PS_CHUNK_BYTES", nullptr))) {
    if (!(s = ParseInt("PS_CHUNK_BYTES", text, 0, int64_t{1} << 40, &v)).ok()) return s;
    if (v != 0 && v < static_cast<int64_t>(Config::kMinChunkBytes)) {
      return Status::InvalidArgument("PS_CHUNK_BYTES=" + std::string(text) +
                                     " is below the smallest chunk (" +
                                     std::to_string(Config::kMinChunkBytes) + "); 0 turns chunking off");
    }
    cfg.chunk_bytes = static_cast<uint64_t>(v);
    cfg.chunk_bytes_set = true;
  }
  if ((text = Lookup(getenv, "PS_REPLICATION", nullptr))) {
    if (!(s = ParseInt("PS_REPLICATION", text, 1, 1 << 20, &v)).ok()) return s;
    if (v > cfg.num_servers) {
      return Status::InvalidArgument("PS_REPLICATION=" + std::string(text) + " needs at least " +
                                     std::string(text) + " servers; the job has PS_NUM_SERVER=" +
                                     std::to_string(cfg.num_servers));
    }
    cfg.replication = static_cast<int>(v);
    cfg.replication_set = true;
  }
  if ((text = Lookup(getenv, "PS_REPLICATE_ROUNDS", nullptr))) {
    if (!(s = ParseInt("PS_REPLICATE_ROUNDS", text, 0, 1, &v)).ok()) return s;
    cfg.replicate_rounds = v == 1;
    cfg.replicate_rounds_set = true;
    if (cfg.replicate_rounds && cfg.replication != 2) {
      return Status::InvalidArgument(
          "PS_REPLICATE_ROUNDS=1 needs PS_REPLICATION=2 (the job has " +
          std::to_string(cfg.replication) + "): rounds are copied to one replica per key");
    }
  }
  if ((text = Lookup(getenv, "PS_REREPLICATE_AFTER", nullptr))) {
    double after = 0;
    if (!(s = ParseDouble("PS_REREPLICATE_AFTER", text, 0, 86400 * 365, &after)).ok()) return s;
    cfg.rereplicate_after_s = after;
  }
  if ((text = Lookup(getenv, "PS_RING_CHANGE_TIMEOUT", nullptr))) {
    double timeout = 0;
    if (!(s = ParseDouble("PS_RING_CHANGE_TIMEOUT", text, 0, 86400 * 365, &timeout)).ok()) {
      return s;
    }
    cfg.ring_change_timeout_s = timeout;
  }
  if ((text = Lookup(getenv, "PS_CATCH_UP_RATE", nullptr))) {
    if (!(s = ParseDouble("PS_CATCH_UP_RATE", text, 0, 1e6, &cfg.catch_up_rate_mb)).ok()) {
      return s;
    }
    if (cfg.catch_up_rate_mb > 0 && cfg.catch_up_rate_mb < 0.001) {
      return Status::InvalidArgument("PS_CATCH_UP_RATE=" + std::string(text) +
                                     ": expected 0 (no bound) or 0.001 (1 kB/s) to 1000000");
    }
  }
  if ((text = Lookup(getenv, "PS_LEAVE_ON_SIGTERM", nullptr))) {
    if (!(s = ParseBool("PS_LEAVE_ON_SIGTERM", text, &cfg.leave_on_sigterm)).ok()) return s;
  }
  if ((text = Lookup(getenv, "PS_JOB_TOKEN", nullptr))) {
    cfg.job_token = text;
    if (cfg.job_token.size() > 1024) {
      return Status::InvalidArgument("PS_JOB_TOKEN is " + std::to_string(cfg.job_token.size()) +
                                     " bytes long; at most 1024 are allowed");
    }
  }
  return Status::OK();
}

}  // namespace

std::string SecondsText(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", seconds);
  return text;
}

Status Config::FromEnvironment(Config* c) {
  // Through Environment: an overlay an app set with Environment::Init counts.
  return FromEnvironment(c, [](const char* name) { return Environment::Get()->find(name); });
}

Status Config::FromEnvironment(Config* c, const Getenv& getenv) {
  Config cfg;
  using Reader = Status (*)(const Getenv&, Config*);
  for (Reader read : {ReadJobShape, ReadTransport, ReadNodeAddress, ReadNodeTuning,
                      ReadDataPath, ReadLiveness, ReadJobPolicy, ReadCurveSettings,
                      ReadCheckpointSettings, ReadObservability}) {
    Status s = read(getenv, &cfg);
    if (!s.ok()) return s;
  }
  *c = cfg;
  return Status::OK();
}

const char* const Config::kNames[] = {
    "PS_ROLE", "DMLC_ROLE", "PS_NUM_WORKER", "DMLC_NUM_WORKER", "PS_NUM_SERVER",
    "DMLC_NUM_SERVER", "PS_SCHEDULER_URI", "DMLC_PS_ROOT_URI", "PS_SCHEDULER_PORT",
    "DMLC_PS_ROOT_PORT", "PS_TRANSPORT", "DMLC_LOCAL", "DMLC_PS_VAN_TYPE",
    "DMLC_PS_WATER_MARK", "PS_INTERFACE", "DMLC_INTERFACE", "PS_NODE_HOST", "DMLC_NODE_HOST",
    "DMLC_USE_KUBERNETES", "PS_PORT", "DMLC_PORT", "PORT", "PS_CONTROL_PORT", "PS_RANK",
    "PS_RING_VIRTUAL_NODES", "PS_SERVER_THREADS", "PS_START_TIMEOUT", "PS_MAX_MESSAGE_BYTES",
    "PS_VERBOSE", "PS_TUNE_MALLOC", "PS_IDLE_TRIM_MS",
    "PS_HEARTBEAT_INTERVAL", "PS_HEARTBEAT_TIMEOUT", "PS_REQUEST_TIMEOUT", "PS_RESEND",
    "PS_RESEND_TIMEOUT", "PS_DROP_RATE", "PS_DROP_MSG",
    "PS_DROP_SEED", "PS_LOSE_PUSH_ANSWER", "PS_CONSISTENCY", "PS_KEY_PLACEMENT",
    "PS_CHUNK_BYTES", "PS_JOB_TOKEN",
    "PS_SECURE", "PS_CURVE_SECRET_KEY", "PS_CURVE_SECRET_KEY_FILE", "PS_SHM", "PS_SHM_BYTES",
    "PS_RECEIVE_IN_WAIT", "PS_COALESCE", "PS_COALESCE_FIRST", "PS_KEY_ENCODING",
    "PS_KEY_CACHE_BYTES", "PS_CHECKPOINT_DIR",
    "PS_CHECKPOINT_EVERY", "PS_REPLICATION", "PS_REPLICATE_ROUNDS", "PS_REREPLICATE_AFTER", "PS_RING_CHANGE_TIMEOUT",
    "PS_CATCH_UP_RATE",
    "PS_LEAVE_ON_SIGTERM",
    "PS_STALL_REPORT", "PS_METRICS_PORT",
    nullptr};

}  // namespace ps
