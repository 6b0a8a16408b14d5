#include "connection_guard.h"

#include <arpa/inet.h>
#include <glog/logging.h>
#include <linux/tcp.h>  // struct tcp_info with tcpi_bytes_received (glibc's lacks it)
#include <netinet/in.h>
#include <sys/socket.h>
#include <zmq.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace ps {
namespace {

// "address:port" of a socket address, or "" if it is not an IP one.
std::string AddressText(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = {0};
  if (address.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (address.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  return "";
}

// The ends of the connection `fd` is now, as text ("" for a non-IP socket or an error).
std::pair<std::string, std::string> Ends(int fd) {
  sockaddr_storage peer{}, local{};
  socklen_t peer_len = sizeof(peer), local_len = sizeof(local);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) {
    return {"", ""};
  }
  return {AddressText(peer), AddressText(local)};
}

}  // namespace

ConnectionGuard::~ConnectionGuard() { Stop(); }

Status ConnectionGuard::Monitor(void* context, void* router, int extra_events,
                                EventListener listener) {
  context_ = context;
  const std::string endpoint = "inproc://herdps-guard-" +
                               std::to_string(reinterpret_cast<uintptr_t>(this)) + "-" +
                               std::to_string(monitors_.size());
  if (zmq_socket_monitor(router, endpoint.c_str(),
                         ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED |
                             extra_events) != 0) {
    return Status::Internal("cannot monitor a socket: " + std::string(zmq_strerror(zmq_errno())));
  }
  void* monitor = zmq_socket(context_, ZMQ_PAIR);
  if (!monitor || zmq_connect(monitor, endpoint.c_str()) != 0) {
    if (monitor) zmq_close(monitor);
    return Status::Internal("cannot read a socket monitor: " +
                            std::string(zmq_strerror(zmq_errno())));
  }
  monitors_.push_back(monitor);
  listeners_.push_back(std::move(listener));
  return Status::OK();
}

Status ConnectionGuard::Start(size_t max_strangers) {
  max_strangers_ = max_strangers;
  const std::string endpoint =
      "inproc://herdps-guard-" + std::to_string(reinterpret_cast<uintptr_t>(this)) + "-wake";
  wake_receiver_ = zmq_socket(context_, ZMQ_PAIR);
  wake_ = zmq_socket(context_, ZMQ_PAIR);
  if (!wake_receiver_ || !wake_ || zmq_bind(wake_receiver_, endpoint.c_str()) != 0 ||
      zmq_connect(wake_, endpoint.c_str()) != 0) {
    return Status::Internal("cannot make the connection guard's wake-up: " +
                            std::string(zmq_strerror(zmq_errno())));
  }
  thread_ = std::thread([this] { Run(); });
  return Status::OK();
}

void ConnectionGuard::Stop() {
  if (thread_.joinable()) {
    zmq_send(wake_, "", 0, 0);
    thread_.join();
  }
  for (void* monitor : monitors_) zmq_close(monitor);
  monitors_.clear();
  if (wake_) zmq_close(wake_);
  if (wake_receiver_) zmq_close(wake_receiver_);
  wake_ = wake_receiver_ = nullptr;
}

void ConnectionGuard::Run() {
  std::vector<zmq_pollitem_t> items;
  items.push_back({wake_receiver_, 0, ZMQ_POLLIN, 0});
  for (void* monitor : monitors_) items.push_back({monitor, 0, ZMQ_POLLIN, 0});
  for (;;) {
    // Reads the byte counts every kCheckMs while a connection has not identified; sleeps
    // until the next event otherwise.
    const long timeout = watching() ? kCheckMs : -1;
    if (zmq_poll(items.data(), static_cast<int>(items.size()), timeout) < 0 &&
        zmq_errno() != EINTR) {
      LOG(ERROR) << "the connection guard stops: " << zmq_strerror(zmq_errno());
      return;
    }
    if (items[0].revents & ZMQ_POLLIN) return;  // Stop
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 1; i < items.size(); ++i) {
      if (items[i].revents & ZMQ_POLLIN) OnEvents(i - 1);
    }
    CheckLimits();
  }
}

void ConnectionGuard::OnEvents(size_t i) {
  void* monitor = monitors_[i];
  for (;;) {
    // An event is two frames: 16-bit event and 32-bit value (host order), then the
    // endpoint.
    zmq_msg_t head;
    zmq_msg_init(&head);
    if (zmq_msg_recv(&head, monitor, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&head);
      return;
    }
    uint16_t event = 0;
    int32_t value = -1;
    if (zmq_msg_size(&head) >= 6) {
      std::memcpy(&event, zmq_msg_data(&head), 2);
      std::memcpy(&value, static_cast<const char*>(zmq_msg_data(&head)) + 2, 4);
    }
    const bool more = zmq_msg_more(&head);
    zmq_msg_close(&head);
    if (more) {
      zmq_msg_t endpoint;
      zmq_msg_init(&endpoint);
      zmq_msg_recv(&endpoint, monitor, 0);
      zmq_msg_close(&endpoint);
    }
    if (event == ZMQ_EVENT_ACCEPTED) {
      Watch(value);
    } else if (event == ZMQ_EVENT_DISCONNECTED || event == ZMQ_EVENT_CLOSED) {
      Forget(value);
    } else if (listeners_[i]) {
      listeners_[i](event, static_cast<uint32_t>(value));
    }
  }
}

void ConnectionGuard::Watch(int fd) {
  Forget(fd);  // a number ZeroMQ reused before its close was reported
  Connection c;
  std::tie(c.peer, c.local) = Ends(fd);
  c.order = ++accepted_;
  c.tcp = !c.peer.empty();
  c.admitted = !c.tcp;
  // Its probe may have been received before the guard saw the connection accepted.
  auto seen = seen_early_.find(fd);
  if (seen != seen_early_.end()) {
    c.identity = std::move(seen->second);
    c.admitted = c.admitted || members_.count(c.identity) > 0;
    seen_early_.erase(seen);
  }
  if (c.tcp && !c.admitted) strangers_.fetch_add(1, std::memory_order_relaxed);
  connections_.emplace(fd, std::move(c));
}

void ConnectionGuard::Forget(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  const Connection& c = it->second;
  if (c.tcp && !c.admitted && !c.refused) strangers_.fetch_sub(1, std::memory_order_relaxed);
  connections_.erase(it);
}

void ConnectionGuard::AdmitLocked(int fd, Connection& c) {
  (void)fd;
  if (c.admitted) return;
  c.admitted = true;
  if (c.tcp && !c.refused) strangers_.fetch_sub(1, std::memory_order_relaxed);
}

void ConnectionGuard::Seen(int fd, const std::string& identity) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = connections_.find(fd);
  if (it == connections_.end()) {
    // Not seen accepted yet (the monitor's event is on its way): kept for Watch. A few
    // at most; an entry whose event never comes is replaced when its number is reused.
    if (seen_early_.size() < kMaxSeenEarly) seen_early_[fd] = identity;
    return;
  }
  if (it->second.admitted) return;
  if (members_.count(identity)) {
    AdmitLocked(fd, it->second);
  } else {
    it->second.identity = identity;  // admitted if it turns out to be a member's
  }
}

void ConnectionGuard::Admit(const std::string& identity) {
  if (identity.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!members_.insert(identity).second) return;
  for (auto& kv : connections_) {
    if (!kv.second.admitted && kv.second.identity == identity) AdmitLocked(kv.first, kv.second);
  }
}

void ConnectionGuard::CheckLimits() {
  if (!watching()) return;
  std::vector<std::pair<uint64_t, int>> over, within;  // (bytes, fd) of strangers
  uint64_t total = 0;
  for (auto& kv : connections_) {
    const Connection& c = kv.second;
    if (!c.tcp || c.admitted || c.refused) continue;
    tcp_info info{};
    socklen_t size = sizeof(info);
    if (getsockopt(kv.first, IPPROTO_TCP, TCP_INFO, &info, &size) != 0) continue;
    const uint64_t bytes = info.tcpi_bytes_received;
    if (bytes > kMaxStrangerBytes) {
      over.emplace_back(bytes, kv.first);
    } else {
      total += bytes;
      within.emplace_back(bytes, kv.first);
    }
  }
  for (const auto& [bytes, fd] : over) {
    Refuse(fd, std::to_string(bytes) + " bytes received, over the " +
                   std::to_string(kMaxStrangerBytes >> 20) + " MiB allowed");
  }
  // Past the total, the largest go first.
  std::sort(within.rbegin(), within.rend());
  for (const auto& [bytes, fd] : within) {
    if (total <= kMaxStrangerTotalBytes) break;
    total -= bytes;
    Refuse(fd, std::to_string(bytes) + " bytes received while such connections hold over " +
                   std::to_string(kMaxStrangerTotalBytes >> 20) + " MiB together");
  }
  if (strangers_.load() <= max_strangers_) return;
  std::vector<std::pair<uint64_t, int>> newest;  // (accept order, fd)
  for (const auto& kv : connections_) {
    const Connection& c = kv.second;
    if (c.tcp && !c.admitted && !c.refused) newest.emplace_back(c.order, kv.first);
  }
  std::sort(newest.rbegin(), newest.rend());
  for (const auto& entry : newest) {
    if (strangers_.load() <= max_strangers_) break;
    Refuse(entry.second,
           "more than " + std::to_string(max_strangers_) + " such connections at once");
  }
}

void ConnectionGuard::Refuse(int fd, const std::string& why) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  Connection& c = it->second;
  // The descriptor may have been closed and reused since the event: shut it down only
  // if it is still the connection the guard saw accepted.
  if (Ends(fd) != std::make_pair(c.peer, c.local)) {
    Forget(fd);
    return;
  }
  shutdown(fd, SHUT_RDWR);
  c.refused = true;
  strangers_.fetch_sub(1, std::memory_order_relaxed);
  const uint64_t n = refused_.fetch_add(1) + 1;
  LOG_IF(WARNING, log_.ShouldLog())
      << "closed the connection from " << c.peer << ", which has not shown the identity of a "
      << "member of the job: " << why << " (" << n << " closed so far)";
}

}  // namespace ps
