#include "metrics_endpoint.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace ps {
namespace {

constexpr int kPollMs = 100;             // how soon Stop is noticed
constexpr size_t kMaxRequestBytes = 8192;  // a GET line and headers
constexpr auto kRequestTime = std::chrono::seconds(2);

std::string Errno() { return std::strerror(errno); }

// Writes all of `text`, giving up on error or a client that reads nothing for 2 s.
void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, 2000) <= 0) return;
    ssize_t n = send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      return;
    }
    done += static_cast<size_t>(n);
  }
}

std::string Response(const char* status, const std::string& type, const std::string& body) {
  return std::string("HTTP/1.1 ") + status + "\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace

Status MetricsEndpoint::Start(const std::string& host, int port, Page page) {
  page_ = std::move(page);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string where = host + ":" + std::to_string(port);
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || !found) {
    return Status::Unavailable("PS_METRICS_PORT=" + where + ": cannot resolve '" + host +
                               "': " + gai_strerror(rc));
  }
  sockaddr_in addr = *reinterpret_cast<sockaddr_in*>(found->ai_addr);
  freeaddrinfo(found);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Status::Unavailable("PS_METRICS_PORT=" + where + ": " + Errno());
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd_, 16) != 0) {
    Status s = Status::Unavailable("PS_METRICS_PORT=" + where + ": cannot listen: " + Errno());
    close(listen_fd_);
    listen_fd_ = -1;
    return s;
  }
  stop_ = false;
  thread_ = std::thread([this] { Serve(); });
  return Status::OK();
}

void MetricsEndpoint::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

void MetricsEndpoint::Serve() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, kPollMs) <= 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Answer(fd);
    close(fd);
  }
}

void MetricsEndpoint::Answer(int fd) {
  // Reads the request head (up to the blank line), bounded in bytes and time.
  std::string head;
  const auto deadline = std::chrono::steady_clock::now() + kRequestTime;
  while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
    if (head.size() >= kMaxRequestBytes || stop_) return;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left, kPollMs))) <= 0) continue;
    char buf[1024];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return;
    head.append(buf, static_cast<size_t>(n));
  }
  const size_t line_end = head.find_first_of("\r\n");
  const std::string line = head.substr(0, line_end);
  // "GET /metrics HTTP/1.1": the method and the path without a query.
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  const std::string method = line.substr(0, sp1);
  std::string path = sp1 == std::string::npos ? "" : line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  if (method != "GET") {
    WriteAll(fd, Response("405 Method Not Allowed", "text/plain", "only GET\n"));
  } else if (path != "/metrics" && path != "/") {
    WriteAll(fd, Response("404 Not Found", "text/plain", "the metrics are at /metrics\n"));
  } else {
    WriteAll(fd, Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", page_()));
  }
}

}  // namespace ps
