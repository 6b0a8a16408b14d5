#include "ps/internal/config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ps/environment.h"

namespace ps {
namespace {

using Getenv = std::function<const char*(const char*)>;

// Value of `name`, else of its ps-lite alias, else nullptr.
const char* Lookup(const Getenv& getenv, const char* name, const char* alias) {
  const char* v = getenv(name);
  if ((!v || !*v) && alias) v = getenv(alias);
  return v && *v ? v : nullptr;
}

Status ParseInt(const char* name, const char* text, int64_t lo, int64_t hi, int64_t* out) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno || end == text || *end || v < lo || v > hi) {
    return Status::InvalidArgument(std::string(name) + "='" + text + "' is not an integer in [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = v;
  return Status::OK();
}

// The IPv4 address of a network interface, or "" if it has none.
std::string AddressOfInterface(const std::string& name) {
  std::string found;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* it = list; it; it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET || name != it->ifa_name) continue;
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<sockaddr_in*>(it->ifa_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf))) found = buf;
    break;
  }
  freeifaddrs(list);
  return found;
}

// The first non-loopback IPv4 address that is up, or "" if there is none.
std::string FirstExternalAddress() {
  std::string found;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* it = list; it; it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
    if ((it->ifa_flags & IFF_LOOPBACK) || !(it->ifa_flags & IFF_UP)) continue;
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<sockaddr_in*>(it->ifa_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf))) {
      found = buf;
      break;
    }
  }
  freeifaddrs(list);
  return found;
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

Status ParseDouble(const char* name, const char* text, double lo, double hi, double* out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno || end == text || *end || !(v >= lo && v <= hi)) {
    return Status::InvalidArgument(std::string(name) + "='" + text + "' is not a number in [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = v;
  return Status::OK();
}

Status ParseBool(const char* name, const char* text, bool* out) {
  std::string t = text;
  if (t == "1" || t == "true" || t == "yes" || t == "on") {
    *out = true;
  } else if (t == "0" || t == "false" || t == "no" || t == "off") {
    *out = false;
  } else {
    return Status::InvalidArgument(std::string(name) + "='" + t + "' is not 0 or 1");
  }
  return Status::OK();
}

// Whether `key` is a CURVE key in Z85: 40 characters of its alphabet, each group of 5
// encoding a 32-bit number.
bool IsZ85Key(const std::string& key) {
  static const char kAlphabet[] =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  if (key.size() != 40) return false;
  for (size_t group = 0; group < key.size(); group += 5) {
    uint64_t value = 0;
    for (size_t i = group; i < group + 5; ++i) {
      const char* digit = std::strchr(kAlphabet, key[i]);
      if (!key[i] || !digit) return false;
      value = value * 85 + static_cast<uint64_t>(digit - kAlphabet);
    }
    if (value > UINT32_MAX) return false;
  }
  return true;
}

// The key in the file `path`, which only its owner may read (the key is the job's
// whole secret). Errors name the file, never its content.
Status ReadKeyFile(const std::string& path, std::string* key) {
  const std::string what = "PS_CURVE_SECRET_KEY_FILE=" + path;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::InvalidArgument(what + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return Status::InvalidArgument(what + " is not a regular file");
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    close(fd);
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::InvalidArgument(what + " has mode " + mode +
                                   ": group or others may read the job's secret key; make it "
                                   "readable by its owner only (chmod 600)");
  }
  char buf[256];
  ssize_t n = read(fd, buf, sizeof(buf));
  close(fd);
  if (n < 0) return Status::InvalidArgument(what + ": cannot read: " + std::strerror(errno));
  key->assign(buf, static_cast<size_t>(n));
  std::fill(buf, buf + sizeof(buf), '\0');
  while (!key->empty() && std::isspace(static_cast<unsigned char>(key->back()))) {
    key->pop_back();
  }
  return Status::OK();
}

// PS_SECURE and the key it needs (docs/security.md).
Status ReadCurveSettings(const Getenv& getenv, Config* cfg) {
  const char* secure = Lookup(getenv, "PS_SECURE", nullptr);
  const char* key = Lookup(getenv, "PS_CURVE_SECRET_KEY", nullptr);
  const char* file = Lookup(getenv, "PS_CURVE_SECRET_KEY_FILE", nullptr);
  if (secure) {
    Status s = ParseBool("PS_SECURE", secure, &cfg->secure);
    if (!s.ok()) return s;
  } else if (key || file) {
    // A key given without the switch most likely means the switch was forgotten: say
    // so rather than run unencrypted.
    return Status::InvalidArgument(
        std::string(key ? "PS_CURVE_SECRET_KEY" : "PS_CURVE_SECRET_KEY_FILE") +
        " is set but PS_SECURE is not: set PS_SECURE=1 to encrypt with it (PS_SECURE=0 "
        "runs without it)");
  }
  if (!cfg->secure) return Status::OK();
  if (key && file) {
    return Status::InvalidArgument(
        "PS_CURVE_SECRET_KEY and PS_CURVE_SECRET_KEY_FILE are both set; set one");
  }
  if (!key && !file) {
    return Status::InvalidArgument(
        "PS_SECURE=1 needs the job's CURVE secret key: set PS_CURVE_SECRET_KEY (40 "
        "characters of Z85; tracker/launch --secure makes one per job) or "
        "PS_CURVE_SECRET_KEY_FILE (a file only its owner may read)");
  }
  std::string text;
  if (key) {
    text = key;
  } else {
    Status s = ReadKeyFile(file, &text);
    if (!s.ok()) return s;
  }
  if (!IsZ85Key(text)) {
    return Status::InvalidArgument(
        std::string(key ? "PS_CURVE_SECRET_KEY" : "the key in PS_CURVE_SECRET_KEY_FILE") +
        " is not a CURVE secret key: expected 40 characters of Z85 (got " +
        std::to_string(text.size()) + " characters)");
  }
  cfg->curve_secret_key = text;
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

  if ((text = Lookup(getenv, "PS_INTERFACE", "DMLC_INTERFACE"))) cfg.interface = text;
  in_addr numeric{};
  if ((text = Lookup(getenv, "PS_NODE_HOST", "DMLC_NODE_HOST"))) {
    cfg.node_host = text;
    cfg.node_host_source = "PS_NODE_HOST";
  } else if (cfg.role == Node::kSchedulerRole &&
             inet_pton(AF_INET, cfg.scheduler_host.c_str(), &numeric) == 1) {
    // The address every node dials is the scheduler's to bind, as in ps-lite (an
    // interface's address could be another one, where nobody connects).
    cfg.node_host = cfg.scheduler_host;
    cfg.node_host_source = "PS_SCHEDULER_URI";
  } else if (!cfg.interface.empty()) {
    cfg.node_host = AddressOfInterface(cfg.interface);
    if (cfg.node_host.empty()) {
      return Status::InvalidArgument("PS_INTERFACE='" + cfg.interface +
                                     "' has no IPv4 address; set PS_NODE_HOST instead");
    }
    cfg.node_host_source = "PS_INTERFACE=" + cfg.interface;
  } else if (IsLoopback(cfg.scheduler_host)) {
    cfg.node_host = "127.0.0.1";
    cfg.node_host_source = "loopback, as the scheduler's address";
  } else {
    cfg.node_host = FirstExternalAddress();
    cfg.node_host_source = "this host's first non-loopback address";
    if (cfg.node_host.empty()) {
      cfg.node_host = "127.0.0.1";
      cfg.node_host_source = "loopback: this host has no other address";
    }
  }
  if ((text = Lookup(getenv, "DMLC_USE_KUBERNETES", nullptr)) && std::atoi(text) != 0 &&
      cfg.role == Node::kSchedulerRole) {
    cfg.bind_host = "0.0.0.0";  // ps-lite: the scheduler listens on every address
  }
  if (cfg.role == Node::kSchedulerRole) {
    cfg.node_port = cfg.scheduler_port;
  } else {
    const char* name = "PS_PORT";
    for (const char* candidate : {"PS_PORT", "DMLC_PORT", "PORT"}) {
      if ((text = Lookup(getenv, candidate, nullptr))) {
        name = candidate;
        break;
      }
    }
    if (text) {
      if (!(s = ParseInt(name, text, 0, 65535, &v)).ok()) return s;
      cfg.node_port = static_cast<int>(v);
    }
  }
  if (cfg.role != Node::kSchedulerRole && (text = Lookup(getenv, "PS_CONTROL_PORT", nullptr))) {
    if (!(s = ParseInt("PS_CONTROL_PORT", text, 0, 65535, &v)).ok()) return s;
    cfg.control_port = static_cast<int>(v);
  }
  if ((text = Lookup(getenv, "PS_RANK", nullptr))) {
    if (!(s = ParseInt("PS_RANK", text, 0, 1 << 20, &v)).ok()) return s;
    cfg.rank_hint = static_cast<int>(v);
  }
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
  if ((text = Lookup(getenv, "PS_SHM", nullptr))) {
    if (!(s = ParseBool("PS_SHM", text, &cfg.shm)).ok()) return s;
  }
  if ((text = Lookup(getenv, "PS_RECEIVE_IN_WAIT", nullptr))) {
    if (!(s = ParseBool("PS_RECEIVE_IN_WAIT", text, &cfg.receive_in_wait)).ok()) return s;
  }
  if ((text = Lookup(getenv, "PS_SHM_BYTES", nullptr))) {
    // At most shm::kMaxRingBytes (van/shm_segment.h): receivers refuse larger offers.
    if (!(s = ParseInt("PS_SHM_BYTES", text, int64_t{1} << 20, int64_t{1} << 36, &v)).ok()) {
      return s;
    }
    cfg.shm_bytes = static_cast<uint64_t>(v);
  }
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
  if (cfg.drop_rate > 0 && !cfg.resend) {
    return Status::InvalidArgument("PS_DROP_RATE=" + SecondsText(cfg.drop_rate) +
                                   " drops messages but PS_RESEND is off: nothing would "
                                   "recover them; set PS_RESEND=1");
  }
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
    if (v != 0 && v < static_cast<int64_t>(kMinChunkBytes)) {
      return Status::InvalidArgument("PS_CHUNK_BYTES=" + std::string(text) +
                                     " is below the smallest chunk (" +
                                     std::to_string(kMinChunkBytes) + "); 0 turns chunking off");
    }
    cfg.chunk_bytes = static_cast<uint64_t>(v);
    cfg.chunk_bytes_set = true;
  }
  if ((text = Lookup(getenv, "PS_JOB_TOKEN", nullptr))) {
    cfg.job_token = text;
    if (cfg.job_token.size() > 1024) {
      return Status::InvalidArgument("PS_JOB_TOKEN is " + std::to_string(cfg.job_token.size()) +
                                     " bytes long; at most 1024 are allowed");
    }
  }
  if (!(s = ReadCurveSettings(getenv, &cfg)).ok()) return s;
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
    "PS_DROP_SEED", "PS_CONSISTENCY", "PS_KEY_PLACEMENT", "PS_CHUNK_BYTES", "PS_JOB_TOKEN",
    "PS_SECURE", "PS_CURVE_SECRET_KEY", "PS_CURVE_SECRET_KEY_FILE", "PS_SHM", "PS_SHM_BYTES",
    "PS_RECEIVE_IN_WAIT",
    nullptr};

}  // namespace ps
