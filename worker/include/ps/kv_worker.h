// KVWorker<Val>: a worker's handle to the servers: push values to keys, pull them.
//
// Every call is asynchronous: it returns a timestamp at once; Wait(timestamp) blocks
// until all servers involved have answered, and the optional callback runs just before
// that: on the node's data receive thread when the last answer arrives (so it must not
// block or Wait for another request), or on the worker's own thread when the request
// ends early. A request ends early, with Unavailable naming the server, when a server
// it waits for dies or leaves, and with Timeout at PS_REQUEST_TIMEOUT. Keys are placed on servers by the consistent-hash
// ring, so one call may become several messages; pulled values come back in the
// caller's key order.
//
// Buffers: the Z* calls share the caller's SArrays without copying; the caller must
// not modify pushed values, nor read pulled ones, before the request finishes. Push /
// Pull / PushPull with std::vector copy the inputs, and write outputs when it finishes
// (so the output vectors must stay alive until then).
//
// Errors: API misuse (unsorted or duplicate keys, vals/lens that do not match the keys,
// use before ps::Start) throws ps::Error. Failures on the servers (e.g. a pull of a key
// that was never pushed) come back as the Status that Wait returns; the callback still
// runs, and the outputs of a failed pull are unspecified.
//
// Thread safety: all methods may be called from several threads at once.
#ifndef PS_KV_WORKER_H_
#define PS_KV_WORKER_H_

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ps/base.h"
#include "ps/internal/clock_client.h"
#include "ps/internal/customer.h"
#include "ps/internal/key_partition.h"
#include "ps/internal/kv_message.h"
#include "ps/internal/log_limiter.h"
#include "ps/internal/membership.h"
#include "ps/internal/postoffice.h"
#include "ps/kv_pairs.h"
#include "ps/range.h"
#include "ps/sarray.h"
#include "ps/simple_app.h"
#include "ps/status.h"

namespace ps {

template <typename Val>
class KVWorker : public SimpleApp {
 public:
  using Callback = std::function<void()>;
  // A KVWorker is also a SimpleApp of its (app_id, customer_id), as in ps-lite:
  // Request(head, body, recv_id) sends a command to the servers' KVServer (MXNet's way).
  using SimpleApp::Request;

  // app_id names the server app to talk to; customer_id tells apart several
  // KVWorkers of one app on this node. May be made before ps::Start (as MXNet and
  // BytePS do); its requests may be issued once Start has returned.
  explicit KVWorker(int app_id, int customer_id) {
    Customer::Options options;
    // Matching answers and copying values into the caller's buffers is runtime work
    // that never waits for the app; callbacks go to the customer's own thread.
    options.delivery = Customer::Delivery::kReceiveThread;
    customer_ = std::make_unique<Customer>(
        app_id, customer_id,
        [this](Message& msg) {
          if (msg.meta.simple_app) {
            SimpleApp::Deliver(msg);  // a SimpleApp answer: on the own thread
          } else {
            Process(msg);
          }
        },
        /*open_now=*/false, options);
    customer_->set_abort_handle([this](int ts, uint64_t id, const Status& s) {
      if (!AbortIfMine(ts, id, s)) Abort(ts, id, s);
    });
    AttachCustomer(customer_.get());
    customer_->Open();
  }
  // Requests still in flight are abandoned: their answers are dropped. Unregisters
  // before anything is destroyed, so an answer being processed finishes first.
  virtual ~KVWorker() { customer_->Close(); }

  // Pushes vals to keys (copied). lens[i] values belong to keys[i]; empty lens means
  // vals.size()/keys.size() values per key.
  int Push(const std::vector<Key>& keys, const std::vector<Val>& vals,
           const std::vector<int>& lens = {}, int cmd = 0, const Callback& cb = nullptr,
           int priority = 0) {
    return ZPush(SArray<Key>(keys), SArray<Val>(vals), SArray<int>(lens), cmd, cb, priority);
  }

  // Pulls the values of keys into *vals (resized), and their lengths into *lens if
  // given. Both must stay alive until the request finishes.
  int Pull(const std::vector<Key>& keys, std::vector<Val>* vals, std::vector<int>* lens = nullptr,
           int cmd = 0, const Callback& cb = nullptr, int priority = 0) {
    Sink sink;
    sink.vec_vals = vals;
    sink.vec_lens = lens;
    return IssueRequest(false, true, MakePairs(SArray<Key>(keys), {}, {}, priority), cmd, cb, sink);
  }

  // Push, then pull the values after the push was applied, in one round trip.
  int PushPull(const std::vector<Key>& keys, const std::vector<Val>& vals,
               std::vector<Val>* outs, std::vector<int>* lens = nullptr, int cmd = 0,
               const Callback& cb = nullptr, int priority = 0) {
    Sink sink;
    sink.vec_vals = outs;
    sink.vec_lens = lens;
    return IssueRequest(true, true, MakePairs(SArray<Key>(keys), SArray<Val>(vals), {}, priority), cmd,
                   cb, sink);
  }

  // Zero-copy Push: keys/vals/lens are shared, not copied.
  int ZPush(const SArray<Key>& keys, const SArray<Val>& vals, const SArray<int>& lens = {},
            int cmd = 0, const Callback& cb = nullptr, int priority = 0) {
    return IssueRequest(true, false, MakePairs(keys, vals, lens, priority), cmd, cb, Sink());
  }

  // Zero-copy Pull. If *vals is empty it receives a buffer (when one server answers,
  // the received buffer itself, without a copy); otherwise its size must equal the
  // number of values pulled and they are written into it.
  int ZPull(const SArray<Key>& keys, SArray<Val>* vals, SArray<int>* lens = nullptr, int cmd = 0,
            const Callback& cb = nullptr, int priority = 0) {
    Sink sink;
    sink.sarray_vals = vals;
    sink.sarray_lens = lens;
    return IssueRequest(false, true, MakePairs(keys, {}, {}, priority), cmd, cb, sink);
  }

  int ZPushPull(const SArray<Key>& keys, const SArray<Val>& vals, SArray<Val>* outs,
                SArray<int>* lens = nullptr, int cmd = 0, const Callback& cb = nullptr,
                int priority = 0) {
    Sink sink;
    sink.sarray_vals = outs;
    sink.sarray_lens = lens;
    return IssueRequest(true, true, MakePairs(keys, vals, {}, priority), cmd, cb, sink);
  }

  // Blocks until the request finishes; returns OK or the first error a server
  // reported (see the class comment).
  Status Wait(int timestamp) override { return customer_->WaitRequest(timestamp); }
  // As Wait, but returns Timeout after `timeout` if the request has not finished (the
  // request goes on).
  Status Wait(int timestamp, std::chrono::milliseconds timeout) {
    return customer_->WaitRequest(timestamp, timeout);
  }

  // Ends this worker node's current clock (see ps/consistency.h and
  // docs/consistency.md): first waits until this KVWorker's pushes issued so far are
  // finished (acknowledged or failed: their own Wait reports how), then tells the
  // scheduler and, under bsp / ssp:S, blocks until the next clock may begin. Under asp
  // (the default) it only counts. Unavailable if the scheduler is lost or this worker
  // called FinishClocks. Additive to ps-lite's API: apps that never call it run as
  // before, all in clock 0.
  // The clock belongs to the node: with several KVWorkers in one process, one of them
  // calls Clock() for all; requests issued by other threads while it blocks belong to
  // the next clock. Do not call Finalize while another thread is in Clock().
  Status Clock() {
    ClockClient* clocks = Postoffice::Get()->clocks();
    if (!clocks) throw Error("Clock called before ps::Start or on the scheduler");
    std::vector<int> pushes;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& kv : pending_) {
        if (kv.second.push) pushes.push_back(kv.second.timestamp);
      }
    }
    for (int ts : pushes) customer_->WaitRequest(ts);
    return clocks->EndClock();
  }
  // The clock this worker node is in: how many clocks it has ended (0 at the start).
  int64_t CurrentClock() const {
    ClockClient* clocks = Postoffice::Get()->clocks();
    return clocks ? clocks->current() : 0;
  }
  // This worker ends no more clocks (its training is over, e.g. it ran out of data):
  // the others stop waiting for it. Finalize, leaving the job, does the same.
  Status FinishClocks() {
    ClockClient* clocks = Postoffice::Get()->clocks();
    if (!clocks) throw Error("FinishClocks called before ps::Start or on the scheduler");
    return clocks->Finish();
  }

  // ps-lite's slicer: how a request's keys are split over the servers. sliced->at(i)
  // is (whether server i gets a part, the part); the part's keys must be a subset of
  // the request's, sorted, every key of the request in exactly one part, with their
  // values (and lens). The default (no slicer) places keys by PS_KEY_PLACEMENT. A
  // slicer that breaks these rules makes the request throw ps::Error. Set it before
  // issuing requests (not thread-safe with them).
  using SlicedKVs = std::vector<std::pair<bool, KVPairs<Val>>>;
  using Slicer = std::function<void(const KVPairs<Val>& send, const std::vector<Range>& ranges,
                                    SlicedKVs* sliced)>;
  void set_slicer(const Slicer& slicer) { slicer_ = slicer; }

  // Requests issued by this worker and not finished yet.
  size_t NumInFlight() { return customer_->NumInFlight(); }

  // Answers dropped because they matched no request in flight: duplicates, answers to
  // requests that already failed (a deadline, a dead server), and stale answers.
  uint64_t dropped_answers() const { return dropped_answers_.load(); }
  // Of those, answers meant for an earlier KVWorker with the same app and customer id
  // (another incarnation): never delivered to this one's requests.
  uint64_t stale_answers() const { return stale_answers_.load(); }

 private:
  // Where pulled values go.
  struct Sink {
    SArray<Val>* sarray_vals = nullptr;
    SArray<int>* sarray_lens = nullptr;
    std::vector<Val>* vec_vals = nullptr;
    std::vector<int>* vec_lens = nullptr;
    bool wants_values() const { return sarray_vals || vec_vals; }
  };

  // A request in flight. For a request that went to several servers, `parts` holds
  // each server's key positions and, once it answered, its values.
  struct Pending {
    int timestamp = 0;
    int remaining = 0;
    Callback cb;
    bool push = false;
    bool pull = false;
    Sink sink;
    SArray<Key> keys;
    std::vector<int> servers;                      // ranks asked
    // Per entry of servers, the positions of its keys in the request; empty when one
    // server has all the keys (the identity).
    std::vector<std::vector<uint32_t>> positions;
    std::vector<KVPairs<Val>> answers;             // per entry of servers
    std::vector<bool> answered;
    Status status;
  };

  static KVPairs<Val> MakePairs(const SArray<Key>& keys, const SArray<Val>& vals,
                                const SArray<int>& lens, int priority) {
    KVPairs<Val> kvs;
    kvs.keys = keys;
    kvs.vals = vals;
    kvs.lens = lens;
    kvs.priority = priority;
    return kvs;
  }

  int IssueRequest(bool push, bool pull, const KVPairs<Val>& kvs, int cmd, const Callback& cb,
              const Sink& sink);
  void Process(Message& msg);
  void Abort(int timestamp, uint64_t request_id, const Status& status);
  // `on_receive_thread`: called with the last answer (the callback may run here);
  // else from the control loop, which never runs app code.
  void Finish(int timestamp, Pending& p, bool on_receive_thread);
  Status Assemble(Pending& p, SArray<Val>* vals, SArray<int>* lens);
  static Status Deliver(const SArray<Val>& vals, const SArray<int>& lens, const Sink& sink);

  // Splits kvs with slicer_ into `parts` for the servers in p->servers, with their key
  // positions in p->positions; throws ps::Error when the slicer's answer is unusable.
  void SliceWithSlicer(const char* what, const KVPairs<Val>& kvs, int num_servers, Pending* p,
                       std::vector<KVPairs<Val>>* parts) {
    SlicedKVs sliced;
    slicer_(kvs, Postoffice::Get()->GetServerKeyRanges(), &sliced);
    auto refuse = [what](const std::string& why) {
      throw Error(std::string(what) + ": slicer " + why);
    };
    if (sliced.size() != static_cast<size_t>(num_servers)) {
      refuse("returned " + std::to_string(sliced.size()) + " parts for " +
             std::to_string(num_servers) + " servers");
    }
    std::vector<bool> covered(kvs.keys.size(), false);
    for (int r = 0; r < num_servers; ++r) {
      if (!sliced[r].first) continue;
      const KVPairs<Val>& part = sliced[r].second;
      Status shape = ValidateKVPairsShape(what, part.keys.data(), part.keys.size(),
                                          part.vals.size(), part.lens.data(), part.lens.size(),
                                          !kvs.vals.empty());
      if (!shape.ok()) refuse("part for server " + std::to_string(r) + ": " + shape.message());
      std::vector<uint32_t> positions;
      for (Key k : part.keys) {
        const Key* at = std::lower_bound(kvs.keys.begin(), kvs.keys.end(), k);
        size_t pos = static_cast<size_t>(at - kvs.keys.begin());
        if (at == kvs.keys.end() || *at != k || covered[pos]) {
          refuse("sent key " + std::to_string(k) + " that is not in the request, or twice");
        }
        covered[pos] = true;
        positions.push_back(static_cast<uint32_t>(pos));
      }
      p->servers.push_back(r);
      parts->push_back(part);
      p->positions.push_back(std::move(positions));
    }
    if (std::find(covered.begin(), covered.end(), false) != covered.end()) {
      refuse("left keys of the request out");
    }
  }

  Slicer slicer_;
  std::mutex mu_;  // guards pending_
  std::unordered_map<uint64_t, Pending> pending_;  // by request id
  std::atomic<uint64_t> dropped_answers_{0};
  std::atomic<uint64_t> stale_answers_{0};
  LogLimiter failure_log_;
  LogLimiter stray_log_;  // requests and answers that match nothing
  std::unique_ptr<Customer> customer_;  // last: destroyed first, so no handler runs after
};

template <typename Val>
int KVWorker<Val>::IssueRequest(bool push, bool pull, const KVPairs<Val>& kvs, int cmd,
                           const Callback& cb, const Sink& sink) {
  static const char* kNames[] = {"", "Pull", "Push", "PushPull"};
  const char* what = kNames[(push ? 2 : 0) + (pull ? 1 : 0)];
  Postoffice* po = Postoffice::Get();
  if (!po->started() || po->ring().empty()) {
    throw Error(std::string(what) + " called before ps::Start finished");
  }
  Status s = ValidateKVPairsShape(what, kvs.keys.data(), kvs.keys.size(), kvs.vals.size(),
                                  kvs.lens.data(), kvs.lens.size(), push);
  if (!s.ok()) throw Error(s.message());
  if (pull && !sink.wants_values()) throw Error(std::string(what) + ": no output array given");

  Pending p;
  p.cb = cb;
  p.push = push;
  p.pull = pull;
  p.sink = sink;
  p.keys = kvs.keys;
  std::vector<KVPairs<Val>> parts;
  int num_servers = po->num_servers();
  if (kvs.keys.empty()) {
    // Nothing to ask anyone: finishes below without a message.
  } else if (slicer_) {
    SliceWithSlicer(what, kvs, num_servers, &p, &parts);
  } else if (num_servers == 1) {
    p.servers.push_back(0);
    parts.push_back(kvs);
  } else {
    KeyPartition partition =
        PartitionKeys(po->ring(), num_servers, kvs.keys.data(), kvs.keys.size());
    std::vector<size_t> offsets;
    size_t width = 0;
    if (!kvs.lens.empty()) {
      offsets = ValueOffsets(kvs.lens.data(), kvs.lens.size());
    } else {
      width = kvs.vals.size() / kvs.keys.size();
    }
    int used = 0;
    for (auto& pos : partition.positions) used += !pos.empty();
    for (int r = 0; r < num_servers; ++r) {
      auto& pos = partition.positions[r];
      if (pos.empty()) continue;
      p.servers.push_back(r);
      if (used == 1) {
        // All keys on one server: send the caller's arrays as they are; an empty
        // `positions` means the answer is already in the caller's order.
        parts.push_back(kvs);
      } else {
        parts.push_back(SelectKVPairs(kvs, pos, offsets, width));
        p.positions.push_back(std::move(pos));
      }
    }
  }
  p.remaining = static_cast<int>(p.servers.size());
  p.answers.resize(p.servers.size());
  p.answered.assign(p.servers.size(), false);

  ClockClient* clocks = po->clocks();
  const int64_t clock = clocks ? clocks->current() : -1;
  std::vector<int> servers = p.servers;
  std::vector<int> server_ids;
  for (int r : servers) server_ids.push_back(Postoffice::ServerRankToID(r));
  uint64_t id = 0;
  int ts = customer_->NewRequest(server_ids, &id);
  p.timestamp = ts;
  if (p.remaining == 0) {  // no keys: nothing to ask
    Finish(ts, p, /*on_receive_thread=*/true);
    return ts;
  }
  {
    // Registered before the first part leaves: its answer may come back at once.
    std::lock_guard<std::mutex> lock(mu_);
    pending_.emplace(id, std::move(p));
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    Message msg;
    msg.meta.app_id = customer_->app_id();
    msg.meta.customer_id = customer_->customer_id();
    msg.meta.timestamp = ts;
    msg.meta.request_id = id;
    msg.meta.incarnation = customer_->incarnation();
    msg.meta.request = true;
    msg.meta.push = push;
    msg.meta.pull = pull;
    msg.meta.head = cmd;
    msg.meta.priority = kvs.priority;
    msg.meta.clock = clock;
    msg.meta.recipient = Postoffice::ServerRankToID(servers[i]);
    AppendKVPairs(parts[i], &msg);
    Status sent = po->Send(msg);
    if (!sent.ok()) {
      // Account for the part that never left, as if its server had failed it.
      Message failed;
      failed.meta = msg.meta;
      failed.meta.request = false;
      failed.meta.sender = msg.meta.recipient;
      failed.meta.status_code = static_cast<int>(sent.code());
      failed.meta.status_message = "not sent: " + sent.message();
      failed.meta.data_type.clear();
      Process(failed);
    }
  }
  return ts;
}

template <typename Val>
void KVWorker<Val>::Process(Message& msg) {
  const Meta& meta = msg.meta;
  if (meta.request) {
    // A worker serves no requests; one addressed to its app id is misrouted or hostile.
    LOG_IF(WARNING, stray_log_.ShouldLog())
        << "request from node " << meta.sender << " to a worker dropped";
    return;
  }
  if (meta.incarnation != customer_->incarnation()) {
    LOG_IF(WARNING, stray_log_.ShouldLog())
        << "answer from node " << meta.sender << " for an earlier KVWorker (app "
        << meta.app_id << ", customer " << meta.customer_id << ") dropped";
    stale_answers_.fetch_add(1, std::memory_order_relaxed);
    dropped_answers_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Pending done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(meta.request_id);
    if (it == pending_.end()) {
      LOG_IF(WARNING, stray_log_.ShouldLog())
          << "answer to unknown request " << meta.timestamp << " from node " << meta.sender
          << " dropped";
      dropped_answers_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    Pending& p = it->second;
    int rank = Postoffice::IDtoRank(meta.sender);
    size_t slot = 0;
    while (slot < p.servers.size() && p.servers[slot] != rank) ++slot;
    if (slot == p.servers.size() || p.answered[slot] || !IsServerId(meta.sender)) {
      LOG_IF(WARNING, stray_log_.ShouldLog())
          << "unexpected answer to request " << meta.timestamp << " from node " << meta.sender
          << " dropped";
      dropped_answers_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    p.answered[slot] = true;
    Status s = Status::FromWire(meta.status_code, meta.status_message);
    if (s.ok() && p.pull) {
      s = ParseKVPairs<Val>(msg, false, &p.answers[slot]);
      if (s.ok()) {
        // The answer must be for exactly the keys this server was asked for.
        const SArray<Key>& got = p.answers[slot].keys;
        const auto& pos = p.positions.empty() ? std::vector<uint32_t>() : p.positions[slot];
        size_t expect = pos.empty() ? p.keys.size() : pos.size();
        bool same = got.size() == expect;
        for (size_t i = 0; same && i < expect; ++i) {
          same = got[i] == p.keys[pos.empty() ? i : pos[i]];
        }
        if (!same) s = Status::Internal("the server answered with keys other than those asked");
      }
      if (!s.ok()) {
        s = Status(s.code(), "server " + std::to_string(rank) + ": " + s.message());
      }
    } else if (!s.ok()) {
      s = Status(s.code(), "server " + std::to_string(rank) + ": " + s.message());
    }
    if (!s.ok() && p.status.ok()) p.status = s;
    if (--p.remaining > 0) return;
    done = std::move(p);
    pending_.erase(it);
  }
  Finish(done.timestamp, done, /*on_receive_thread=*/true);
}

template <typename Val>
void KVWorker<Val>::Abort(int timestamp, uint64_t request_id, const Status& status) {
  Pending done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(request_id);
    if (it == pending_.end()) return;  // finished meanwhile
    done = std::move(it->second);
    pending_.erase(it);
  }
  done.status = status;
  Finish(timestamp, done, /*on_receive_thread=*/false);
}

template <typename Val>
void KVWorker<Val>::Finish(int timestamp, Pending& p, bool on_receive_thread) {
  if (p.pull && p.status.ok()) {
    SArray<Val> vals;
    SArray<int> lens;
    Status s = Assemble(p, &vals, &lens);
    if (s.ok()) s = Deliver(vals, lens, p.sink);
    if (!s.ok()) p.status = s;
  }
  if (!p.status.ok() && failure_log_.ShouldLog()) {
    LOG(WARNING) << "request " << timestamp << " failed: " << p.status << " ("
                 << failure_log_.count() << " failures so far)";
  }
  if (!p.cb) {
    customer_->FinishRequest(timestamp, p.status);
    return;
  }
  if (on_receive_thread) {
    p.cb();
    customer_->FinishRequest(timestamp, p.status);
    return;
  }
  // Ended by the control loop, which never runs app code: the callback goes to the
  // worker's own thread, and Wait returns after it.
  Customer* customer = customer_.get();
  customer->RunOnOwnThread([customer, cb = std::move(p.cb), timestamp, status = p.status] {
    try {
      cb();
    } catch (...) {
      customer->FinishRequest(timestamp, status);
      throw;
    }
    customer->FinishRequest(timestamp, status);
  });
}

template <typename Val>
Status KVWorker<Val>::Assemble(Pending& p, SArray<Val>* vals, SArray<int>* lens) {
  size_t n = p.keys.size();
  if (p.servers.empty()) return Status::OK();
  if (p.positions.empty()) {  // one server answered for all keys, in order
    *vals = p.answers[0].vals;
    *lens = p.answers[0].lens;
    if (lens->empty() && (p.sink.sarray_lens || p.sink.vec_lens)) {
      lens->resize(n, n ? static_cast<int>(vals->size() / n) : 0);
    }
    return Status::OK();
  }
  // Several servers: place each server's values at their keys' positions.
  std::vector<int> key_lens(n, 0);
  for (size_t s = 0; s < p.servers.size(); ++s) {
    const KVPairs<Val>& a = p.answers[s];
    size_t k = p.positions[s].size();
    for (size_t i = 0; i < k; ++i) {
      key_lens[p.positions[s][i]] =
          a.lens.empty() ? static_cast<int>(a.vals.size() / k) : a.lens[i];
    }
  }
  std::vector<size_t> offsets = ValueOffsets(key_lens.data(), n);
  size_t total = offsets[n];
  // Write straight into the caller's array when it already has the right size.
  if (p.sink.sarray_vals && p.sink.sarray_vals->size() == total) {
    *vals = *p.sink.sarray_vals;
  } else {
    vals->resize(total);
  }
  for (size_t s = 0; s < p.servers.size(); ++s) {
    const KVPairs<Val>& a = p.answers[s];
    size_t from = 0;
    for (uint32_t pos : p.positions[s]) {
      size_t len = offsets[pos + 1] - offsets[pos];
      if (len) std::memcpy(vals->data() + offsets[pos], a.vals.data() + from, len * sizeof(Val));
      from += len;
    }
  }
  lens->CopyFrom(key_lens.data(), n);
  return Status::OK();
}

template <typename Val>
Status KVWorker<Val>::Deliver(const SArray<Val>& vals, const SArray<int>& lens, const Sink& sink) {
  if (sink.sarray_vals) {
    SArray<Val>& out = *sink.sarray_vals;
    if (out.empty()) {
      out = vals;
    } else if (out.data() != vals.data()) {
      if (out.size() != vals.size()) {
        return Status::InvalidArgument("pull output array holds " + std::to_string(out.size()) +
                                       " values but the servers returned " +
                                       std::to_string(vals.size()) +
                                       "; pass an empty array to have it sized");
      }
      if (!vals.empty()) std::memcpy(out.data(), vals.data(), vals.size() * sizeof(Val));
    }
  }
  if (sink.vec_vals) sink.vec_vals->assign(vals.begin(), vals.end());
  if (sink.sarray_lens) {
    if (sink.sarray_lens->empty()) {
      *sink.sarray_lens = lens;
    } else if (sink.sarray_lens->size() == lens.size()) {
      if (!lens.empty()) std::memcpy(sink.sarray_lens->data(), lens.data(), lens.size() * sizeof(int));
    } else {
      return Status::InvalidArgument("pull lens array has the wrong size");
    }
  }
  if (sink.vec_lens) sink.vec_lens->assign(lens.begin(), lens.end());
  return Status::OK();
}

}  // namespace ps

#endif  // PS_KV_WORKER_H_
