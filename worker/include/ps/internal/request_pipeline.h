// RequestPipeline: the untyped core of KVWorker. It turns one push / pull into parts
// and the parts' answers back into one result:
//
//   issue:   validate -> slice by key placement -> chunk large values -> encode -> send
//   answer:  match the part -> decode -> check -> (last part) assemble -> deliver
//
// A part is one message to one server: the keys of the request that server owns, or
// one chunk of a value longer than the job's chunk size (PS_CHUNK_BYTES; chunk c of a
// key lives on the server ConsistentHashRing::ServerOfChunk names). Parts carry their
// index (meta.part), which answers echo, so a request may have several answers from
// one server. Values are handled as bytes of `elem_size`; KVWorker<Val> is a thin
// typed layer over this class.
//
// Chunks go to the server app only if all its servers take them. Before its first
// request that would chunk, the pipeline asks every live server once (Meta::chunk_query)
// and holds its requests, in issue order, until all have answered; every request is
// planned by that one answer (chunk_agreement.cc).
//
// Copies: the caller's arrays are sent as they are when one server owns every key and
// nothing is chunked or encoded; a chunk's values are a view into the caller's array;
// keys split over several servers are copied once into their parts. Borrowed arrays
// (PipelineRequest::borrowed) are copied where a message or a held request would
// keep them. A pull writes each answer once into the result (straight into the
// caller's array when it is sized, or into its std::vector).
//
// Thread safety: Issue may be called from several threads at once; Process runs on
// the thread that receives the data channel (one at a time: the receive thread or a
// thread in Wait), Abort on the control thread, the launch of requests held for the
// servers' answer on the customer's own thread.
#ifndef PS_INTERNAL_REQUEST_PIPELINE_H_
#define PS_INTERNAL_REQUEST_PIPELINE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "ps/base.h"
#include "ps/compression_policy.h"
#include "ps/internal/customer.h"
#include "ps/internal/log_limiter.h"
#include "ps/internal/message.h"
#include "ps/internal/node_activity.h"
#include "ps/sarray.h"
#include "ps/status.h"

namespace ps {

// One request as the typed layer hands it over.
struct PipelineRequest {
  bool push = false;
  bool pull = false;
  int cmd = 0;
  int priority = 0;
  SArray<Key> keys;
  SArray<char> vals;  // push: the values, as bytes
  SArray<int> lens;   // push: values per key; empty: the same number for every key
  // keys, vals and lens are views of the caller's arrays, valid only during Issue
  // (KVWorker::Push of std::vectors): Issue copies whatever outlives the call, so a
  // request split over servers is copied once, into its parts.
  bool borrowed = false;
  std::function<void()> callback;
  // Pull: the caller's output array when it already has a size (the result is written
  // into it; it must then hold exactly the values pulled), and where the result goes.
  SArray<char> sized_output;
  // Pull into a std::vector: sizes the caller's array to `bytes` and returns a view of
  // it, so that a result put together from several parts is written there once; null
  // for other outputs.
  std::function<SArray<char>(size_t bytes)> output_of_size;
  std::function<Status(const SArray<char>& vals, const SArray<int>& lens)> deliver;
  // Pull: whether deliver uses the lens; without, a pull of keys that all have the same
  // length makes none (10 million keys would cost a 40 MB array nobody reads).
  bool wants_lens = true;
  // Parts made by the caller's slicer (ps-lite's KVWorker::set_slicer): when `sliced`
  // is true they replace placement and chunking.
  struct Slice {
    int server = 0;                   // rank
    std::vector<uint32_t> positions;  // of its keys in `keys`
    SArray<Key> keys;
    SArray<char> vals;
    SArray<int> lens;
  };
  bool sliced = false;
  std::vector<Slice> slices;
};

class KeptRoundPushes;
class SentKeyLists;
struct MembershipView;

class RequestPipeline {
 public:
  // `customer` issues the requests (owned by the caller, outlives this). Values are
  // elements of `type`, `elem_size` bytes each.
  RequestPipeline(Customer* customer, DataType type, size_t elem_size);
  ~RequestPipeline();
  // No membership change reaches this pipeline after it returns (call before the
  // customer closes). Idempotent; the destructor calls it too.
  void StopListening();

  // Sends the request's parts; returns its timestamp (Customer::WaitRequest). Throws
  // ps::Error on misuse: bad shapes, no output for a pull, use before ps::Start, a
  // codec on values that are not float. `what` names the call in messages.
  int Issue(PipelineRequest request, const char* what);

  // An answer for this customer (the receive thread).
  void Process(Message& msg);
  // Ends a request early (Customer::AbortHandle).
  void Abort(int timestamp, uint64_t request_id, const Status& status);
  // What request `request_id` waits for (Customer::DescribeHandle): its kind and the
  // servers whose answers are missing. False when it is not in flight here.
  bool Describe(uint64_t request_id, NodeActivity::WaitInfo* info);

  // Gradient compression of pushes and fp16 pull answers (float values only; see
  // ps/compression_policy.h). Set before issuing requests (not thread-safe with them).
  // Throws ps::Error for an invalid policy or values that are not float.
  void set_compression(const CompressionPolicy& policy);
  const CompressionPolicy& compression() const { return policy_; }
  // Forgets every residual kept for error feedback (the next push of each key starts
  // from zero). Thread-safe.
  void ClearResiduals();
  // Residual floats kept for error feedback (for memory accounting).
  size_t residual_floats();

  // Chunking of values longer than the job's chunk size: on by default (where the
  // server app takes chunks); off sends every value whole (to its key's server) and
  // asks the servers nothing. Requests issued afterwards follow it.
  void set_chunking(bool on) { chunking_.store(on, std::memory_order_relaxed); }

  // Key lists as key frames (ps/internal/key_frame.h) where that is shorter: on by
  // default unless PS_KEY_ENCODING=0; off sends every key list raw (8 bytes a key) and
  // asks for raw keys in answers. Parts sent afterwards follow it.
  void set_key_encoding(bool on) { key_encoding_.store(on, std::memory_order_relaxed); }
  // Key caching: a key list sent to a server before goes as its id (on by default
  // unless PS_KEY_CACHE_BYTES=0; see KVWorker::set_key_caching). Parts sent afterwards
  // follow it.
  void set_key_caching(bool on) { key_caching_.store(on, std::memory_order_relaxed); }

  // Timestamps of pushes in flight (KVWorker::Clock waits for them).
  std::vector<int> PushesInFlight();

  // The app waits for (or polls) its requests (KVWorker::Wait, Finished, Clock): a window's
  // first request may then wait in its batch for the rest (Issue). Thread-safe.
  void NoteWaited() { waited_.store(true, std::memory_order_relaxed); }

  struct Counters {
    uint64_t push_value_bytes = 0;  // value bytes of pushes as sent (encoded; parts sent
                                    // again after a failover or a miss count again)
    uint64_t push_raw_bytes = 0;    // the same values before encoding
    uint64_t push_key_bytes = 0;    // key and length bytes of pushes, as sent
    uint64_t push_raw_key_bytes = 0;  // the same before key encoding (8 bytes a key)
    uint64_t parts = 0;             // messages sent
    uint64_t cached_key_lists = 0;  // of those, parts whose keys went as a list id
    uint64_t key_lists_resent = 0;  // parts sent again with their keys: the server had
                                    // not kept their list
    uint64_t chunks = 0;            // of those, chunks of large values
  };
  Counters counters() const;
  uint64_t dropped_answers() const { return dropped_answers_.load(); }
  uint64_t stale_answers() const { return stale_answers_.load(); }

  // Servers that answer from a new process (a replacement, docs/fault-tolerance.md):
  // the ranks whose process in `identities` (by rank; empty: not live) or whose last
  // acknowledging process differs from the one that acknowledged this worker's pushes
  // before, each with the pushes that earlier process acknowledged. Each restart is
  // returned once, until Restored is called for it.
  std::vector<std::pair<int, uint64_t>> RestartedServers(const std::vector<std::string>& identities);
  // The new process of server `rank` holds `kept` of this worker's pushes: its count
  // goes on from there.
  void Restored(int rank, uint64_t kept);

 private:
  struct Part;
  struct Pending;
  struct Held;
  // What the server app said about chunks (see the class comment). It only moves
  // kUnknown -> kAsking -> kTaken / kWholeOnly, or back to kUnknown when the question
  // failed; it becomes an answer only once no request is held (under mu_).
  enum class ChunkSupport : uint8_t { kUnknown, kAsking, kTaken, kWholeOnly };

  // The keys of req that would travel in chunks, by position: the whole value length,
  // 0 for keys that go whole; empty when none would. Pushes by their length; pulls by
  // the length this worker knows (from its own pushes and pulls), or the one key's
  // sized output.
  std::vector<uint64_t> ChunkedLengths(const PipelineRequest& req);
  // Remembers the lengths of the keys that go in chunks, for later pulls of them.
  void RememberChunkedLengths(const PipelineRequest& req, const std::vector<uint64_t>& chunked);
  // Splits req into parts, `chunked` (from ChunkedLengths, or empty: every value whole)
  // saying which keys go in chunks. Throws ps::Error when a key would need over 2^31
  // chunks.
  void Plan(const PipelineRequest& req, const char* what, const std::vector<uint64_t>& chunked,
            Pending* p, std::vector<Message>* messages);
  // The keys (and, for a push, the values and lens) of req at positions `pos`, into
  // new arrays: `offsets` are the value offsets of a push with lens (else empty, and
  // every key has `width` values).
  void GatherPart(const PipelineRequest& req, const std::vector<size_t>& offsets, size_t width,
                  const std::vector<uint32_t>& pos, SArray<Key>* keys, SArray<char>* vals,
                  SArray<int>* lens) const;
  // Assemble's common case: whole values, every key of the same length, every key
  // answered once; false (nothing written) for any other.
  bool AssembleSameWidth(Pending& p, SArray<char>* vals, SArray<int>* lens);
  // Counts p's messages and stamps them with the request's timestamp, id and clock.
  void Stamp(const PipelineRequest& req, const Pending& p, int timestamp, uint64_t id,
             int64_t clock, std::vector<Message>* messages);

  // The chunk agreement (chunk_agreement.cc). Holds a request until the server app's
  // answer on chunks is in, asking for it if nobody has and the request `would_chunk`;
  // returns its timestamp.
  int Hold(PipelineRequest req, const char* what, std::unique_ptr<Pending> p, bool would_chunk);
  // Sends the question to every live server.
  void AskChunkSupport();
  // The last answer to the question is in (or it ended early): the held requests go on
  // the customer's own thread.
  void EndChunkQuestion(const Pending& question);
  // On the own thread: plans and sends the held requests in issue order, then makes
  // `answer` the app's (kUnknown after a failed question: `failure` says why).
  void LaunchHeld(ChunkSupport answer, const Status& failure);
  // Plans and sends the held request `id` by `answer`; with kUnknown (no answer) one
  // that would chunk ends with `failure` (not OK).
  void LaunchHeldRequest(uint64_t id, ChunkSupport answer, const Status& failure);
  Status TakeAnswer(Part& part, const Pending& p, Message& msg);
  // Keeps each part's message as planned, for failover (part_failover.cc,
  // SendsPartsAgain) and for sending its keys again (key caching).
  void KeepSentParts(Pending* p, const std::vector<Message>& messages);
  // Request `id` ends early with `status`: true when instead its parts whose server
  // died go again to their keys' new servers (posted to the customer's own thread), or
  // when its parts on a server that died were all answered before (it goes on).
  bool FailOverLater(uint64_t id, const Status& status);
  // A part `unsent` could not be sent because its server died as it left (the table
  // said so after the part was planned): true when it goes to its keys' new servers
  // instead (Reroute, posted to the customer's own thread), as a part in flight there
  // would; false when the request must fail (no replicas, or the server lives).
  bool RerouteUnsent(const Message& unsent);
  // Sends request `id`'s parts whose server is dead to the replicas that took their
  // keys over, marked resent; ends the request when one has no live replica.
  void Reroute(uint64_t id);
  // Round copies (PS_REPLICATE_ROUNDS, part_failover.cc). On the control thread, for
  // each new table: servers newly dead have what was kept for them sent again.
  void OnMembership(const MembershipView& view);
  // On the customer's own thread, after servers `dead` (ranks) died: the parts in
  // flight to them go to their keys' new servers (Reroute), then the pushes kept for
  // them (KeptRoundPushes), then every live server is told so (Meta::rounds_resent).
  void SendKeptAgain(const std::vector<int>& dead);
  struct KeptResend;
  // mu_ held: `part`, a push part its server answered with `msg`, into an open round it
  // has not copied, is kept (KeptRoundPushes); true when the table says that server died
  // already (the part must go again at once).
  bool KeepRoundPush(const Message& msg, const Part& part);
  // mu_ held: takes out the kept push sent again that `msg` answers; null when it
  // answers another request.
  std::unique_ptr<KeptResend> TakeKeptAnswer(const Message& msg);
  // The answer to a kept push sent again: kept anew for its new server, or the loss
  // logged.
  void EndKeptResend(const Message& msg, KeptResend& resend);
  // Whether the server process `part` went to is gone: not in the job, or replaced by
  // a new process in its place (another identity).
  static bool PartServerGone(const MembershipView& view, const Part& part);
  // Whether a part may have to go again elsewhere once its server is gone, so that
  // every part is kept, neither lent nor key-encoded early: with PS_REPLICATION >= 2
  // (failover), or when the job's servers can leave it (ring placement,
  // PS_CHUNK_BYTES=0): a worker may learn that a server leaves only after it sent the
  // server a part, which must go on once the server left.
  static bool SendsPartsAgain();
  // With one copy of each key: whether request `p` ends as without failover, unless one
  // of its servers left the job (out of the table) and none died (in it, not alive).
  static bool FailsWithoutCopies(const MembershipView& view, const Pending& p);
  // Encodes the values of push parts whose keys have a codec; throws ps::Error (nothing
  // sent) on values a codec refuses.
  void Encode(const PipelineRequest& req, const Pending& p, std::vector<Message>* messages);
  // Which of policy_'s codecs (0: push, 1 + i: ranges[i]) a key uses.
  size_t CodecIndex(Key key) const;
  // How a part's keys may travel: kShortest, a list id the server has (key caching),
  // else a key frame where that is shorter (key encoding), else raw; kInFull, no list
  // id (sent again because the server had not kept it); kAsTheyAre, raw (written
  // straight into a buffer the transport lent, Van::LendSendBuffers).
  enum class KeyForm : uint8_t { kShortest, kInFull, kAsTheyAre };
  void PrepareKeys(Message* msg, KeyForm form);
  // A pull's parts keep the keys they ask for (Part::asked), or their hash where the
  // keys are lent.
  void RememberAsked(Pending* p, const std::vector<Message>& messages);
  // Each part's KeyForm for its first send: kAsTheyAre where its keys are lent.
  static std::vector<KeyForm> KeyFormsOf(const std::vector<Part>& parts);
  // Whether a part whose raw keys take `key_bytes` is kept after it is sent
  // (Part::sent): when it may go again (SendsPartsAgain), or when its list may go as an
  // id (key caching). Such a part's arrays must stay readable, so they are never lent by
  // the transport.
  bool KeepsSentPart(uint64_t key_bytes);
  // Buffers the van lends for a part to server `rank` (Van::LendSendBuffers), sizes[0]
  // its raw keys' bytes; every entry empty for a part kept after it is sent.
  std::vector<SArray<char>> LendForPart(int rank, const std::vector<uint64_t>& sizes);
  // Whether parts may go with their keys encoded when the request is made (rather than
  // at SendPart): key encoding on (PS_KEY_ENCODING, set_key_encoding), and no failover
  // (SendsPartsAgain), which splits parts by their raw keys.
  bool EncodesKeysAtIssue();
  // A borrowed request's parts whose keys are the caller's whole key list, one run
  // (ps-lite's benchmark at one server): encoded now, a few bytes, instead of copied
  // (PipelineRequest::borrowed) and then encoded at SendPart. A pull's part remembers
  // the hash of those keys to check its answer against (Part::asked_by_hash). Not with
  // failover (SendsPartsAgain), which splits parts by their raw keys.
  void EncodeBorrowedRuns(const PipelineRequest& req, Pending* p,
                          std::vector<Message>* messages);
  // A borrowed request's frames that are views of the caller's arrays, in parts sent
  // once (not kept: KeepsSentPart): copied straight into buffers the van lends
  // (Van::LendSendBuffers, a shared-memory ring to a server on this host), where it
  // lends them, instead of into memory of their own that the van then copies into the
  // ring. Such a part is lent (Part::lent; Part::keys_lent for its keys, which then go
  // raw). What stays a view is copied by OwnBorrowedData.
  void LendBorrowedFrames(const PipelineRequest& req, Pending* p, std::vector<Message>* messages);
  SentKeyLists* SentLists();  // made at the first call
  // Prepares the part's keys, counts what it pushes (resends included), and sends; a
  // part that cannot leave fails as if its server had answered the error. May block on
  // a full send queue: never on the thread that receives.
  void SendPart(Message& msg, KeyForm form = KeyForm::kShortest);
  // Ends p: assembles and delivers a pull, runs the callback (here, or on the
  // customer's own thread when `run_callback_here` is false: the control loop runs no
  // app code) and then Customer::FinishRequest, exactly once whatever the delivery or
  // the callback throws.
  void Finish(Pending& p, bool run_callback_here);
  // Runs a request's callback; returns the status its Wait gets: `status`, or Internal
  // naming what the callback threw when `status` is OK.
  Status RunCallback(const std::function<void()>& callback, int timestamp, const Status& status);
  Status Assemble(Pending& p, SArray<char>* vals, SArray<int>* lens);
  // Where a pull's result of `bytes` is put together: the caller's sized array, the
  // caller's vector sized to it (output_of_size), or a buffer of its own.
  static SArray<char> ResultBuffer(Pending& p, size_t bytes);
  uint64_t ChunkValues() const;

  Customer* const customer_;
  const DataType type_;
  const size_t elem_size_;

  CompressionPolicy policy_;
  std::vector<std::unique_ptr<Compressor>> compressors_;  // by CodecIndex; null for none
  bool compress_pushes_ = false;
  std::mutex residual_mu_;
  ResidualStore residuals_;  // under residual_mu_
  std::atomic<uint64_t> nonce_{0};

  std::mutex mu_;  // guards pending_, known_lens_ and held_, and changes of chunk_support_
  // By request id: requests in flight, requests held for the chunk answer, and the
  // question itself.
  std::unordered_map<uint64_t, std::unique_ptr<Pending>> pending_;
  // Lengths of chunked keys this worker pushed or pulled, so that later pulls of them
  // can be split into the same chunks.
  std::unordered_map<Key, uint64_t> known_lens_;
  std::deque<uint64_t> held_;  // ids of held requests, in issue order
  // Whether a request was issued while others were in flight since the last request
  // issued with none (so the next such request likely starts a window). Under mu_.
  bool lead_followed_ = false;
  // Whether the app waited for a request since the last request issued with none in
  // flight (NoteWaited; taken by Issue).
  std::atomic<bool> waited_{false};
  // Read without mu_ on the hot path: a request that sees an answer is planned by it
  // at once, so no request waits once the answer is known.
  std::atomic<ChunkSupport> chunk_support_{ChunkSupport::kUnknown};

  // Push requests acknowledged per server rank, by the process that acknowledged them
  // (the connection's identity). Under mu_.
  struct ServerAcks {
    std::string identity;
    uint64_t acked = 0;
    bool restarted = false;  // a new process took over; `before` is the old one's count
    uint64_t before = 0;
  };
  void CountAck(int rank, const std::string& identity);
  std::vector<ServerAcks> acks_;

  mutable std::mutex counters_mu_;
  Counters counters_;
  std::atomic<bool> chunking_{true};
  std::atomic<bool> key_encoding_{true};
  std::atomic<bool> key_caching_{true};
  std::unique_ptr<KeptRoundPushes> kept_rounds_;
  // Kept pushes sent again and not answered yet, by request id, part and the server
  // they went to (node id); under mu_.
  struct KeptResend {
    int64_t clock = 0;
    Message sent;
  };
  std::map<std::tuple<uint64_t, uint32_t, int>, KeptResend> kept_resends_;
  std::atomic<size_t> kept_resends_size_{0};  // kept_resends_.size(), read without mu_
  std::mutex listener_mu_;
  int membership_listener_ = -1;  // under listener_mu_; -1 once stopped
  std::set<std::pair<int, std::string>> dead_seen_;  // control thread: (rank, identity)
  LogLimiter kept_log_;
  std::once_flag sent_lists_once_;
  std::unique_ptr<SentKeyLists> sent_lists_;  // through SentLists()
  std::atomic<uint64_t> dropped_answers_{0};
  std::atomic<uint64_t> stale_answers_{0};
  LogLimiter failure_log_;
  LogLimiter callback_log_;  // callbacks that threw
  LogLimiter stray_log_;
  LogLimiter failover_log_;  // requests whose parts went to a dead server's replicas
};

}  // namespace ps

#endif  // PS_INTERNAL_REQUEST_PIPELINE_H_
