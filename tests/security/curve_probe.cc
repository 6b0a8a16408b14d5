// A raw ZeroMQ client outside any HerdPS job: it connects one DEALER to a node's
// endpoint and sends well-formed HerdPS pushes in worker 9's name (as an attacker who
// knows the wire format would), then reports whether the node's CURVE handshake let it
// in, from ZeroMQ's own events on its socket.
//
// Modes (--mode), the key material the probe holds:
//   plain        none: no CURVE at all.
//   other_key    a keypair of its own, which it also expects from the server.
//   public_only  the job's public key (as the server key) and a keypair of its own:
//                what an attacker who learnt the public key has.
//   job_key      the job's keypair (the positive control: it must get in).
// public_only and job_key take the job's secret key from the environment,
// PS_CURVE_SECRET_KEY (never from the command line); public_only keeps only the
// public key derived from it.
//
// Prints "probe MODE: admitted, N pushes sent" or "probe MODE: refused (why)" and exits
// 0 when that is what --expect says, 1 otherwise, also when no handshake outcome came
// within --wait_s (2: usage or setup error).
#include <gflags/gflags.h>
#include <zmq.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "meta.pb.h"

DEFINE_string(endpoint, "", "the node's endpoint, e.g. tcp://127.0.0.1:9000");
DEFINE_string(mode, "", "plain | other_key | public_only | job_key");
DEFINE_string(expect, "", "admitted | refused");
DEFINE_int32(pushes, 3, "forged pushes to send");
DEFINE_int32(keys, 100, "keys 0..keys-1 in each push");
DEFINE_double(value, 1000.0, "the forged value of every key");
DEFINE_double(wait_s, 10, "how long to wait for the handshake's outcome");

namespace {

namespace wire = herdps::wire;
using Clock = std::chrono::steady_clock;

// Sets the CURVE options of `socket` for the mode; false on a setup error.
bool ApplyMode(void* socket) {
  if (FLAGS_mode == "plain") return true;
  char job_public[41] = {0}, own_public[41], own_secret[41];
  zmq_curve_keypair(own_public, own_secret);
  const char* server_key = own_public;
  const char* public_key = own_public;
  const char* secret_key = own_secret;
  std::string job_secret;
  if (FLAGS_mode == "public_only" || FLAGS_mode == "job_key") {
    const char* text = std::getenv("PS_CURVE_SECRET_KEY");
    if (!text || zmq_curve_public(job_public, text) != 0) {
      std::fprintf(stderr, "probe: PS_CURVE_SECRET_KEY is missing or malformed\n");
      return false;
    }
    server_key = job_public;
    if (FLAGS_mode == "job_key") {
      job_secret = text;
      public_key = job_public;
      secret_key = job_secret.c_str();
    }
  } else if (FLAGS_mode != "other_key") {
    std::fprintf(stderr, "probe: unknown --mode '%s'\n", FLAGS_mode.c_str());
    return false;
  }
  return zmq_setsockopt(socket, ZMQ_CURVE_SERVERKEY, server_key, 40) == 0 &&
         zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, public_key, 40) == 0 &&
         zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, secret_key, 40) == 0;
}

bool SendPush(void* socket, int n) {
  std::vector<uint64_t> keys(FLAGS_keys);
  std::vector<float> vals(FLAGS_keys, static_cast<float>(FLAGS_value));
  for (int i = 0; i < FLAGS_keys; ++i) keys[i] = static_cast<uint64_t>(i);
  wire::Meta m;
  m.set_app_id(0);
  m.set_customer_id(0);
  m.set_timestamp(n);
  m.set_request_id(static_cast<uint64_t>(n) + 1);
  m.set_incarnation(777);
  m.set_sender(9);
  m.set_recipient(8);
  m.set_request(true);
  m.set_push(true);
  m.add_data_size(keys.size() * sizeof(uint64_t));
  m.add_data_type(wire::UINT64);
  m.add_data_size(vals.size() * sizeof(float));
  m.add_data_type(wire::FLOAT);
  std::string head;
  m.SerializeToString(&head);
  return zmq_send(socket, head.data(), head.size(), ZMQ_SNDMORE) >= 0 &&
         zmq_send(socket, keys.data(), keys.size() * sizeof(uint64_t), ZMQ_SNDMORE) >= 0 &&
         zmq_send(socket, vals.data(), vals.size() * sizeof(float), 0) >= 0;
}

// Waits for the first handshake outcome on the monitor; "" if none came in time.
std::string WaitForOutcome(void* monitor, bool* admitted) {
  auto deadline = Clock::now() + std::chrono::duration<double>(FLAGS_wait_s);
  int timeout_ms = 100;
  zmq_setsockopt(monitor, ZMQ_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));
  while (Clock::now() < deadline) {
    zmq_msg_t head, address;
    zmq_msg_init(&head);
    if (zmq_msg_recv(&head, monitor, 0) < 0) {
      zmq_msg_close(&head);
      continue;
    }
    uint16_t event;
    uint32_t value;
    std::memcpy(&event, zmq_msg_data(&head), sizeof(event));
    std::memcpy(&value, static_cast<char*>(zmq_msg_data(&head)) + sizeof(event), sizeof(value));
    zmq_msg_close(&head);
    zmq_msg_init(&address);
    zmq_msg_recv(&address, monitor, 0);
    zmq_msg_close(&address);
    char why[96];
    switch (event) {
      case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        *admitted = true;
        return "handshake succeeded";
      case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
        std::snprintf(why, sizeof(why), "handshake failed: protocol error 0x%x", value);
        return why;
      case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        std::snprintf(why, sizeof(why), "handshake failed: the server's ZAP said %u", value);
        return why;
      case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        std::snprintf(why, sizeof(why), "handshake broken off (errno %u)", value);
        return why;
      default:
        break;
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_endpoint.empty() || (FLAGS_expect != "admitted" && FLAGS_expect != "refused")) {
    std::fprintf(stderr, "usage: curve_probe --endpoint E --mode M --expect admitted|refused\n");
    return 2;
  }
  void* ctx = zmq_ctx_new();
  void* socket = zmq_socket(ctx, ZMQ_DEALER);
  void* monitor = zmq_socket(ctx, ZMQ_PAIR);
  if (!ApplyMode(socket)) return 2;
  const int events = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
  if (zmq_socket_monitor(socket, "inproc://probe-monitor", events) != 0 ||
      zmq_connect(monitor, "inproc://probe-monitor") != 0 ||
      zmq_connect(socket, FLAGS_endpoint.c_str()) != 0) {
    std::fprintf(stderr, "probe: cannot connect to %s: %s\n", FLAGS_endpoint.c_str(),
                 zmq_strerror(zmq_errno()));
    return 2;
  }
  // Queued now, sent if and when the handshake lets them through.
  int sent = 0;
  for (int i = 0; i < FLAGS_pushes; ++i) sent += SendPush(socket, i) ? 1 : 0;
  bool admitted = false;
  std::string outcome = WaitForOutcome(monitor, &admitted);
  if (outcome.empty()) {
    // Neither: the endpoint was wrong or silent, which proves nothing either way.
    std::printf("probe %s: no handshake outcome within %g s\n", FLAGS_mode.c_str(), FLAGS_wait_s);
    return 1;
  }
  if (admitted) {
    std::printf("probe %s: admitted, %d pushes sent (%s)\n", FLAGS_mode.c_str(), sent,
                outcome.c_str());
  } else {
    std::printf("probe %s: refused (%s)\n", FLAGS_mode.c_str(), outcome.c_str());
  }
  std::fflush(stdout);
  // Admitted: let the pushes leave before closing.
  int linger = admitted ? 5000 : 0;
  zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof(linger));
  zmq_close(socket);
  linger = 0;
  zmq_setsockopt(monitor, ZMQ_LINGER, &linger, sizeof(linger));
  zmq_close(monitor);
  zmq_ctx_term(ctx);
  return (admitted ? "admitted" : "refused") == FLAGS_expect ? 0 : 1;
}
