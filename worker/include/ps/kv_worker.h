// KVWorker<Val>: a worker's handle to the servers: push values to keys, pull them.
//
// Every call is asynchronous: it returns a timestamp at once; Wait(timestamp) blocks
// until all servers involved have answered, and the optional callback runs just before
// that: when the last answer arrives, on the thread that receives the node's data
// channel, which is the data receive thread or a thread of this process that is in
// Wait (PS_RECEIVE_IN_WAIT; so the callback must not block or Wait for another request,
// nor rely on which thread runs it); or on the worker's own thread when the request
// ends early. A request ends early, with Unavailable naming the server, when a server
// it waits for dies or leaves, and with Timeout at PS_REQUEST_TIMEOUT. Keys are placed
// on servers by the consistent-hash ring, and a value longer than the job's chunk size
// (PS_CHUNK_BYTES) travels in chunks spread over the servers if every server of the app
// takes chunks (KVServer::AcceptChunks), else whole, so one call may become several
// messages (ps/internal/request_pipeline.h); pulled values come back in the caller's
// key order. Before its first request with such a value, a KVWorker asks its servers
// once whether the app takes chunks; its requests wait, in issue order, until all have
// answered (docs/pipeline.md). A pull of a chunked key needs its length: this worker
// knows it once it pushed or pulled the key, or from a sized output array for one key.
//
// Buffers: the Z* calls share the caller's SArrays without copying; the caller must
// not modify pushed values, nor read pulled ones, before the request finishes. Push /
// Pull / PushPull with std::vector copy the inputs, and write outputs when it finishes
// (so the output vectors must stay alive until then).
//
// Errors: API misuse (unsorted or duplicate keys, vals/lens that do not match the keys,
// use before ps::Start) throws ps::Error. Failures on the servers (e.g. a pull of a key
// that was never pushed) come back as the Status that Wait returns; the callback still
// runs, and the outputs of a failed pull are unspecified. A callback that throws does
// not keep its request from finishing: Wait returns the request's own error if it
// failed, else Internal ("request N: its callback threw: ..."), and the throw is logged
// (rate-limited); the same holds for a throw while a pull's values are copied into the
// caller's arrays. A callback's throw never reaches the caller of Push or Pull.
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
#include "ps/internal/job_services.h"
#include "ps/internal/customer.h"
#include "ps/internal/key_partition.h"
#include "ps/internal/postoffice.h"
#include "ps/internal/request_pipeline.h"
#include "ps/internal/server_restarts.h"
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
            pipeline_->Process(msg);
          }
        },
        /*open_now=*/false, options);
    pipeline_ = std::make_unique<RequestPipeline>(customer_.get(), DataTypeOf<Val>(), sizeof(Val));
    customer_->set_abort_handle([this](int ts, uint64_t id, const Status& s) {
      if (!AbortIfMine(ts, id, s)) pipeline_->Abort(ts, id, s);
    });
    customer_->set_describe_handle([this](uint64_t id, NodeActivity::WaitInfo* info) {
      return pipeline_->Describe(id, info);
    });
    AttachCustomer(customer_.get());
    customer_->Open();
  }
  // Requests still in flight are abandoned: their answers are dropped. Unregisters
  // before anything is destroyed, so an answer being processed finishes first.
  virtual ~KVWorker() {
    pipeline_->StopListening();  // before the customer its listener posts to goes
    customer_->Close();
  }

  // Pushes vals to keys (copied: the vectors may change or go once it returns). lens[i]
  // values belong to keys[i]; empty lens means vals.size()/keys.size() values per key.
  int Push(const std::vector<Key>& keys, const std::vector<Val>& vals,
           const std::vector<int>& lens = {}, int cmd = 0, const Callback& cb = nullptr,
           int priority = 0) {
    // Read during the call only: the pipeline copies what outlives it (once, into the
    // parts, when the keys go to several servers).
    return IssueRequest(true, false, ViewOf(keys), ViewOf(vals), ViewOf(lens), cmd, cb, priority,
                        Sink(), /*borrowed=*/true);
  }

  // Pulls the values of keys into *vals (resized), and their lengths into *lens if
  // given. Both must stay alive until the request finishes; keys may change or go once
  // it returns.
  int Pull(const std::vector<Key>& keys, std::vector<Val>* vals, std::vector<int>* lens = nullptr,
           int cmd = 0, const Callback& cb = nullptr, int priority = 0) {
    Sink sink;
    sink.vec_vals = vals;
    sink.vec_lens = lens;
    return IssueRequest(false, true, ViewOf(keys), {}, {}, cmd, cb, priority, sink,
                        /*borrowed=*/true);
  }

  // Push, then pull the values after the push was applied, in one round trip.
  int PushPull(const std::vector<Key>& keys, const std::vector<Val>& vals,
               std::vector<Val>* outs, std::vector<int>* lens = nullptr, int cmd = 0,
               const Callback& cb = nullptr, int priority = 0) {
    Sink sink;
    sink.vec_vals = outs;
    sink.vec_lens = lens;
    return IssueRequest(true, true, ViewOf(keys), ViewOf(vals), {}, cmd, cb, priority, sink,
                        /*borrowed=*/true);
  }

  // Zero-copy Push: keys/vals/lens are shared, not copied.
  int ZPush(const SArray<Key>& keys, const SArray<Val>& vals, const SArray<int>& lens = {},
            int cmd = 0, const Callback& cb = nullptr, int priority = 0) {
    return IssueRequest(true, false, keys, vals, lens, cmd, cb, priority, Sink());
  }

  // Zero-copy Pull. If *vals is empty it receives a buffer (when one server answers,
  // the received buffer itself, without a copy); otherwise its size must equal the
  // number of values pulled and they are written into it.
  int ZPull(const SArray<Key>& keys, SArray<Val>* vals, SArray<int>* lens = nullptr, int cmd = 0,
            const Callback& cb = nullptr, int priority = 0) {
    Sink sink;
    sink.sarray_vals = vals;
    sink.sarray_lens = lens;
    return IssueRequest(false, true, keys, {}, {}, cmd, cb, priority, sink);
  }

  int ZPushPull(const SArray<Key>& keys, const SArray<Val>& vals, SArray<Val>* outs,
                SArray<int>* lens = nullptr, int cmd = 0, const Callback& cb = nullptr,
                int priority = 0) {
    Sink sink;
    sink.sarray_vals = outs;
    sink.sarray_lens = lens;
    return IssueRequest(true, true, keys, vals, {}, cmd, cb, priority, sink);
  }

  // Blocks until the request finishes; returns OK or the first error a server
  // reported (see the class comment).
  Status Wait(int timestamp) override {
    pipeline_->NoteWaited();
    return customer_->WaitRequest(timestamp);
  }
  // As Wait, but returns Timeout after `timeout` if the request has not finished (the
  // request goes on).
  Status Wait(int timestamp, std::chrono::milliseconds timeout) {
    pipeline_->NoteWaited();
    return customer_->WaitRequest(timestamp, timeout);
  }
  // Whether the request has finished: its Wait returns at once. A timestamp never
  // issued counts as finished (its Wait returns InvalidArgument at once). A request not
  // finished yet is wanted now: what this node coalesced to send goes, as in Wait
  // (without waiting for room in a peer's queue).
  bool Finished(int timestamp) {
    if (customer_->RequestIdOf(timestamp) == 0) return true;
    pipeline_->NoteWaited();
    if (Van* van = Postoffice::Get()->running_van()) van->FlushCoalesced(SendMode::kNonBlocking);
    return false;
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
    ClockClient* clocks = JobServices::Get()->clocks();
    if (!clocks) throw Error("Clock called before ps::Start or on the scheduler");
    const std::vector<int> pushes = pipeline_->PushesInFlight();
    if (!pushes.empty()) pipeline_->NoteWaited();  // as Wait: an app that clocks waits
    for (int ts : pushes) customer_->WaitRequest(ts);
    return clocks->EndClock();
  }
  // The clock this worker node is in: how many clocks it has ended (0 at the start).
  int64_t CurrentClock() const {
    ClockClient* clocks = JobServices::Get()->clocks();
    return clocks ? clocks->current() : 0;
  }
  // This worker ends no more clocks (its training is over, e.g. it ran out of data):
  // the others stop waiting for it. Finalize, leaving the job, does the same.
  Status FinishClocks() {
    ClockClient* clocks = JobServices::Get()->clocks();
    if (!clocks) throw Error("FinishClocks called before ps::Start or on the scheduler");
    return clocks->Finish();
  }

  // Servers that died and came back as a new process since the last call (a server
  // that took a dead one's place: docs/fault-tolerance.md), each with what the restart
  // lost of this KVWorker's pushes: those the dead processes acknowledged against those
  // the new one's state holds (ps/server_restart.h). Only servers that acknowledged a
  // push of this KVWorker before count. Asks each such server (an OptimizerServer
  // answers; other apps' servers report Unimplemented) and blocks for the answers. A
  // server reported with its counts is reported again only after another restart; one
  // whose report failed otherwise than Unimplemented is asked again at the next call.
  // Call it where the app can stop and look, e.g. after a request failed with
  // Unavailable and before retrying it, or at the end of an epoch.
  std::vector<ServerRestart> Restarts() { return AskServerRestarts(this, pipeline_.get()); }

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

  // Gradient compression (KVWorker<float> only; docs/pipeline.md): the codec of pushed
  // values per job or per key range, with error feedback (a residual per key and
  // chunk, kept across pushes), and fp16 pull answers. Set before issuing requests
  // (not thread-safe with them). Throws ps::Error for values that are not float. A
  // push whose values a codec refuses (NaN or infinity for topk, threshold, onebit,
  // randomk) throws ps::Error and sends nothing (one issued while this worker waits
  // for its servers' answer on chunks: Wait returns InvalidArgument instead).
  void set_compression(const CompressionPolicy& policy) { pipeline_->set_compression(policy); }
  const CompressionPolicy& compression() const { return pipeline_->compression(); }
  // Forgets the residuals kept for error feedback. Thread-safe.
  void ClearResiduals() { pipeline_->ClearResiduals(); }

  // Chunking of values longer than the job's chunk size (PS_CHUNK_BYTES): on by
  // default, where every server of the app takes chunks; off sends this worker's
  // values whole, each to its key's server, and asks the servers nothing.
  // Thread-safe; applies to requests issued afterwards.
  void set_chunking(bool on) { pipeline_->set_chunking(on); }

  // Key lists on the wire as key frames (the first key, then varint steps or runs of
  // steps; docs/pipeline.md) where that is shorter than 8 bytes a key: on by default
  // unless PS_KEY_ENCODING=0; off sends this worker's keys raw. Thread-safe; applies
  // to parts sent afterwards.
  void set_key_encoding(bool on) { pipeline_->set_key_encoding(on); }

  // Key caching (docs/pipeline.md): a key list this worker sent to a server before goes
  // as its id, and the server takes the list it kept; on by default unless
  // PS_KEY_CACHE_BYTES=0. The worker keeps a copy of each list it may send so (so an
  // array changed after the call is never mistaken for the list it held). Off sends
  // every list in full. Thread-safe; applies to parts sent afterwards.
  void set_key_caching(bool on) { pipeline_->set_key_caching(on); }

  // Requests issued by this worker and not finished yet.
  size_t NumInFlight() { return customer_->NumInFlight(); }

  // Answers dropped because they matched no request in flight: duplicates, answers to
  // requests that already failed (a deadline, a dead server), and stale answers.
  uint64_t dropped_answers() const { return pipeline_->dropped_answers(); }
  // Of those, answers meant for an earlier KVWorker with the same app and customer id
  // (another incarnation): never delivered to this one's requests.
  uint64_t stale_answers() const { return pipeline_->stale_answers(); }

  // What this worker has sent: push bytes as encoded and before, parts and chunks.
  RequestPipeline::Counters counters() const { return pipeline_->counters(); }


 private:
  // A view of an app's vector, for a request that borrows it (read only, during the
  // call: PipelineRequest::borrowed).
  template <typename T>
  static SArray<T> ViewOf(const std::vector<T>& v) {
    return SArray<T>(const_cast<T*>(v.data()), v.size());
  }

  // Where pulled values go.
  struct Sink {
    SArray<Val>* sarray_vals = nullptr;
    SArray<int>* sarray_lens = nullptr;
    std::vector<Val>* vec_vals = nullptr;
    std::vector<int>* vec_lens = nullptr;
    bool wants_values() const { return sarray_vals || vec_vals; }
  };

  int IssueRequest(bool push, bool pull, const SArray<Key>& keys, const SArray<Val>& vals,
                   const SArray<int>& lens, int cmd, const Callback& cb, int priority,
                   const Sink& sink, bool borrowed = false) {
    static const char* kNames[] = {"", "Pull", "Push", "PushPull"};
    const char* what = kNames[(push ? 2 : 0) + (pull ? 1 : 0)];
    if (pull && !sink.wants_values()) throw Error(std::string(what) + ": no output array given");
    PipelineRequest req;
    req.push = push;
    req.pull = pull;
    req.cmd = cmd;
    req.priority = priority;
    req.keys = keys;
    req.vals = SArray<char>(vals);
    req.lens = lens;
    req.borrowed = borrowed;
    req.callback = cb;
    if (pull) {
      if (sink.sarray_vals && !sink.sarray_vals->empty()) {
        req.sized_output = SArray<char>(*sink.sarray_vals);
      }
      req.wants_lens = sink.sarray_lens || sink.vec_lens;
      if (sink.vec_vals) {
        std::vector<Val>* out = sink.vec_vals;
        req.output_of_size = [out](size_t bytes) {
          out->resize(bytes / sizeof(Val));
          return SArray<char>(reinterpret_cast<char*>(out->data()), bytes);
        };
      }
      req.deliver = [sink](const SArray<char>& got, const SArray<int>& got_lens) {
        return Deliver(SArray<Val>(got), got_lens, sink);
      };
    }
    if (slicer_ && !keys.empty()) {
      // The app's slicer sees only requests of a valid shape.
      Status shape = ValidateKVPairsShape(what, keys.data(), keys.size(), vals.size(),
                                          lens.data(), lens.size(), push);
      if (!shape.ok()) throw Error(shape.message());
      Slice(what, keys, vals, lens, priority, &req);
    }
    return pipeline_->Issue(std::move(req), what);
  }

  // Splits the request with slicer_ into req->slices; throws ps::Error when the
  // slicer's answer is unusable.
  void Slice(const char* what, const SArray<Key>& keys, const SArray<Val>& vals,
             const SArray<int>& lens, int priority, PipelineRequest* req) {
    KVPairs<Val> kvs;
    kvs.keys = keys;
    kvs.vals = vals;
    kvs.lens = lens;
    kvs.priority = priority;
    const int num_servers = Postoffice::Get()->num_servers();
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
      PipelineRequest::Slice slice;
      slice.server = r;
      for (Key k : part.keys) {
        const Key* at = std::lower_bound(kvs.keys.begin(), kvs.keys.end(), k);
        size_t pos = static_cast<size_t>(at - kvs.keys.begin());
        if (at == kvs.keys.end() || *at != k || covered[pos]) {
          refuse("sent key " + std::to_string(k) + " that is not in the request, or twice");
        }
        covered[pos] = true;
        slice.positions.push_back(static_cast<uint32_t>(pos));
      }
      slice.keys = part.keys;
      slice.vals = SArray<char>(part.vals);
      slice.lens = part.lens;
      req->slices.push_back(std::move(slice));
    }
    if (std::find(covered.begin(), covered.end(), false) != covered.end()) {
      refuse("left keys of the request out");
    }
    req->sliced = true;
  }

  static Status Deliver(const SArray<Val>& vals, const SArray<int>& lens, const Sink& sink) {
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
    // Not when the result was put together in the vector itself (output_of_size).
    if (sink.vec_vals && (vals.data() != sink.vec_vals->data() || vals.empty())) {
      sink.vec_vals->assign(vals.begin(), vals.end());
    }
    if (sink.sarray_lens) {
      if (sink.sarray_lens->empty()) {
        *sink.sarray_lens = lens;
      } else if (sink.sarray_lens->size() == lens.size()) {
        if (!lens.empty()) {
          std::memcpy(sink.sarray_lens->data(), lens.data(), lens.size() * sizeof(int));
        }
      } else {
        return Status::InvalidArgument("pull lens array has the wrong size");
      }
    }
    if (sink.vec_lens) sink.vec_lens->assign(lens.begin(), lens.end());
    return Status::OK();
  }

  Slicer slicer_;
  // Declared before customer_, so it outlives every handler call.
  std::unique_ptr<RequestPipeline> pipeline_;
  std::unique_ptr<Customer> customer_;  // last: destroyed first, so no handler runs after
};

}  // namespace ps

#endif  // PS_KV_WORKER_H_
