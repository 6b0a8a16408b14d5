// OptimizerServer: the built-in server app that runs the optimizer. Workers push
// gradients; the server applies the configured optimizer to each key's values and
// answers pulls with the current values.
//
// Threading: keys are spread over `threads` shard threads (key k always on the same
// one). The receive thread splits each request by shard and queues the parts on the
// shards' FIFO queues; the shard that finishes a request's last part sends the one
// response. Updates to a key are applied in the order requests arrived (per-key FIFO).
//
// Keys are created on first use: a push creates the key with the push's length, a
// pull of an unknown key creates it with `default_length` values; both initialise
// the values by `init` (see OptimizerServerOptions for synchronous aggregation and
// checkpoints). A key holds 1 to 2^31 - 1 values (a pull's answer gives lengths as
// int32): a push with a key of no values or of more, or a chunk of more, is refused
// with InvalidArgument naming the key and the limit, before any key is touched. A push
// whose length differs from the key's is refused with InvalidArgument (the other keys
// of that request on other shards may already be updated; the error says which key).
//
// Keys can be erased: a push with cmd kEraseKeysCmd (below) removes its keys instead
// of updating them.
#ifndef PS_OPTIMIZER_SERVER_H_
#define PS_OPTIMIZER_SERVER_H_

#include <atomic>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ps/internal/log_limiter.h"
#include "ps/internal/membership.h"
#include "ps/internal/message.h"
#include "ps/kv_server.h"
#include "ps/optimizer.h"
#include "ps/value_init.h"

namespace ps {

class AppliedCopies;
struct EarlierTakes;
class ImportedCopies;
class OwnerPushes;
class RecordSenders;
class ShardStore;
struct ClosedRound;
struct StoreKey;
using HoldFunction = std::function<int64_t(const StoreKey&)>;
class ShardThread;
struct CheckpointData;

// The cmd of a push (KVWorker::Push / ZPush, argument `cmd`) that erases its keys: each
// key's values, optimizer state, step count and the pushes held for it in open
// synchronous-aggregation rounds are removed, and the server answers as for a push.
// The pushed values are ignored, but the push must carry them as a gradient push of
// those keys would (KVServer refuses a push without values): a key stored in chunks is
// erased only by a push with its whole length, which the worker splits like any push
// so that every chunk's server gets its part; a push of fewer values for it is
// refused with InvalidArgument. Erasing an absent key does nothing. An erased key's
// memory is reused by later keys; a later pull or push creates the key afresh, as one
// never seen (initial values, zero state, step count 0). An erase counts in
// pushes_taken(). A pull or push-pull with this cmd is refused with InvalidArgument.
// The value spells "ERAS" in ASCII, to stay clear of the small cmd values apps use.
constexpr int kEraseKeysCmd = 0x45524153;

struct OptimizerServerOptions {
  OptimizerOptions optimizer;
  // An app's own update rule, run instead of `optimizer` (whose options are then only
  // validated): a subclass of ps::Optimizer (ps/optimizer.h) with its StateWidth and
  // Update, which the server calls exactly as for a built-in optimizer, on its shard
  // threads (several at once, never two on the same key), for pushes and for
  // synchronous aggregation's rounds alike; Update must not throw. Checkpoints record
  // `rule_name` (required with a rule and only then: non-empty, no whitespace) and the
  // state width, and a server loads only a file written by the same rule
  // (InvalidArgument otherwise). Shared: the server keeps a reference.
  std::shared_ptr<const Optimizer> rule;
  std::string rule_name;
  ValueInit init;
  // Shard threads; 0 means PS_SERVER_THREADS, else the cores this process may use.
  int threads = 0;
  uint32_t default_length = 1;  // values of a key first seen in a pull, 1 to 2^31 - 1
  // Synchronous aggregation, for jobs run with PS_CONSISTENCY=bsp (the constructor
  // refuses other models): the pushes of one clock (KVWorker::Clock) are summed per
  // key, and once every live worker has ended that clock the optimizer runs once per
  // key with their mean (the sum divided by the number of pushes the key got in that
  // clock: a sparse key is averaged over the workers that touched it). Pushes are
  // acknowledged at once, never held back; a pull in clock c is answered once the
  // rounds of every clock below c are applied. Workers that die, leave or finish stop
  // being waited for. A request's clock must be one the model allows: a push without a
  // clock or of a clock already applied, or a request more than 8 clocks ahead of the
  // minimum the server last heard of (a worker is at most 1 ahead; the rest allows for
  // minimums on their way), is refused with InvalidArgument; so a key has at most 9
  // rounds open. At most 4096 pulls wait per key and shard (more: Unavailable); the
  // destructor answers those still waiting with Unavailable. See docs/consistency.md.
  bool sync_aggregation = false;
  size_t queue_capacity = 4096;    // tasks waiting per shard before the receiver waits

  // Checkpoints go to <checkpoint_dir>/server-<rank>.ckpt. With a directory set, a
  // server that finds its file there at start resumes from it (unless resume is
  // false), and saves periodically when either interval is non-zero. Left empty, the
  // job's PS_CHECKPOINT_DIR and PS_CHECKPOINT_EVERY fill the folder and, when both
  // intervals here are 0, the intervals (docs/fault-tolerance.md). The constructor
  // makes the folder; one it cannot make is an error.
  std::string checkpoint_dir;
  bool resume = true;
  double checkpoint_every_seconds = 0;
  uint64_t checkpoint_every_pushes = 0;
};

class OptimizerServer {
 public:
  // Starts serving app_id. Throws ps::Error if the options are invalid (a
  // default_length of 0 or over 2^31 - 1 among them) or, with sync_aggregation, if
  // Start has not been called.
  OptimizerServer(int app_id, const OptimizerServerOptions& options);
  // Finishes queued work, answers the pulls still waiting for a round with
  // Unavailable, drops the open rounds, and stops the shard threads.
  ~OptimizerServer();

  int num_threads() const { return static_cast<int>(shards_.size()); }
  // Totals over all shards; each waits for the work queued before it.
  size_t NumKeys();
  size_t PayloadBytes();
  // Requests answered so far.
  uint64_t requests_answered() const { return answered_.load(); }
  // Push requests taken so far, counting those restored from a checkpoint: the
  // progress a checkpoint records. (Not a clock: clocks are the workers', see
  // KVWorker::Clock.)
  uint64_t pushes_taken() const { return pushes_taken_.load(); }

  // Saves the whole state (after the work queued before the call) to `path`, or to
  // the configured directory. Errors name the file.
  Status SaveCheckpoint(const std::string& path);
  Status SaveCheckpoint();
  // Replaces the state of the keys in the checkpoint by theirs. Refuses (DataLoss)
  // corrupt or truncated files, and (InvalidArgument) a checkpoint written by another
  // optimizer.
  Status LoadCheckpoint(const std::string& path);
  // <checkpoint_dir>/server-<rank>.ckpt
  std::string CheckpointPath() const;

  // What the server resumed from at its start (or LoadCheckpoint last restored): the
  // file, empty when it started empty, and the push requests of each worker (by rank)
  // the restored state holds. A worker reads its own count with KVWorker::Restarts,
  // which asks this server (ps/internal/restore_report.h). Thread-safe.
  struct Restored {
    std::string checkpoint;
    uint64_t pushes_taken = 0;
    std::vector<uint64_t> pushes_by_worker;
  };
  Restored restored() const;

  // Which shard of `threads` owns `key`.
  static int ShardOf(Key key, int threads);
  // The shard of chunk `chunk` of key (-1: the whole key). Chunk 0 shares the key's
  // shard, so that a shard can tell a whole key from a chunked one.
  static int ShardOf(Key key, int32_t chunk, int threads);
  // Checks a chunk request's layout against the job's chunk size, and its length
  // against the limit of 2^31 - 1 values; sets *len to the chunk's length.
  static Status CheckChunk(const KVMeta& meta, const KVPairs<float>& data, uint32_t* len);

 private:
  struct Request;
  void Handle(const KVMeta& meta, const KVPairs<float>& data);
  // Answers a request that Handle refuses before any part is queued.
  void Refuse(const KVMeta& meta, const Status& why);
  void RunPart(Request* request, const std::vector<uint32_t>* positions, int part,
               ShardStore& store);
  // Ends one part with `status` (the request's first failure wins); the last part to
  // end answers.
  void EndPart(Request* request, const Status& status);
  // Under synchronous aggregation: whether a push of `key` goes into its round here
  // (false: sent again, of a round its dead owner copied here).
  static bool TakesRoundPush(const KVMeta& meta, const StoreKey& key, const ShardStore& store);
  // The push of a push-pull part into its rounds, ahead of its pull (RunPart).
  Status AggregatePart(Request* request, const std::vector<uint32_t>* positions,
                       ShardStore& store);
  // Whether a part's keys include one whose rounds are held (ShardStore::HeldFrom).
  static bool HoldsAnyKey(const Request* request, const std::vector<uint32_t>* positions,
                          const ShardStore& store);
  void Finish(Request* request);
  void MaybeCheckpoint();
  // Fills unset checkpoint options from the job's settings and makes the folder.
  void ApplyCheckpointSettings();
  // The SimpleApp request handle of the server: answers restore reports.
  void AnswerSimpleRequest(const SimpleData& request, SimpleApp* app);
  void CountPush(int sender);
  // On the data receive thread: a push taken from a worker as its keys' server, named by
  // later catch-ups (OwnerPushes) when keys can move. Returns whether its answer is to be
  // lost (PS_LOSE_PUSH_ANSWER).
  bool TookAsOwner(const KVMeta& meta);
  // Replication (optimizer_server_replicas.cc): the copies of a push for the key's
  // other live replicas, one message per replica; sending them (the request's answer
  // then waits for theirs); their end, answered or not.
  std::vector<Message> PlanReplicaCopies(const KVMeta& meta, const KVPairs<float>& data);
  // On the data receive thread: whether a push taken here is copied to other servers.
  // Always with PS_REPLICATION >= 2. With one copy of each key only while keys move:
  // while a server enters or leaves (the keys' next holders take the pushes after the
  // keys they are sent), and for 30 s after a ring change (a worker that still routes
  // by the old ring sends moved keys here: the copy takes the push to the key's server
  // now).
  bool CopiesPushes();
  // The messages of a push's copies: by_rank[r] the positions of its keys server r gets.
  // Of a worker's push, or (meta.replica_of >= 0) a copy sent on: its origin's names.
  std::vector<Message> CopiesFor(const KVMeta& meta, const KVPairs<float>& data,
                                 const std::vector<std::vector<uint32_t>>& by_rank);
  // On the data receive thread: a copy this server took of a push on keys it serves now,
  // from a server that served them before (a late copy), sent on to the servers this
  // one is sending those keys to in slices (SendCatchUpSlice): as the push's owner now,
  // this server is where their copies of its pushes come from.
  std::vector<Message> PlanCatchUpForwards(const KVMeta& meta, const KVPairs<float>& data);
  void SendReplicaCopies(Request* request, std::vector<Message>* copies);
  // A push of cmd `cmd` to server node `to` (a catch-up or round copy message),
  // registered with the KVServer's customer (its timestamp and request id set); the
  // caller records it in copies_in_flight_ and sends it.
  Message PushToServer(int to, int cmd, const KVPairs<float>& kvs);
  void OnCopyAnswered(Message& answer);
  void OnCopyAborted(int timestamp, uint64_t id, const Status& status);
  void EndCopy(uint64_t id, const Status& status, bool answered);
  // A copy, or a part a worker sent again after a failover: how many of its keys this
  // server took it for before (by the worker request and the server it was first sent
  // to, AppliedCopies), or holds it in from a catch-up: key by key, as the ids of the
  // server whose record of the key this one took last say (ImportedCopies,
  // RecordSenders). When any, *before (resized to the keys) says which.
  // Records the others as taken now.
  size_t TakenBefore(const KVMeta& meta, const KVPairs<float>& data,
                     std::vector<uint8_t>* before);
  // The part of TakenBefore that looks at when each key's catch-up record came: of the
  // keys marked in *before (a push taken before under the same id, as `earlier` says),
  // unmarks those whose record was taken after every such take, none of which came from
  // the record's sender (the record replaced the key: its sender's ids decide,
  // HeldFromCatchUps). Returns how many it unmarked; clears *before when none is left
  // marked.
  size_t ReplacedByRecords(const KVMeta& meta, const KVPairs<float>& data,
                           const EarlierTakes& earlier, std::vector<uint8_t>* before);
  // The ImportedCopies half of TakenBefore: how many keys a catch-up's sender holds the
  // push in (*held, resized to the keys when any, says which).
  size_t HeldFromCatchUps(const KVMeta& meta, const KVPairs<float>& data,
                          std::vector<uint8_t>* held);
  // Answers a push (not a push-pull: Handle serves those, applying no key) taken before
  // without applying it again; a part sent again still goes on to the replicas that
  // live.
  void AnswerDuplicate(const KVMeta& meta, const KVPairs<float>& data);
  // Counts and logs a push-pull whose push was taken before.
  void NoteDuplicatePushPull(const KVMeta& meta);
  // Round copies (optimizer_server_rounds.cc): with PS_REPLICATE_ROUNDS and synchronous
  // aggregation, a closed round goes to its key's replica in place of every push.
  // Whether this server copies rounds (known once the node has joined).
  bool CopiesRounds() const;
  // On shard `shard`'s thread, for each new minimum clock: closes the rounds below it,
  // and copies them when this server copies rounds.
  void CloseShardRounds(int shard, int64_t minimum, ShardStore& store);
  // On shard `shard`'s thread: sends the rounds it closed (or released) to their keys'
  // live replicas; the shard's rounds count as copied below `below` once every message
  // of this and the earlier closes ended.
  struct RoundClose;
  void SendRoundCopies(int shard, int64_t below, std::vector<ClosedRound>* closed);
  // A round copy message ended (EndCopy): answered, or its replica died (rank -1: the
  // sending's own share).
  void EndRoundCopy(const std::shared_ptr<RoundClose>& close, int replica_rank,
                    const Status& status, bool answered);
  // Stamps the clock below which every shard's rounds are copied on the answers.
  void PublishRoundsCopied();
  // On the data receive thread: a replica applies an owner's closed rounds.
  void TakeRoundCopy(const KVMeta& meta, const KVPairs<float>& data);
  // On the data receive thread: the keys of dead server `dead_rank` that this server
  // serves now have their rounds rebuilt here, from the first its copies did not bring,
  // until every live worker said it sent its kept pushes again (OnRoundsResent), or
  // kRoundsResentWait.
  void HoldRoundsOf(int dead_rank);
  // On the data receive thread, for a worker's request: holds the rounds of every dead
  // server of this server's table (HoldRoundsOf; the task its table posted may not have
  // run yet), and returns true when that table gives this server every key of the
  // request. Else the sender routed by a table this one has not yet (a death): the
  // request waits for it (WaitForTable) and false is returned.
  bool PlacedByMyTable(const KVMeta& meta, const KVPairs<float>& data);
  // On the data receive thread: a request waits for the next table, or kTableWait.
  void WaitForTable(const KVMeta& meta, const KVPairs<float>& data);
  // On the data receive thread: the waiting requests are handled again; with `expire`,
  // those that waited kTableWait are refused instead.
  void RetryWaitingForTable(bool expire);
  // A request waiting for the next table, or (rounds_resent_for >= 0) a worker's word
  // that came behind one of its requests waiting (OnRoundsResent).
  struct WaitingForTable {
    KVMeta meta;
    KVPairs<float> data;
    double since = 0;  // steady clock, seconds
    int rounds_resent_for = -1;
  };
  std::vector<WaitingForTable> waiting_for_table_;  // data receive thread only
  bool table_wait_armed_ = false;  // data receive thread: a check of the waiting is due
  // On the data receive thread: a check of the waiting requests kTableWait from now,
  // unless one is due or none waits.
  void ArmTableWait();
  void OnRoundsResent(int worker, int dead_rank);
  // Releases the holds whose workers all said so.
  void CheckHeldRounds();
  void ReleaseRoundsOf(int dead_rank);
  // The holds of held_origins_ as the shards test them (null: none), and the dead
  // owners' copies, held or released (ShardStore::SetCopied).
  HoldFunction HoldsNow() const;
  HoldFunction CopiedNow() const;
  struct RoundOrigin;
  // By each owner's rank, the clock from which its keys' rounds are not in this server's
  // state (what its copies brought, by its shard; 0 for an owner that sent none).
  static HoldFunction ByOwner(std::map<int, RoundOrigin> origins);
  // Queues the holds on every shard: set, or (release) set after applying the rounds of
  // the keys they no longer hold.
  void InstallHolds(bool release);
  std::vector<int> LiveWorkers() const;
  // catch_up_mu_ held: servers newly dead in `view` have their rounds held here.
  void NoteDeadServers(const MembershipView& view);
  // Catch-up (optimizer_server_catch_up.cc): a new server in a dead one's place gets,
  // from each live server, the keys the two hold, then the copies of later pushes; a
  // server added to the job, the keys the grown ring gives it; while a server leaves,
  // each live server the keys the ring without it gives it that it does not hold.
  // On the control loop, for each new membership: sends what a new server needs, or
  // (on the new server) checks whether it has everything.
  void OnMembership(const MembershipView& view);
  // catch_up_mu_ held: a server of `view` is leaving (or none is): starts this server's
  // part in it once (sending, and on a live server taking), or ends it.
  void OnLeaveLocked(const MembershipView& view, const Node& me);
  // catch_up_mu_ held: on a live server, the counts of what the senders sent are those of
  // leave `epoch` from now on (a new one starts them afresh).
  void EnterRoundLocked(uint64_t epoch);
  // The ring changed (a server was added or left): a moment later, once every node
  // routes by it, erases the keys this server no longer holds by it.
  void DropKeysNotHeldLater(const ConsistentHashRing& ring);
  // On the data receive thread, where copies leave: lists the keys server `rank` holds
  // with this one and sends them a slice at a time (SendCatchUpSlice).
  // `epoch`: the leave it is for (MembershipView::leave_version), 0 for a new server.
  void SendCatchUp(int rank, const std::string& identity, uint64_t epoch);
  // A catch-up being sent: its receiver, its keys, how far it got.
  struct CatchUpSending;
  // On the data receive thread: the next slice of `sending`'s keys, each record a
  // consistent cut of the pushes taken so far (every copy planned after it reaches the
  // receiver after it), then the next slice posted to the receive thread again, paced by
  // PS_CATCH_UP_RATE, so that requests are taken between slices; after the last, the
  // pushes taken once and the end. Stops when the receiver or the round is gone.
  void SendCatchUpSlice(const std::shared_ptr<CatchUpSending>& sending);
  // On the data receive thread, after a membership change: a catch-up to a new server in
  // a dead one's place whose keys were listed while a server failed over now still
  // served some goes again (after its end, if not sent yet): the keys that server served
  // may be this one's now.
  void TopUpCatchUps();
  // catch_up_mu_ held: a catch-up ended; RecordSenders is cleared a minute later unless
  // another round began.
  void DropRecordSendersLater();
  // Whether `sending` still has a receiver in `view`, for the same round.
  bool StillSending(const MembershipView& view, const CatchUpSending& sending) const;
  bool SendCatchUpPart(int to, int cmd, const KVPairs<float>& part, uint64_t epoch);
  // On the new server: a catch-up message (records, or a sender's end).
  void TakeCatchUp(const KVMeta& meta, const KVPairs<float>& data);
  // catch_up_mu_ held: once every live server said it sent everything, tells the node.
  void CheckCaughtUpLocked(const MembershipView& view);
  // Registers this app's catch-up with the node when the node is catching up.
  void BeginCatchUpLocked(const MembershipView& view);
  // A request in progress, with `remaining` parts and copies to end before its answer.
  Request* NewRequest(const KVMeta& meta, const KVPairs<float>& data, int remaining);
  // Copies every shard's state, after the work queued before the call.
  void Snapshot(CheckpointData* data);
  // What checkpoints record of the update rule: "rule NAME" for an app's rule
  // (kRulePrefix), else the optimizer's options as text.
  static constexpr const char* kRulePrefix = "rule ";
  std::string RuleText() const;

  OptimizerServerOptions options_;
  std::shared_ptr<const Optimizer> optimizer_;  // the built-in optimizer, or options_.rule
  std::vector<std::unique_ptr<ShardThread>> shards_;
  int queue_depths_id_ = -1;  // NodeActivity::AddQueueDepths
  std::atomic<uint64_t> answered_{0};
  std::atomic<uint64_t> pushes_taken_{0};
  // Push requests taken from each worker rank (PS_NUM_WORKER of them), restored from a
  // checkpoint like pushes_taken_.
  std::unique_ptr<std::atomic<uint64_t>[]> pushes_by_worker_;
  size_t worker_ranks_ = 0;
  mutable std::mutex restored_mu_;
  Restored restored_;  // under restored_mu_
  // Replication: the copies sent and not ended, by their request id.
  struct CopyInFlight {
    Request* request = nullptr;
    int timestamp = 0;
    int replica = 0;  // node id
    // The identity of the process it went to: a new process in a dead one's place
    // (catching up) did not lose a copy sent to the dead one.
    std::string process;
    // To such a new process, before this server listed its catch-up to it: the records
    // it is sent hold the update, whatever becomes of the copy.
    bool before_catch_up = false;
    // A round copy: the close it belongs to.
    std::shared_ptr<RoundClose> round;
  };
  std::mutex copies_mu_;
  std::unordered_map<uint64_t, CopyInFlight> copies_in_flight_;  // under copies_mu_
  std::atomic<uint64_t> replica_losses_{0};
  std::unique_ptr<AppliedCopies> applied_copies_;
  std::unique_ptr<ImportedCopies> imported_copies_;  // the ids catch-ups sent, by sender
  std::unique_ptr<OwnerPushes> owner_pushes_;  // data receive thread only
  uint64_t owner_pushes_taken_ = 0;  // data receive thread only: for PS_LOSE_PUSH_ANSWER
  // Catch-up. Tasks posted to the receive thread hold the lifeline's lock while they
  // run, and do nothing once the destructor has cut it.
  struct Lifeline {
    std::mutex mu;
    bool alive = true;
  };
  std::shared_ptr<Lifeline> lifeline_ = std::make_shared<Lifeline>();
  int membership_listener_ = -1;
  std::mutex catch_up_mu_;
  std::set<std::pair<int, std::string>> catch_up_sent_;  // new servers sent to (id, identity)
  // The catch-ups being sent in slices, by receiving node id (data receive thread only).
  std::map<int, std::shared_ptr<CatchUpSending>> catch_up_sending_;
  // On a new server: the servers that must send it their keys (id, identity), those that
  // said they sent everything, and how many messages it took from each.
  std::map<int, std::string> catch_up_senders_;
  std::set<int> catch_up_from_;
  std::map<int, uint64_t> catch_up_taken_;
  // In a dead one's place: the ranks failed over when each sender listed the keys of the
  // last end it sent (CheckCaughtUpLocked).
  std::map<int, std::vector<int>> catch_up_listed_;
  int catch_up_ticket_ = -1;     // Postoffice::AddCatchUp's
  bool catch_up_failed_ = false;  // a message it could not take: it never says caught up
  bool catch_up_done_ = false;  // every sender's end taken, the node told
  // The leave (its version) this server sends and takes for, and the one the counts of
  // catch_up_from_ / catch_up_taken_ / catch_up_failed_ belong to on a live server.
  uint64_t leave_epoch_ = 0;
  uint64_t round_epoch_ = 0;
  // Which server sent this one each key of the last catch-up it took part in as a
  // receiver (HeldFromCatchUps), for a minute after it ended; the rounds it was kept for.
  std::unique_ptr<RecordSenders> record_senders_;
  uint64_t record_senders_epoch_ = 0;
  std::vector<int> placed_servers_;  // the ring's servers in the last table seen live
  uint64_t ring_changes_ = 0;  // under catch_up_mu_: ring changes seen live
  // Data receive thread only (once the request handle is set): the ring's servers by
  // which this server holds exactly the keys it serves: the ring when it was made (if
  // live), or at its first table as a live server (a push that comes before either
  // takes the ring then), then, 30 s after each ring change, the changed ring.
  std::vector<int> settled_servers_;
  std::atomic<bool> caught_up_{false};  // it holds its keys from its replicas
  std::atomic<uint64_t> duplicates_{0};
  std::atomic<uint64_t> pieces_met_{0};  // ids taken again for keys not taken yet
  std::atomic<uint64_t> replaced_by_records_{0};  // pushes taken again after a record
  LogLimiter pieces_log_;
  std::atomic<uint64_t> duplicate_push_pulls_{0};
  LogLimiter push_pull_log_;
  LogLimiter replica_log_;
  // Round copies (optimizer_server_rounds.cc). What each owner's round copies brought:
  // by owner rank, its shard count and, by its shard, the minimum of the last whole
  // close taken. Data receive thread only.
  struct RoundOrigin {
    uint32_t shards = 0;
    std::vector<int64_t> below;
  };
  std::map<int, RoundOrigin> round_origins_;
  // The messages of a close taken before its last, by owner rank and owner shard.
  std::map<std::pair<int, uint32_t>, std::vector<ClosedRound>> round_copy_parts_;
  // Owners one of whose round copies was refused: none of their later ones is applied.
  std::set<int> round_copies_broken_;
  // Dead owners whose rounds this server rebuilds, by rank (data receive thread only).
  struct HeldOrigin {
    RoundOrigin copied;
    uint64_t generation = 0;
  };
  std::map<int, HeldOrigin> held_origins_;
  // Dead owners whose rounds were applied (never held again), with what their copies
  // brought (a push sent again of an earlier round is in the state already).
  std::map<int, RoundOrigin> rounds_released_;
  uint64_t hold_generation_ = 0;
  // The workers that said they sent again what they kept, by dead server rank (data
  // receive thread only; the word may come before the death is known here).
  std::map<int, std::set<int>> rounds_resent_;
  std::set<int> dead_servers_seen_;  // under catch_up_mu_
  std::mutex rounds_mu_;
  // By shard, under rounds_mu_: the closes whose copies are in flight, in order, and the
  // clock below which its rounds are copied.
  std::vector<std::deque<std::shared_ptr<RoundClose>>> round_closes_;
  std::vector<int64_t> rounds_copied_below_;
  bool rounds_stamped_ = false;  // data receive thread: the first stamp is out
  std::atomic<uint64_t> round_copies_sent_{0};
  std::atomic<uint64_t> round_copies_taken_{0};
  std::atomic<bool> stopping_{false};  // the destructor runs: no new copies
  int clock_listener_ = -1;  // sync_aggregation: closes rounds as the clocks move
  // sync_aggregation: the newest minimum whose rounds every shard has been asked to
  // close (set by the listener, read by Handle to check clocks).
  std::atomic<int64_t> closing_below_{0};
  std::mutex save_mu_;  // serialises snapshots and checkpoint writes
  std::thread writer_;  // writes the periodic checkpoints
  std::atomic<bool> writing_{false};
  // With one copy of each key, keys came in a catch-up (a ring change): saved at the
  // next push, not a checkpoint period later, so that a restart from the file has them.
  std::atomic<bool> checkpoint_soon_{false};
  // Periodic checkpoints; used on the receive thread only.
  uint64_t last_checkpoint_pushes_ = 0;
  double last_checkpoint_time_ = 0;
  std::unique_ptr<KVServer<float>> server_;  // last: stops receiving before shards go
};

}  // namespace ps

#endif  // PS_OPTIMIZER_SERVER_H_
