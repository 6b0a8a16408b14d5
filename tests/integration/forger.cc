// A process outside any HerdPS job that sends well-formed HerdPS messages in the names
// of a job's nodes, over its own ZeroMQ DEALER sockets, the way an attacker on the
// network would: it knows the wire format and the node ids, guesses routing ids ("9",
// the "h<hex>" format, none at all), but not the identities or the job token.
//
// Modes (--mode):
//   join     to the scheduler's (control) endpoint: ADD_NODE requests for a worker seat,
//            without a token and with a wrong one; waits for the scheduler's two
//            refusals on ROUTER sockets of its own (the endpoints the joins name).
//            Exit 0 iff both came back refused. With --claim_endpoint the joins name
//            another node's endpoint instead, and no reply is awaited.
//   push     to a server's data endpoint: pushes of --keys keys with value --value in
//            the names of workers 9 and 11, the scheduler and a node not in the job.
//   answer   to a worker's data endpoint: pull answers in server 8's name for
//            timestamps 0..--count, and for the exact --request_id / --incarnation /
//            --timestamp given.
//   barrier  to a worker's control endpoint: barrier releases in the scheduler's name
//            for every group.
//   refusal  to a node that has not joined yet: a join refusal in the scheduler's name.
// Every mode but join prints "forger: sent N forged messages" and exits 0 once they
// are on the wire.
#include <gflags/gflags.h>
#include <zmq.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "meta.pb.h"

DEFINE_string(mode, "", "join | push | answer | barrier | refusal");
DEFINE_string(endpoint, "", "the target node's endpoint, e.g. tcp://127.0.0.1:9000");
DEFINE_int32(keys, 400, "push / answer: keys 0..keys-1");
DEFINE_double(value, 1000.0, "push / answer: the forged value of every key");
DEFINE_int32(count, 64, "answer: forge answers for timestamps 0..count-1");
DEFINE_uint64(request_id, 0, "answer: a request id to copy");
DEFINE_uint64(incarnation, 0, "answer: an incarnation to copy");
DEFINE_int32(timestamp, -1, "answer: a timestamp to copy");
DEFINE_double(reply_timeout_s, 20, "join: how long to wait for the scheduler's refusals");
DEFINE_string(claim_endpoint, "",
              "join: name this endpoint (another node's) in the joins instead of the "
              "forger's own, so that the scheduler's refusals go there; no reply is awaited");
DEFINE_string(routing_id, "",
              "use only this routing id (e.g. a node's real identity, to check that the "
              "test fails when a forgery gets through)");

namespace {

namespace wire = herdps::wire;

constexpr int kLingerMs = 5000;

// Routing ids an outsider can pick: a node id, the runtime's own format with guessed
// hex, and none (ZeroMQ then makes one up).
std::vector<std::string> GuessedRoutingIds(const std::string& node_id) {
  if (!FLAGS_routing_id.empty()) return {FLAGS_routing_id};
  std::mt19937_64 rng(std::random_device{}());
  std::string copied = "h";
  for (int i = 0; i < 14; ++i) copied += "0123456789abcdef"[rng() % 16];
  return {node_id, copied, ""};
}

// One DEALER socket to the target; closing it flushes what was sent (linger).
class Link {
 public:
  Link(void* ctx, const std::string& endpoint, const std::string& routing_id) {
    socket_ = zmq_socket(ctx, ZMQ_DEALER);
    int linger = kLingerMs;
    zmq_setsockopt(socket_, ZMQ_LINGER, &linger, sizeof(linger));
    if (!routing_id.empty()) {
      zmq_setsockopt(socket_, ZMQ_ROUTING_ID, routing_id.data(), routing_id.size());
    }
    ok_ = zmq_connect(socket_, endpoint.c_str()) == 0;
  }
  ~Link() { zmq_close(socket_); }
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  bool ok() const { return ok_; }

  // Sends meta plus data frames, filling in the meta's frame sizes and types.
  bool Send(wire::Meta meta, const std::vector<std::pair<std::string, wire::DataType>>& frames) {
    meta.clear_data_size();
    meta.clear_data_type();
    for (const auto& f : frames) {
      meta.add_data_size(f.first.size());
      meta.add_data_type(f.second);
    }
    std::string head;
    meta.SerializeToString(&head);
    if (zmq_send(socket_, head.data(), head.size(), frames.empty() ? 0 : ZMQ_SNDMORE) < 0) {
      return false;
    }
    for (size_t i = 0; i < frames.size(); ++i) {
      const std::string& f = frames[i].first;
      if (zmq_send(socket_, f.data(), f.size(), i + 1 < frames.size() ? ZMQ_SNDMORE : 0) < 0) {
        return false;
      }
    }
    return true;
  }

 private:
  void* socket_ = nullptr;
  bool ok_ = false;
};

std::string Keys(int n) {
  std::vector<uint64_t> keys(n);
  for (int i = 0; i < n; ++i) keys[i] = static_cast<uint64_t>(i);
  return std::string(reinterpret_cast<const char*>(keys.data()), keys.size() * sizeof(uint64_t));
}

std::string Floats(int n, float v) {
  std::vector<float> vals(n, v);
  return std::string(reinterpret_cast<const char*>(vals.data()), vals.size() * sizeof(float));
}

int ForgePushes(void* ctx) {
  int sent = 0;
  for (int sender : {9, 11, 1, 4242}) {
    for (const std::string& rid : GuessedRoutingIds(std::to_string(sender))) {
      Link link(ctx, FLAGS_endpoint, rid);
      if (!link.ok()) return -1;
      wire::Meta m;
      m.set_app_id(0);
      m.set_customer_id(0);
      m.set_timestamp(sent);
      m.set_request_id(sent + 1);
      m.set_incarnation(12345);
      m.set_sender(sender);
      m.set_recipient(8);
      m.set_request(true);
      m.set_push(true);
      if (!link.Send(m, {{Keys(FLAGS_keys), wire::UINT64},
                         {Floats(FLAGS_keys, static_cast<float>(FLAGS_value)), wire::FLOAT}})) {
        return -1;
      }
      ++sent;
    }
  }
  return sent;
}

int ForgeAnswers(void* ctx) {
  int sent = 0;
  for (const std::string& rid : GuessedRoutingIds("8")) {
    Link link(ctx, FLAGS_endpoint, rid);
    if (!link.ok()) return -1;
    auto answer = [&](int ts, uint64_t request_id, uint64_t incarnation) {
      wire::Meta m;
      m.set_app_id(0);
      m.set_customer_id(0);
      m.set_timestamp(ts);
      m.set_request_id(request_id);
      m.set_incarnation(incarnation);
      m.set_sender(8);
      m.set_recipient(9);
      m.set_request(false);
      m.set_pull(true);
      return link.Send(m, {{Keys(FLAGS_keys), wire::UINT64},
                           {Floats(FLAGS_keys, static_cast<float>(FLAGS_value)), wire::FLOAT}});
    };
    for (int ts = 0; ts < FLAGS_count; ++ts) {
      // Request ids of a fresh customer are 1, 2, ...; timestamps their low bits.
      if (!answer(ts, static_cast<uint64_t>(ts) + 1, FLAGS_incarnation)) return -1;
      ++sent;
    }
    if (FLAGS_timestamp >= 0) {
      if (!answer(FLAGS_timestamp, FLAGS_request_id, FLAGS_incarnation)) return -1;
      ++sent;
    }
  }
  return sent;
}

int ForgeBarrierReleases(void* ctx) {
  int sent = 0;
  for (const std::string& rid : GuessedRoutingIds("1")) {
    Link link(ctx, FLAGS_endpoint, rid);
    if (!link.ok()) return -1;
    for (int group = 1; group <= 7; ++group) {
      wire::Meta m;
      m.set_sender(1);
      m.set_recipient(9);
      m.set_customer_id(0);
      m.set_request(false);
      m.mutable_control()->set_cmd(wire::BARRIER);
      m.mutable_control()->set_barrier_group(group);
      if (!link.Send(m, {})) return -1;
      ++sent;
    }
  }
  return sent;
}

int ForgeRefusal(void* ctx) {
  Link link(ctx, FLAGS_endpoint, "1");
  if (!link.ok()) return -1;
  wire::Meta m;
  m.set_sender(1);
  m.set_request(false);
  m.set_status_code(3);  // Unavailable, as the scheduler's own refusals
  m.set_status_message("the scheduler refused this node: forged by a process outside the job");
  m.mutable_control()->set_cmd(wire::ADD_NODE);
  return link.Send(m, {}) ? 1 : -1;
}

// A ROUTER socket on a free loopback port, for the scheduler's answers to a join.
struct Inbox {
  void* socket = nullptr;
  std::string endpoint;
  int port = 0;
};

bool OpenInbox(void* ctx, Inbox* inbox) {
  inbox->socket = zmq_socket(ctx, ZMQ_ROUTER);
  int linger = 0;
  zmq_setsockopt(inbox->socket, ZMQ_LINGER, &linger, sizeof(linger));
  if (zmq_bind(inbox->socket, "tcp://127.0.0.1:*") != 0) return false;
  char endpoint[256];
  size_t len = sizeof(endpoint);
  zmq_getsockopt(inbox->socket, ZMQ_LAST_ENDPOINT, endpoint, &len);
  inbox->endpoint = endpoint;
  inbox->port = std::atoi(inbox->endpoint.substr(inbox->endpoint.rfind(':') + 1).c_str());
  return true;
}

// Two joins for a worker seat, one without a token and one with a wrong token; returns
// 0 when both refusals came back and name PS_JOB_TOKEN. Each join names an endpoint of
// its own: the scheduler answers every refusal on a new connection carrying its
// identity, and a ROUTER keeps only one connection per identity.
int ForgeJoins(void* ctx) {
  const std::string tokens[] = {"", "not-this-jobs-token"};
  std::vector<Inbox> inboxes(2);
  for (Inbox& inbox : inboxes) {
    if (!OpenInbox(ctx, &inbox)) {
      std::fprintf(stderr, "forger: cannot bind a reply socket: %s\n", zmq_strerror(zmq_errno()));
      return 1;
    }
  }
  int sent = 0;
  for (int i = 0; i < 2; ++i) {
    std::string rid = "hps-forger-" + std::to_string(i);
    Link link(ctx, FLAGS_endpoint, rid);
    if (!link.ok()) return 1;
    wire::Meta m;
    m.set_request(true);
    m.set_recipient(1);
    m.set_sender(2147483647);  // no id yet, as a joining node
    auto* c = m.mutable_control();
    c->set_cmd(wire::ADD_NODE);
    if (!tokens[i].empty()) c->set_token(tokens[i]);
    auto* n = c->add_node();
    n->set_id(2147483647);
    n->set_role(wire::WORKER);
    n->set_host("127.0.0.1");
    const std::string& named =
        FLAGS_claim_endpoint.empty() ? inboxes[i].endpoint : FLAGS_claim_endpoint;
    n->set_port(inboxes[i].port);
    n->set_endpoint(named);
    n->set_control_endpoint(named);  // where the refusal is sent
    n->set_rank_hint(1);  // the seat of the worker that has not started yet
    n->set_rank(-1);
    n->set_identity(rid);  // consistent with its connection: only the token is wrong
    if (!link.Send(m, {})) return 1;
    ++sent;
  }
  std::printf("forger: sent %d forged joins\n", sent);
  if (!FLAGS_claim_endpoint.empty()) {
    for (Inbox& inbox : inboxes) zmq_close(inbox.socket);
    return 0;
  }

  int refusals = 0;
  std::vector<bool> answered(inboxes.size(), false);
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(FLAGS_reply_timeout_s * 1000));
  while (refusals < sent && std::chrono::steady_clock::now() < deadline) {
    zmq_pollitem_t items[2] = {{inboxes[0].socket, 0, ZMQ_POLLIN, 0},
                               {inboxes[1].socket, 0, ZMQ_POLLIN, 0}};
    if (zmq_poll(items, 2, 200) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      std::vector<std::string> frames;
      int more = 1;
      while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, inboxes[i].socket, 0) < 0) break;
        frames.emplace_back(static_cast<const char*>(zmq_msg_data(&part)), zmq_msg_size(&part));
        more = zmq_msg_more(&part);
        zmq_msg_close(&part);
      }
      wire::Meta reply;
      if (frames.size() < 2 || !reply.ParseFromString(frames[1])) continue;
      std::printf("forger: reply to join %d: cmd=%d status=%d: %s\n", i, reply.control().cmd(),
                  reply.status_code(), reply.status_message().c_str());
      if (!answered[i] && reply.control().cmd() == wire::ADD_NODE && reply.status_code() != 0 &&
          reply.status_message().find("PS_JOB_TOKEN") != std::string::npos) {
        answered[i] = true;
        ++refusals;
      }
    }
  }
  for (Inbox& inbox : inboxes) zmq_close(inbox.socket);
  std::printf("forger: %d of %d joins refused\n", refusals, sent);
  std::fflush(stdout);
  return refusals == sent ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_endpoint.empty()) {
    std::fprintf(stderr, "forger: --endpoint is required\n");
    return 2;
  }
  void* ctx = zmq_ctx_new();
  int rc = 0;
  if (FLAGS_mode == "join") {
    rc = ForgeJoins(ctx);
  } else {
    int sent = -1;
    if (FLAGS_mode == "push") sent = ForgePushes(ctx);
    if (FLAGS_mode == "answer") sent = ForgeAnswers(ctx);
    if (FLAGS_mode == "barrier") sent = ForgeBarrierReleases(ctx);
    if (FLAGS_mode == "refusal") sent = ForgeRefusal(ctx);
    if (sent < 0) {
      std::fprintf(stderr, "forger: mode '%s' failed: %s\n", FLAGS_mode.c_str(),
                   zmq_strerror(zmq_errno()));
      rc = 1;
    } else {
      std::printf("forger: sent %d forged messages\n", sent);
    }
  }
  std::fflush(stdout);
  zmq_ctx_term(ctx);  // waits (up to the linger) until what was sent has left
  return rc;
}
