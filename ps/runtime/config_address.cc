#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "config_fields.h"

namespace ps {
namespace config_fields {
namespace {

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

}  // namespace

// Where this node listens: its address (and where it came from), ports, rank hint.
Status ReadNodeAddress(const Getenv& getenv, Config* c) {
  Config& cfg = *c;
  const char* text = nullptr;
  int64_t v = 0;
  Status s;
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
  return Status::OK();
}

}  // namespace config_fields
}  // namespace ps
