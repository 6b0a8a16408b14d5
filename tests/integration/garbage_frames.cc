// Integration: a node that receives garbage keeps serving. The worker opens its own
// ZeroMQ socket to the server (and the scheduler) and sends malformed messages of
// every kind; then it checks that push/pull still give the right values and that the
// server counted the malformed messages as dropped.
#include <gflags/gflags.h>
#include <zmq.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "meta.pb.h"
#include "ps/ps.h"

namespace {

constexpr int kCmdDropped = 7;  // pull: the server's count of dropped messages

void SendFrames(void* socket, const std::vector<std::string>& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    zmq_send(socket, frames[i].data(), frames[i].size(), i + 1 < frames.size() ? ZMQ_SNDMORE : 0);
  }
}

std::string MetaBytes(const herdps::wire::Meta& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

herdps::wire::Meta DataRequest(int sender, int recipient) {
  herdps::wire::Meta m;
  m.set_app_id(0);
  m.set_customer_id(0);
  m.set_timestamp(999999);
  m.set_sender(sender);
  m.set_recipient(recipient);
  m.set_request(true);
  m.set_push(true);
  return m;
}

// Sends malformed input; returns how many messages the van must reject outright.
int SendGarbage(const std::string& endpoint, int my_id, int server_id) {
  void* ctx = zmq_ctx_new();
  void* s = zmq_socket(ctx, ZMQ_DEALER);
  int linger = 2000;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
  zmq_connect(s, endpoint.c_str());
  int malformed = 0;
  std::mt19937 rng(7);
  // Random bytes as a meta frame, with and without data frames.
  for (int i = 0; i < 200; ++i) {
    std::string junk(1 + rng() % 300, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    herdps::wire::Meta probe;
    // A random buffer that happens to parse as an empty meta is not malformed.
    bool parses = probe.ParseFromString(junk) && probe.data_size_size() == 0;
    if (i % 2) {
      SendFrames(s, {junk, "abc"});
      malformed += 1;  // one data frame, and random bytes never declare exactly it
    } else {
      SendFrames(s, {junk});
      malformed += parses ? 0 : 1;
    }
  }
  // A valid meta, truncated.
  herdps::wire::Meta good = DataRequest(my_id, server_id);
  good.add_data_size(8);
  good.add_data_type(herdps::wire::UINT64);
  std::string bytes = MetaBytes(good);
  SendFrames(s, {bytes.substr(0, bytes.size() / 2), std::string(8, '\0')});
  ++malformed;
  // Declares two frames, sends one.
  herdps::wire::Meta two = good;
  two.add_data_size(4);
  two.add_data_type(herdps::wire::FLOAT);
  SendFrames(s, {MetaBytes(two), std::string(8, '\0')});
  ++malformed;
  // Declares 16 bytes, sends 8.
  herdps::wire::Meta sized = DataRequest(my_id, server_id);
  sized.add_data_size(16);
  sized.add_data_type(herdps::wire::UINT64);
  SendFrames(s, {MetaBytes(sized), std::string(8, '\0')});
  ++malformed;
  // 6 bytes of float.
  herdps::wire::Meta ragged = DataRequest(my_id, server_id);
  ragged.add_data_size(8);
  ragged.add_data_type(herdps::wire::UINT64);
  ragged.add_data_size(6);
  ragged.add_data_type(herdps::wire::FLOAT);
  SendFrames(s, {MetaBytes(ragged), std::string(8, '\0'), std::string(6, '\0')});
  ++malformed;
  // Unknown data type and unknown control command.
  herdps::wire::Meta badtype = DataRequest(my_id, server_id);
  badtype.add_data_size(8);
  badtype.add_data_type(static_cast<herdps::wire::DataType>(99));
  SendFrames(s, {MetaBytes(badtype), std::string(8, '\0')});
  ++malformed;
  herdps::wire::Meta badcmd;
  badcmd.mutable_control()->set_cmd(static_cast<herdps::wire::Command>(77));
  SendFrames(s, {MetaBytes(badcmd)});
  ++malformed;
  // Far too many frames.
  std::vector<std::string> many(100, "x");
  SendFrames(s, many);
  ++malformed;

  // Well-formed but wrong: the runtime rejects these above the van (not counted).
  // Data from a node that is not in the job.
  herdps::wire::Meta stranger = DataRequest(4242, server_id);
  SendFrames(s, {MetaBytes(stranger)});
  // Unsorted keys, and doubles sent to a float server: answered with errors.
  uint64_t unsorted[2] = {9, 3};
  herdps::wire::Meta unsorted_meta = DataRequest(my_id, server_id);
  unsorted_meta.add_data_size(16);
  unsorted_meta.add_data_type(herdps::wire::UINT64);
  unsorted_meta.add_data_size(8);
  unsorted_meta.add_data_type(herdps::wire::FLOAT);
  SendFrames(s, {MetaBytes(unsorted_meta), std::string(reinterpret_cast<char*>(unsorted), 16),
                 std::string(8, '\0')});
  uint64_t one_key = 5;
  herdps::wire::Meta doubles = DataRequest(my_id, server_id);
  doubles.add_data_size(8);
  doubles.add_data_type(herdps::wire::UINT64);
  doubles.add_data_size(8);
  doubles.add_data_type(herdps::wire::DOUBLE);
  SendFrames(s, {MetaBytes(doubles), std::string(reinterpret_cast<char*>(&one_key), 8),
                 std::string(8, '\0')});
  // A join request to a node that is not the scheduler.
  herdps::wire::Meta join;
  join.mutable_control()->set_cmd(herdps::wire::ADD_NODE);
  join.set_request(true);
  SendFrames(s, {MetaBytes(join)});

  zmq_close(s);
  zmq_ctx_term(ctx);
  return malformed;
}

int RunWorker() {
  ps::KVWorker<float> kv(0, 0);
  std::vector<ps::Key> keys;
  for (int i = 0; i < 500; ++i) keys.push_back(static_cast<ps::Key>(i) * 31);
  std::vector<float> ones(keys.size(), 1.0f);
  kv.Wait(kv.Push(keys, ones));

  int server_id = ps::Postoffice::ServerRankToID(0);
  int malformed = 0;
  for (const ps::Node& n : ps::Postoffice::Get()->nodes()) {
    if (n.role == ps::Node::kServerRole) {
      malformed = SendGarbage(n.endpoint, ps::Postoffice::Get()->my_id(), server_id);
    } else if (n.role == ps::Node::kSchedulerRole) {
      SendGarbage(n.endpoint, ps::Postoffice::Get()->my_id(), server_id);
    }
  }

  kv.Wait(kv.Push(keys, ones));
  std::vector<float> out;
  ps::Status s = kv.Wait(kv.Pull(keys, &out));
  size_t wrong = 0;
  for (float v : out) wrong += v != 2.0f;
  // The garbage travelled on connections of its own, so the server may still be
  // reading it: ask until the count is complete (or a generous deadline passes).
  std::vector<float> dropped;
  ps::Status ds;
  for (int attempt = 0; attempt < 200; ++attempt) {
    ds = kv.Wait(kv.Pull(std::vector<ps::Key>{0}, &dropped, nullptr, kCmdDropped));
    if (!ds.ok() || (dropped.size() == 1 && static_cast<int>(dropped[0]) >= malformed)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::printf("after garbage: pull %s, %zu wrong values; server dropped %.0f (sent %d malformed)\n",
              s.ToString().c_str(), wrong, dropped.empty() ? -1.0f : dropped[0], malformed);
  bool ok = s.ok() && out.size() == keys.size() && wrong == 0 && ds.ok() && dropped.size() == 1 &&
            static_cast<int>(dropped[0]) == malformed;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::Start(0, argv[0]);
  std::unique_ptr<ps::KVServer<float>> server;
  if (ps::IsServer()) {
    server = std::make_unique<ps::KVServer<float>>(0);
    ps::KVServerDefaultHandle<float> store;
    server->set_request_handle([store](const ps::KVMeta& m, const ps::KVPairs<float>& d,
                                       ps::KVServer<float>* srv) mutable {
      if (m.cmd == kCmdDropped) {
        ps::KVPairs<float> res;
        res.keys = d.keys;
        res.vals = ps::SArray<float>(
            1, static_cast<float>(ps::Postoffice::Get()->van()->stats().dropped_messages));
        srv->Response(m, res);
        return;
      }
      store(m, d, srv);
    });
  }
  int rc = ps::IsWorker() ? RunWorker() : 0;
  ps::Finalize(0, true);
  return rc;
}
