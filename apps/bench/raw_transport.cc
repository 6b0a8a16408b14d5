#include "raw_transport.h"

#include <zmq.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace bench {
namespace {

void NoFree(void*, void*) {}

// The request header: the op, then the payload size the answer should carry.
struct Header {
  char op;
  uint64_t size;
};

}  // namespace

RawServer::~RawServer() { Stop(); }

int RawServer::Start(const std::string& host) {
  context_ = zmq_ctx_new();
  socket_ = zmq_socket(context_, ZMQ_ROUTER);
  int timeout_ms = 200;  // lets Serve notice Stop()
  zmq_setsockopt(socket_, ZMQ_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));
  int linger = 0;
  zmq_setsockopt(socket_, ZMQ_LINGER, &linger, sizeof(linger));
  std::string addr = "tcp://" + host + ":*";
  if (zmq_bind(socket_, addr.c_str()) != 0) return -1;
  char last[256];
  size_t len = sizeof(last);
  zmq_getsockopt(socket_, ZMQ_LAST_ENDPOINT, last, &len);
  std::string endpoint(last);
  thread_ = std::thread([this] { Serve(); });
  return std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
}

void RawServer::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (socket_) zmq_close(socket_);
  if (context_) zmq_ctx_term(context_);
  socket_ = context_ = nullptr;
}

void RawServer::Serve() {
  while (!stop_) {
    zmq_msg_t id, header, payload;
    zmq_msg_init(&id);
    if (zmq_msg_recv(&id, socket_, 0) < 0) {
      zmq_msg_close(&id);
      continue;  // timeout: check stop_
    }
    zmq_msg_init(&header);
    zmq_msg_recv(&header, socket_, 0);
    zmq_msg_init(&payload);
    bool has_payload = zmq_msg_more(&header);
    if (has_payload) zmq_msg_recv(&payload, socket_, 0);
    Header h{};
    if (zmq_msg_size(&header) == sizeof(Header)) std::memcpy(&h, zmq_msg_data(&header), sizeof(h));
    zmq_msg_close(&header);
    if (h.op == static_cast<char>(Op::kQuit)) {
      zmq_msg_close(&id);
      zmq_msg_close(&payload);
      return;
    }
    zmq_msg_send(&id, socket_, ZMQ_SNDMORE);
    if (h.op == static_cast<char>(Op::kPush)) {
      char ack = 1;
      zmq_send(socket_, &ack, 1, 0);
    } else if (h.op == static_cast<char>(Op::kPull)) {
      if (payload_.size() < h.size) payload_.resize(h.size);
      zmq_msg_t out;
      zmq_msg_init_data(&out, payload_.data(), h.size, NoFree, nullptr);
      zmq_msg_send(&out, socket_, 0);
    } else {
      zmq_msg_send(&payload, socket_, 0);  // echo, zero-copy
    }
    zmq_msg_close(&payload);
  }
}

RawClient::~RawClient() {
  if (socket_) zmq_close(socket_);
  if (context_) zmq_ctx_term(context_);
}

bool RawClient::Connect(const std::string& endpoint, int timeout_ms) {
  timeout_ms_ = timeout_ms;
  context_ = zmq_ctx_new();
  socket_ = zmq_socket(context_, ZMQ_DEALER);
  int linger = 0;
  zmq_setsockopt(socket_, ZMQ_LINGER, &linger, sizeof(linger));
  zmq_setsockopt(socket_, ZMQ_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));
  zmq_setsockopt(socket_, ZMQ_SNDTIMEO, &timeout_ms, sizeof(timeout_ms));
  return zmq_connect(socket_, endpoint.c_str()) == 0;
}

void RawClient::GiveUp(const char* what) const {
  std::fprintf(stderr,
               "bench: the raw ZeroMQ server did not %s within %d ms (%s); its node may be "
               "gone: stopping\n",
               what, timeout_ms_, zmq_strerror(zmq_errno()));
  std::fflush(nullptr);
  std::_Exit(1);  // the HerdPS runtime's threads are still running: no clean exit
}

void RawClient::Send(Op op, const char* buffer, uint64_t size) {
  Header h{static_cast<char>(op), size};
  bool payload = op == Op::kPush || op == Op::kPushPull;
  if (zmq_send(socket_, &h, sizeof(h), payload ? ZMQ_SNDMORE : 0) < 0) GiveUp("take a request");
  if (payload) {
    zmq_msg_t msg;
    zmq_msg_init_data(&msg, const_cast<char*>(buffer), size, NoFree, nullptr);
    if (zmq_msg_send(&msg, socket_, 0) < 0) GiveUp("take a request");
  }
}

uint64_t RawClient::Receive() {
  zmq_msg_t msg;
  zmq_msg_init(&msg);
  if (zmq_msg_recv(&msg, socket_, 0) < 0) GiveUp("answer");
  uint64_t size = zmq_msg_size(&msg);
  zmq_msg_close(&msg);
  return size;
}

void RawClient::Quit() {
  Header h{static_cast<char>(Op::kQuit), 0};
  zmq_send(socket_, &h, sizeof(h), 0);
}

}  // namespace bench
