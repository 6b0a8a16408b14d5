// KVServer<Val>: a server app. Every KV request for its app id reaches the request
// handle, which must answer each request exactly once with Response (or
// ResponseError), now or later, from any thread.
//
// Threading: the handle runs on the thread that receives the node's data channel (no
// hand-off, as fast as the network allows): the data receive thread, or, in a process
// that also runs workers, a worker thread in Wait (PS_RECEIVE_IN_WAIT). One request at
// a time, in arrival order, so requests from
// one worker are handled in the order they were issued (per-key FIFO). A handle that
// blocks delays the node's data messages, never its control plane: heartbeats,
// barriers, membership, resends and plugin messages travel on the control channel and
// are served by other threads. A server whose handle may block for long, or several
// server apps on one node that must not wait for each other, pass
// Customer::Delivery::kOwnThread: the handle then runs on the app's own thread, fed
// through a bounded queue (one hand-off per request).
//
// Malformed requests (unsorted keys, a value type other than Val, lens that do not add
// up) never reach the handle: the requester gets an InvalidArgument status back.
#ifndef PS_KV_SERVER_H_
#define PS_KV_SERVER_H_

#include <glog/logging.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "ps/base.h"
#include "ps/internal/codec_frame.h"
#include "ps/internal/customer.h"
#include "ps/internal/key_list_store.h"
#include "ps/internal/kv_message.h"
#include "ps/internal/log_limiter.h"
#include "ps/internal/node_activity.h"
#include "ps/internal/postoffice.h"
#include "ps/kv_pairs.h"
#include "ps/sarray.h"
#include "ps/simple_app.h"
#include "ps/status.h"

namespace ps {

template <typename Val>
class KVServer : public SimpleApp {
 public:
  // A KVServer is also a SimpleApp of (app_id, app_id), as in ps-lite: MXNet casts it
  // to SimpleApp* and sets a SimpleApp request handle for its commands. It receives
  // both kinds once its KV handle is set.
  using SimpleApp::Response;
  using SimpleApp::set_request_handle;
  using ReqHandle =
      std::function<void(const KVMeta& req_meta, const KVPairs<Val>& req_data, KVServer* server)>;

  // Serves app_id. Requests that arrive before the handle is set are held (see
  // docs/architecture.md) and delivered, in order, once it is. The server and its
  // handle may be set up before ps::Start (as MXNet and BytePS do).
  explicit KVServer(int app_id) : KVServer(app_id, Customer::Delivery::kReceiveThread) {}
  // `delivery`: which thread runs the handle (see the class comment).
  KVServer(int app_id, Customer::Delivery delivery) : app_id_(app_id) {
    Customer::Options options;
    options.delivery = delivery;
    customer_ = std::make_unique<Customer>(
        app_id, app_id,
        [this](Message& msg) {
          if (msg.meta.simple_app) {
            SimpleApp::Deliver(msg);  // a SimpleApp command: on the own thread
          } else {
            Process(msg);
          }
        },
        /*open_now=*/false, options);
    customer_->set_abort_handle([this](int ts, uint64_t id, const Status& s) {
      if (!AbortIfMine(ts, id, s) && on_abort_) on_abort_(ts, id, s);
    });
    AttachCustomer(customer_.get());
  }
  virtual ~KVServer() { Close(); }

  // Stops taking requests (waiting for a handle call in progress); Response and
  // ResponseError keep working, so requests already taken can still be answered.
  void Close() {
    closed_ = true;
    customer_->Close();
  }

  // Sets the handle and starts serving. Call once, before Finalize.
  void set_request_handle(const ReqHandle& request_handle) {
    if (!request_handle) throw Error("KVServer::set_request_handle: empty handle");
    if (closed_) throw Error("KVServer::set_request_handle after Close");
    request_handle_ = request_handle;
    customer_->Open();
  }

  // Answers the request `req`. For a pull, `res` carries the keys asked for (in the
  // same order) and their values. Thread-safe.
  void Response(const KVMeta& req, const KVPairs<Val>& res = KVPairs<Val>()) {
    Message msg = Answer(req);
    if (!res.keys.empty()) AppendKVPairs(res, &msg);
    if (!res.keys.empty() && res.keys.data() == req.request_keys.data() &&
        res.keys.size() == req.request_keys.size()) {
      // The request's own keys (the handle holds them, so the buffer is theirs): the
      // worker knows them.
      msg.data[0] = SArray<char>();
      msg.meta.keys_as_asked = true;
    } else if (req.keys_encoded) {
      EncodeKeysFrame(&msg);
    }
    if (std::is_same<Val, float>::value && req.pull_compression != 0) EncodeValuesAsFp16(&msg);
    Send(msg);
  }

  // Answers the request `req` with an error; the worker's Wait returns it.
  void ResponseError(const KVMeta& req, const Status& status) {
    Message msg = Answer(req);
    msg.meta.status_code = static_cast<int>(status.code());
    msg.meta.status_message = status.message();
    Send(msg);
  }

  int app_id() const { return app_id_; }

  // For a server app that sends KV requests of its own to other servers through this
  // KVServer's customer (get_customer(); OptimizerServer forwards pushes to replicas):
  // their answers go to `on_answer`, on the thread that receives them, and those the
  // runtime ends early (a dead recipient, PS_REQUEST_TIMEOUT) to `on_abort`, on the
  // control thread (it must not block). Set both before the first such request.
  using AnswerHandle = std::function<void(Message& answer)>;
  using AbortHandle = std::function<void(int timestamp, uint64_t request_id, const Status&)>;
  void set_own_request_handles(const AnswerHandle& on_answer, const AbortHandle& on_abort) {
    on_answer_ = on_answer;
    on_abort_ = on_abort;
  }

  // Declares that the handle takes chunks of large values (KVMeta::chunk >= 0): it
  // must store chunk c of key k apart from the key's other chunks and from a whole
  // value of k. Call before set_request_handle, and keep it for the server's life:
  // each worker asks every server of the app once, before its first chunk, and the
  // KVServer answers for itself (no handle call). Values go in chunks to an app only
  // if all its servers take them, else whole (docs/pipeline.md). A chunk that reaches
  // a server app that does not take them is refused with Unimplemented and fails its
  // request.
  void AcceptChunks() { accept_chunks_ = true; }

  // Declares that the app keeps replicas of its keys (PS_REPLICATION >= 2; an
  // OptimizerServer does): once a server is dead, its keys' requests come to their
  // first live replica, here. A KVServer that does not declare it refuses those with
  // Unavailable rather than serve keys whose history it does not hold.
  void KeepsReplicas() { keeps_replicas_ = true; }

  // For a server app that copies closed rounds to its keys' replicas instead of pushes
  // (OptimizerServer under PS_REPLICATE_ROUNDS): every answer from now on carries
  // `below`, the clock below which each round it closed is on every live replica
  // (Meta::rounds_copied_below; -1, the default: not such an app). Thread-safe.
  void set_rounds_copied_below(int64_t below) {
    rounds_copied_below_.store(below, std::memory_order_release);
  }
  // A worker's word that it sent again every push it kept for the dead server of rank
  // `dead_rank` (Meta::rounds_resent): the KVServer answers nothing and calls
  // handle(worker node id, dead_rank) on the receive thread. Without a handle it is
  // dropped. Set before set_request_handle.
  using RoundsResentHandle = std::function<void(int worker, int dead_rank)>;
  void set_rounds_resent_handle(const RoundsResentHandle& handle) { on_rounds_resent_ = handle; }

 private:
  Message Answer(const KVMeta& req) {
    Message msg;
    msg.meta.app_id = app_id_;
    msg.meta.customer_id = req.customer_id;
    msg.meta.request = false;
    msg.meta.push = req.push;
    msg.meta.pull = req.pull;
    msg.meta.head = req.cmd;
    msg.meta.timestamp = req.timestamp;
    msg.meta.request_id = req.request_id;
    msg.meta.incarnation = req.incarnation;
    msg.meta.part = req.part;
    msg.meta.chunk = req.chunk;
    msg.meta.recipient = req.sender;
    msg.meta.rounds_copied_below = rounds_copied_below_.load(std::memory_order_acquire);
    return msg;
  }

  void Send(Message& msg) {
    Status s = Postoffice::Get()->Send(msg);
    LOG_IF(WARNING, !s.ok() && answer_log_.ShouldLog())
        << "cannot answer node " << msg.meta.recipient << ": " << s << " ("
        << answer_log_.count() << " so far)";
  }

  void Process(Message& msg) {
    if (!msg.meta.request) {
      if (on_answer_) on_answer_(msg);
      return;
    }
    KVMeta meta;
    meta.cmd = msg.meta.head;
    meta.push = msg.meta.push;
    meta.pull = msg.meta.pull;
    meta.sender = msg.meta.sender;
    meta.timestamp = msg.meta.timestamp;
    meta.clock = msg.meta.clock;
    meta.customer_id = msg.meta.customer_id;
    meta.app_id = msg.meta.app_id;
    meta.request_id = msg.meta.request_id;
    meta.incarnation = msg.meta.incarnation;
    meta.part = msg.meta.part;
    meta.chunk = msg.meta.chunk;
    meta.chunk_offset = msg.meta.chunk_offset;
    meta.value_len = msg.meta.value_len;
    meta.keys_encoded = msg.meta.keys_encoded;
    meta.replica_of = msg.meta.replica_of;
    meta.resent = msg.meta.resent;
    meta.origin_request = msg.meta.origin_request;
    meta.origin_customer = msg.meta.origin_customer;
    meta.first_server = msg.meta.first_server;
    meta.first_part = msg.meta.first_part;
    // Only fp16 answers exist (docs/pipeline.md); other values are ignored.
    meta.pull_compression = msg.meta.pull_compression == static_cast<int>(Codec::kFp16)
                                ? msg.meta.pull_compression
                                : 0;
    if (msg.meta.rounds_resent) {
      if (on_rounds_resent_) on_rounds_resent_(msg.meta.sender, msg.meta.first_server);
      return;
    }
    if (msg.meta.chunk_query) {
      // A worker's question before its first chunk for this app: the runtime's to
      // answer, so no handle sees a request without keys.
      Message answer = Answer(meta);
      answer.meta.takes_chunks = accept_chunks_;
      Send(answer);
      return;
    }
    if (meta.chunk >= 0 && !accept_chunks_) {
      ResponseError(meta, Status::Unimplemented(kChunksRefused));
      return;
    }
    KVPairs<Val> data;
    const uint64_t max_bytes = static_cast<uint64_t>(Postoffice::Get()->config().max_message_bytes);
    const uint64_t list_id = msg.meta.key_list_ref ? msg.meta.key_list_ref : msg.meta.key_list;
    const KeyListStore::ListId list{msg.meta.sender, msg.meta.incarnation, msg.meta.customer_id,
                                    list_id};
    Status s;
    if (msg.meta.key_list_ref && !TakeKeyList(list, &msg, &s)) {
      // Not kept (evicted, or this process started after the worker sent the list).
      Message answer = Answer(meta);
      answer.meta.key_list_ref = list.id;
      answer.meta.key_list_unknown = true;
      Send(answer);
      return;
    }
    // Keys from a key frame, or a kept list (checked when it came), ascend by
    // construction: no second pass to check them.
    const bool ascending = msg.meta.keys_encoded || msg.meta.key_list_ref;
    if (s.ok()) s = DecodeKeysFrame(&msg, max_bytes / sizeof(Key));
    if (s.ok() && msg.meta.compression != 0) {
      // Compressed pushes carry float gradients; decoded here, before any handle.
      s = std::is_same<Val, float>::value
              ? DecodeCompressedValues(&msg, max_bytes)
              : Status::InvalidArgument("compressed values reached a server of " +
                                        std::string(DataTypeName(DataTypeOf<Val>())) +
                                        " values; codecs encode floats");
    }
    if (s.ok()) s = ParseKVPairs<Val>(msg, /*need_sorted=*/!ascending, &data);
    if (s.ok() && !keeps_replicas_) {
      Status mine = OwnsKeys(meta, data);
      if (!mine.ok()) {
        ResponseError(meta, mine);
        return;
      }
    }
    if (s.ok() && meta.push && data.vals.empty() && !data.keys.empty()) {
      s = Status::InvalidArgument("push without values");
    }
    if (s.ok() && msg.meta.key_list != 0 && !msg.meta.key_list_ref) {
      KeyLists()->Put(list, data.keys);
    }
    if (!s.ok()) {
      LOG_IF(WARNING, reject_log_.ShouldLog())
          << "rejected request " << msg.meta.timestamp << " from node " << msg.meta.sender
          << ": " << s.message() << " (" << reject_log_.count() << " so far)";
      ResponseError(meta, Status::InvalidArgument("rejected by server: " + s.message()));
      return;
    }
    meta.request_keys = data.keys;
    NodeActivity::Get()->CountServed(meta.push, meta.pull);
    try {
      request_handle_(meta, data, this);
    } catch (const std::exception& e) {
      // The requester must not wait forever for a handle that gave up; a peer can make
      // a handle throw on every request, so the log only samples a flood.
      LOG_IF(ERROR, thrown_log_.ShouldLog())
          << "request handle threw on request " << meta.timestamp << ": " << e.what() << " ("
          << thrown_log_.count() << " so far)";
      ResponseError(meta, Status::Internal(std::string("server handle failed: ") + e.what()));
    } catch (...) {
      LOG_IF(ERROR, thrown_log_.ShouldLog())
          << "request handle threw on request " << meta.timestamp
          << " an exception that is not a std::exception (" << thrown_log_.count() << " so far)";
      ResponseError(meta, Status::Internal("server handle failed: an exception that is not a "
                                           "std::exception"));
    }
  }

  // A request whose keys are the id of a list this server kept: puts the list in as its
  // keys frame. False when no such list is kept; true with *s saying what is wrong with
  // a request that names a list but carries keys.
  bool TakeKeyList(const KeyListStore::ListId& list, Message* msg, Status* s) {
    if (msg->meta.key_list != 0 || msg->data.empty() || !msg->data[0].empty() ||
        msg->meta.data_type.size() != msg->data.size()) {
      *s = Status::InvalidArgument("a request naming a kept key list must carry an empty keys "
                                   "frame and no list to keep");
      return true;
    }
    SArray<Key> keys;
    if (!KeyLists()->Find(list, &keys)) return false;
    msg->data[0] = SArray<char>(keys);
    msg->meta.data_type[0] = DataType::kUInt64;
    msg->meta.keys_encoded = false;
    return true;
  }

  // Made at the first request that uses it: PS_KEY_CACHE_BYTES is read at ps::Start,
  // and a KVServer may be made before.
  KeyListStore* KeyLists() {
    if (!key_lists_) {
      key_lists_ = std::make_unique<KeyListStore>(
          static_cast<size_t>(Postoffice::Get()->config().key_cache_bytes));
    }
    return key_lists_.get();
  }

  // Once keys fail over to their replicas (a server died, PS_REPLICATION >= 2): whether
  // this server owns every key of the request by the whole ring. An app that keeps no
  // replicas holds nothing of a dead server's keys.
  Status OwnsKeys(const KVMeta& meta, const KVPairs<Val>& data) const {
    Postoffice* po = Postoffice::Get();
    const ConsistentHashRing& ring = po->ring();
    if (!ring.failed_over()) return Status::OK();
    const int me = po->my_rank();
    for (Key key : data.keys) {
      const int owner = meta.chunk >= 0 ? ring.OwnerOfChunk(key, static_cast<uint32_t>(meta.chunk))
                                        : ring.OwnerOf(key);
      if (owner != me) {
        return Status::Unavailable("key " + std::to_string(key) + " of app " +
                                   std::to_string(app_id_) + " belongs to server " +
                                   std::to_string(owner) + ", which is dead, and this app keeps "
                                   "no replicas (KVServer::KeepsReplicas)");
      }
    }
    return Status::OK();
  }

  const int app_id_;
  bool closed_ = false;
  bool accept_chunks_ = false;
  bool keeps_replicas_ = false;
  LogLimiter reject_log_;
  LogLimiter answer_log_;  // answers that could not be sent
  LogLimiter thrown_log_;  // handle calls that threw
  ReqHandle request_handle_;
  AnswerHandle on_answer_;
  RoundsResentHandle on_rounds_resent_;
  std::atomic<int64_t> rounds_copied_below_{-1};
  AbortHandle on_abort_;
  std::unique_ptr<KeyListStore> key_lists_;  // KeyLists(); used by Process only
  std::unique_ptr<Customer> customer_;  // last: destroyed first, so no handler runs after
};

// The default request handle: a key-value store. A push adds its values into the
// stored ones (the first push of a key stores them); a pull returns them. A key keeps
// the length of its first push; a push with another length, or a pull of a key never
// pushed, is answered with an error and changes nothing.
template <typename Val>
struct KVServerDefaultHandle {
  void operator()(const KVMeta& req_meta, const KVPairs<Val>& req_data, KVServer<Val>* server) {
    size_t n = req_data.keys.size();
    size_t width = n && req_data.lens.empty() ? req_data.vals.size() / n : 0;
    if (req_meta.push) {
      // Check every key before changing any, so a failed push changes nothing.
      size_t from = 0;
      for (size_t i = 0; i < n; ++i) {
        size_t len = req_data.lens.empty() ? width : static_cast<size_t>(req_data.lens[i]);
        auto it = store.find(req_data.keys[i]);
        if (it != store.end() && it->second.size() != len) {
          server->ResponseError(
              req_meta, Status::InvalidArgument(
                            "key " + std::to_string(req_data.keys[i]) + " holds " +
                            std::to_string(it->second.size()) + " values; the push has " +
                            std::to_string(len)));
          return;
        }
        from += len;
      }
      from = 0;
      for (size_t i = 0; i < n; ++i) {
        size_t len = req_data.lens.empty() ? width : static_cast<size_t>(req_data.lens[i]);
        const Val* v = req_data.vals.data() + from;
        auto& stored = store[req_data.keys[i]];
        if (stored.empty()) {
          stored.assign(v, v + len);
        } else {
          for (size_t j = 0; j < len; ++j) stored[j] += v[j];
        }
        from += len;
      }
    }
    if (!req_meta.pull) {
      server->Response(req_meta);
      return;
    }
    KVPairs<Val> res;
    res.keys = req_data.keys;
    res.lens.resize(n);
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      auto it = store.find(req_data.keys[i]);
      if (it == store.end()) {
        server->ResponseError(req_meta, Status::NotFound("key " + std::to_string(req_data.keys[i]) +
                                                         " was never pushed"));
        return;
      }
      res.lens[i] = static_cast<int>(it->second.size());
      total += it->second.size();
    }
    res.vals.resize(total);
    size_t out = 0;
    for (size_t i = 0; i < n; ++i) {
      const auto& stored = store[req_data.keys[i]];
      std::copy(stored.begin(), stored.end(), res.vals.data() + out);
      out += stored.size();
    }
    server->Response(req_meta, res);
  }

  std::unordered_map<Key, std::vector<Val>> store;
};

}  // namespace ps

#endif  // PS_KV_SERVER_H_
