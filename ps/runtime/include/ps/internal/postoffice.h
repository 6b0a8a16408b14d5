// Postoffice: the node's runtime. It reads the Config, starts the van and the node's
// control loop, joins the job through the scheduler, keeps the live membership, runs
// barriers and heartbeats, and routes incoming data messages to Customers.
//
// Threads of a node (see docs/architecture.md, "Threads of a node"):
//  - the van's two receive threads, one per channel: each checks every message's
//    sender against the connection it came on, acknowledges and orders messages
//    (PS_RESEND), and hands it on. The control channel's thread hands control
//    messages to the control loop and SimpleApp messages to their app's own thread;
//    the data channel's thread runs KV customers: a KVServer's handle, a KVWorker's
//    answer matching and callbacks (a worker thread waiting in Wait may receive the
//    data channel in its place, one thread at a time: PS_RECEIVE_IN_WAIT);
//  - the control loop (EventLoop): membership, joins, barriers, heartbeats, resends
//    and every deadline; it never runs app code;
//  - customers' own threads (SimpleApp, plugins, a KVServer that asks for one).
//
// Thread safety: one per process (Get()); all public methods are thread-safe.
// Errors an app can cause (bad environment, calls out of order, an unreachable
// scheduler) throw ps::Error with a message that says what to fix.
#ifndef PS_INTERNAL_POSTOFFICE_H_
#define PS_INTERNAL_POSTOFFICE_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ps/base.h"
#include "ps/internal/config.h"
#include "ps/internal/consistent_hash_ring.h"
#include "ps/internal/customer.h"
#include "ps/internal/log_limiter.h"
#include "ps/internal/membership.h"
#include "ps/internal/message.h"
#include "ps/internal/node_services.h"
#include "ps/internal/van.h"
#include "ps/range.h"

namespace ps {

class BarrierReleases;
class CustomerDirectory;
class DropInjector;
class EventLoop;
class IdleTrimmer;
class InboundChannel;
class JoinState;
class ResendOutbox;
class SchedulerRole;
class SchedulerWatch;
class WorkerInstances;

// What a node's runtime has refused or recovered; for tests, benchmarks and logs.
struct NodeStats {
  uint64_t forged_messages = 0;    // claimed a sender other than their connection's
  uint64_t from_gone_nodes = 0;    // from nodes declared dead or that left
  uint64_t refused_joins = 0;      // scheduler: wrong token, surplus or malformed joins
  uint64_t injected_drops = 0;     // dropped by PS_DROP_RATE
  uint64_t resent_messages = 0;    // resends (PS_RESEND)
  uint64_t duplicates = 0;         // received twice and dropped (PS_RESEND)
  uint64_t expired_early_messages = 0;  // held for an app that never appeared
  uint64_t before_table = 0;       // data that came before the node table, admitted after
  size_t held_out_of_order = 0;    // messages held for ordering now (PS_RESEND)
  size_t awaiting_ack = 0;         // sent messages not acknowledged yet (PS_RESEND)
};

class Postoffice {
 public:
  static Postoffice* Get();

  // Joins the job (first call) and, if do_barrier, waits until every node has.
  // Later calls (one per extra customer) only run the barrier, except on a worker
  // whose first Start is still waiting for the job to form: there, as in ps-lite, a
  // Start for another customer joins one more worker (an instance sharing this
  // process's endpoints; PS_NUM_WORKER counts it), whose barriers and Finalize are
  // that customer's.
  void Start(int customer_id, const char* argv0, bool do_barrier);
  // Leaves the job: barrier (if do_barrier), then on the last matching call runs the
  // exit callback, tells the scheduler this node leaves, and stops.
  void Finalize(int customer_id, bool do_barrier);

  // Blocks until every live node in `node_group` has called Barrier with the same
  // customer_id; nodes that die or leave meanwhile are not waited for. Throws
  // ps::Error if this node is not in the group or the scheduler is lost.
  void Barrier(int customer_id, int node_group);

  // Sends msg with this node as sender, on the control channel if it is a control or
  // SimpleApp message, else on the data channel. Fails with Unavailable, without
  // sending, when the recipient is dead or left; otherwise see Van::Send.
  Status Send(Message& msg, SendMode mode = SendMode::kBlocking);
  // Van::LendSendBuffers for a data message from this node to `recipient`; every entry
  // empty while messages are kept to be resent (PS_RESEND): a lent buffer cannot be
  // read again once sent.
  std::vector<SArray<char>> LendSendBuffers(int recipient, const std::vector<uint64_t>& sizes);
  static Channel ChannelOf(const Message& msg) {
    return !msg.meta.control.empty() || msg.meta.simple_app ? Channel::kControl
                                                            : Channel::kData;
  }

  void AddCustomer(Customer* customer);
  void RemoveCustomer(Customer* customer);
  void RegisterExitCallback(const std::function<void()>& cb) { exit_callback_ = cb; }

  // The live node ids in a group (a bit mask of kScheduler / kServerGroup /
  // kWorkerGroup) or the single id given.
  std::vector<int> GetNodeIDs(int node_group) const;

  static int WorkerRankToID(int rank) { return rank * 2 + 9; }
  static int ServerRankToID(int rank) { return rank * 2 + 8; }
  static int IDtoRank(int id) { return id < 8 ? 0 : (id - 8) / 2; }

  const Config& config() const { return config_; }
  // The current membership snapshot (lock-free; never null; valid for the process).
  const MembershipView* membership() const { return membership_.Get(); }
  const ConsistentHashRing& ring() const { return membership_.Get()->ring; }
  Van* van() { return van_.get(); }
  // The van once it has started (during Start, before the node has joined) until
  // Finalize stops it, else null. For any thread (a customer's waits), unlike van().
  Van* running_van() { return running_van_.load(std::memory_order_acquire); }
  EventLoop* control_loop() { return loop_.get(); }
  int my_id() const { return my_node_.id; }
  const Node& my_node() const { return my_node_; }
  std::vector<Node> nodes() const { return membership_.Get()->nodes; }
  int num_workers() const { return config_.num_workers; }
  // Server ranks in use: PS_NUM_SERVER, and more once servers are added to the running
  // job (docs/fault-tolerance.md); ranks are 0..num_servers()-1. It only grows.
  int num_servers() const { return std::max(config_.num_servers, server_slots_.load()); }
  int my_rank() const { return my_node_.rank; }
  bool is_worker() const { return config_.role == Node::kWorkerRole; }
  bool is_server() const { return config_.role == Node::kServerRole; }
  bool is_scheduler() const { return config_.role == Node::kSchedulerRole; }
  bool verbose() const { return config_.verbose; }
  bool started() const { return start_count_ > 0; }
  // Whether this node gave up (lost its scheduler, or was declared dead).
  bool gave_up() const;
  // The job's consistency model, as the scheduler handed it over at the join.
  const ConsistencyModel& consistency() const { return consistency_; }
  // The services that follow this node's life (see ps/internal/node_services.h);
  // JobServices installs itself when the library loads. Not owned; must outlive the
  // process's runtime. Null: none.
  void SetServices(NodeServices* services) { services_.store(services); }
  NodeStats stats() const;

  // ps-lite's equal split of [0, kMaxKey) into one range per server: server i owns
  // range i under PS_KEY_PLACEMENT=range. Under the default ring the ranges are the
  // same (keys computed from them stay distinct per server index) but a key's server is
  // the ring's; key_placement() says which holds.
  const std::vector<Range>& GetServerKeyRanges();
  ConsistentHashRing::Placement key_placement() const { return key_placement_; }
  // The job's chunk size (PS_CHUNK_BYTES as the scheduler has it): values longer than
  // this travel and are stored in chunks; 0: whole. Set once the node has joined.
  uint64_t chunk_bytes() const { return chunk_bytes_; }
  // The job's PS_REPLICATION as the scheduler has it: each key lives on this many
  // servers (docs/fault-tolerance.md). Set once the node has joined.
  int replication() const { return replication_; }
  // The job's PS_REPLICATE_ROUNDS as the scheduler has it. Set once the node has joined.
  bool replicate_rounds() const { return replicate_rounds_; }
  // Why a server of a job with one copy of each key and values in chunks cannot leave.
  static constexpr const char* kLeaveNeedsKeptParts =
      "with PS_REPLICATION=1 a server can leave only with PS_CHUNK_BYTES=0: only then does "
      "a worker keep each part it sends until it is answered, to send it to the key's new "
      "server if its server left (otherwise large parts go straight into shared memory)";
  // Whether a request part may have to go to another server than the one it was sent
  // to: its server died and its keys failed over (PS_REPLICATION >= 2), or it left the
  // job (ring placement with PS_CHUNK_BYTES=0: with one copy of each key, only such a
  // job lets a server leave). Workers then keep each part until it is answered, and a
  // server names the pushes it took as their keys' server in a catch-up, since a key
  // can move with its record while the part goes again. Set once the node has joined.
  bool PartsMayGoAgain() const {
    return replication_ >= 2 ||
           (key_placement_ == ConsistentHashRing::kRing && chunk_bytes_ == 0);
  }
  // Whether this node took a dead node's place in a running job (ps-lite's recovery):
  // a server that joined after the job formed, given a dead server's id and rank
  // (docs/fault-tolerance.md). Its Start skips the start barrier. Set once it joined.
  bool is_recovery() const;
  // Ids of the nodes declared dead. `t` (ps-lite's heartbeat age in seconds) is not
  // used: the scheduler's PS_HEARTBEAT_TIMEOUT decides who is dead.
  std::vector<int> GetDeadNodes(int t = 60);

  // Runs `listener` on the control loop after each new membership this node installs
  // (it must not block: post real work elsewhere). Returns an id for
  // RemoveMembershipListener, after whose return it never runs again. Thread-safe.
  using MembershipListener = std::function<void(const MembershipView& view)>;
  int AddMembershipListener(MembershipListener listener);
  void RemoveMembershipListener(int id);
  // Replication (docs/fault-tolerance.md): whether this node is a new server in a dead
  // one's place (PS_REPLICATION >= 2), or one added to the running job (any
  // PS_REPLICATION), that has not caught up yet (joining or entering in the table: its
  // keys are still served by the servers that hold them).
  // Thread-safe.
  bool catching_up() const;
  // For each app that keeps replicas (OptimizerServer) on such a server: a ticket, then
  // CatchUpDone(ticket) once the app holds what every live server sent it. When every
  // ticket is done the node tells the scheduler (Control::kCaughtUp), again with each
  // heartbeat until its table says it is live. Thread-safe.
  // `leave_version`: on a live server, the leave whose keys it takes (the word to the
  // scheduler names it); 0 on a new server.
  int AddCatchUp(uint64_t leave_version = 0);
  void CatchUpDone(int ticket);
  // A ticket whose catch-up ended without completing (the ring change it was for was
  // called off): forgotten, without telling the scheduler anything. Thread-safe.
  void CancelCatchUp(int ticket);

  // This server leaves the running job gracefully (docs/fault-tolerance.md, "Removing a
  // server"): the scheduler marks it leaving, the servers move the keys a ring without
  // it gives to servers that do not hold them yet while it serves them, and then take
  // it out of the table. From then on its barriers return at once and Finalize leaves
  // without waiting for the others. Returns at once: OK once asked (a ring change under
  // way, or a dead server, makes it wait); InvalidArgument when it cannot leave (not a
  // server, not joined yet, PS_REPLICATION < 2, PS_KEY_PLACEMENT=range, or the ring
  // would keep fewer than PS_REPLICATION servers). PS_LEAVE_ON_SIGTERM=1 calls it on
  // SIGTERM.
  // Thread-safe.
  Status Withdraw();
  // Whether this server has left the job through Withdraw.
  bool withdrawn() const { return withdrawn_.load(); }
  // Whether this live server takes keys over from a leaving one (the table has a
  // leaving server, and this one is live). Thread-safe.
  bool ReceivesMovedKeys() const;

  // For SchedulerRole (on the control loop): makes `view` this node's membership,
  // connects to new nodes, forgets gone ones and ends the requests waiting for them.
  void InstallMembership(MembershipView view);
  // For SchedulerRole and the job services: a message that must arrive (tracked when
  // PS_RESEND is on), sent without blocking the control loop. With PS_RESEND, a message
  // that finds no room or no connection is resent later and OK is returned; one that
  // can never leave (over PS_MAX_MESSAGE_BYTES) returns the error.
  Status SendControl(Message& msg);
  // For SchedulerRole: the job is complete and this scheduler has its table.
  void MarkJoined();

 private:
  friend class SchedulerRole;  // releases the scheduler's own barrier entries
  Postoffice();
  // Start's steps, on the first Start (start_mu_ held): reset the state of an earlier
  // run, start the control loop and the van, begin the join (the scheduler: its role;
  // others: the join timer), wait for the node table (start_mu_ released meanwhile),
  // then start the node's timers and services. Each throws ps::Error on failure,
  // having stopped what it started.
  void ResetForStart();
  void StartVan();
  void BeginJoin(int customer_id);
  void AwaitJoin(std::unique_lock<std::mutex>& start_lock);
  std::string JoinTimeoutReason() const;
  void FinishJoin();
  // Receive path (postoffice_receive.cc), on the thread that receives the channel
  // (InboundChannel says which lock it holds).
  void OnMessage(Message&& msg, Channel channel);
  // Checks the sender (unless `prejoin`: a reply from the scheduler before this node
  // knows its identity), handles ACKs, orders and de-duplicates (PS_RESEND), delivers.
  void Admit(Message& msg, Channel channel, bool prejoin);
  void Deliver(Message& msg, Channel channel);
  void DispatchData(Message& msg, Channel channel);
  // Admits the data that arrived before this node joined. The channel's lock held.
  void DrainUnverified(Channel channel);
  void SendAck(int recipient, uint64_t sequence, Channel channel);
  // Control loop (postoffice_control.cc).
  void HandleControl(Message& msg);
  void HandleJoinReply(const Message& msg);
  // The job's settings in a node table (consistency, key placement, chunk size), the
  // scheduler's over this node's own; false (and the table ignored) when malformed.
  bool AcceptJobSettings(const Control& control);
  // The table is in: marks the node joined and has what arrived before it admitted.
  void MarkJoinedAndAdmitEarlyInput();
  void HandleBarrierRelease(const Message& msg);
  void HandleMembership(const Message& msg);
  void StartNodeTimers();
  void SendHeartbeat();
  // This node's NodeReport (proto/node_report.proto), serialized: what heartbeats and
  // the leave carry.
  std::string ActivityReport() const;
  void CheckScheduler();
  void ResendDue();
  void ExpireEarlyMessages();
  void ExpireRequests();
  // PS_IDLE_TRIM_MS: gives the memory kept for speed back once the van has been idle
  // (control loop), or while a barrier waits after traffic (the barrier's thread).
  void TrimMemoryIfIdle();
  void TrimMemoryAtBarrier();
  void GiveMemoryBack(const char* why);
  // The node cannot go on (scheduler gone, or declared dead): ends every request with
  // `why`, wakes barrier waiters, and exits the process non-zero shortly after.
  void GiveUp(const std::string& why);
  void ReplyError(const Message& request, const Status& status);
  void StopRuntime();
  // Finalize: lets the customers' own threads finish what reached them (bounded).
  void DrainCustomers();
  // The scheduler's Finalize: waits until every other node has left or died (bounded).
  void WaitForNodesToLeave();
  // The end of Finalize: if the job lost a node (declared dead), says so and makes the
  // process exit with status 1 when it ends (an atexit handler), whatever main returns.
  void ExitNonZeroIfNodesWereLost();
  // Stamps this node as the sender (or keeps one of its instance ids); Unavailable if
  // the node gave up or the recipient is gone (an ACK may still go to a node that left).
  Status PrepareSend(Message& msg);
  // Worker instances (see Start). During the join: registers `customer_id` as a new
  // instance, joined with the others; false if it has one already.
  bool AddInstance(int customer_id);
  // The node id of customer_id's instance, or my id when it has none or this
  // process runs one worker.
  int InstanceIdOf(int customer_id);
  bool IsMyInstanceId(int id);
  // Sends the join of every instance (the control loop's join timer).
  void SendJoins();
  // Delivers a SimpleApp message addressed to this node (through the control loop).
  Status SendToSelf(const Message& msg, Channel channel);

  Config config_;
  std::unique_ptr<Van> van_;
  std::atomic<Van*> running_van_{nullptr};
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<SchedulerRole> scheduler_;
  std::atomic<NodeServices*> services_{nullptr};
  ConsistencyModel consistency_;  // set before the node counts as joined, read after
  ConsistentHashRing::Placement key_placement_ = ConsistentHashRing::kRing;  // likewise
  uint64_t chunk_bytes_ = 0;  // likewise
  int replication_ = 1;  // likewise
  bool replicate_rounds_ = false;  // likewise
  std::mutex key_ranges_mu_;
  std::vector<Range> key_ranges_;  // GetServerKeyRanges, made on first use
  Node my_node_;
  std::string scheduler_endpoint_;
  uint64_t process_incarnation_ = 0;
  MembershipHolder membership_;
  std::function<void()> exit_callback_;
  // Start calls not yet matched by Finalize; written under start_mu_, read by any
  // thread (started()).
  std::atomic<int> start_count_{0};
  std::mutex start_mu_;

  // Joining, giving up, barriers and this process's extra workers: parts that each
  // hold their own lock.
  std::unique_ptr<JoinState> join_;
  std::unique_ptr<BarrierReleases> barriers_;
  std::unique_ptr<WorkerInstances> instances_;

  // Liveness, as this node sees the scheduler, and idle trimming (PS_IDLE_TRIM_MS).
  std::unique_ptr<SchedulerWatch> scheduler_watch_;
  std::unique_ptr<IdleTrimmer> idle_trimmer_;
  std::mutex trim_mu_;  // idle_trimmer_, and one trim at a time
  std::atomic<bool> finalizing_{false};
  // When this node's first Start returned (its apps may serve from then), steady clock
  // ns; 0 before. Held requests get their grace from here.
  std::atomic<int64_t> started_at_ns_{0};

  // What each channel's receiving owns (by Channel); see inbound_channel.h.
  std::unique_ptr<InboundChannel> inbound_[2];
  // Reliable delivery (PS_RESEND), per channel (each numbers its own links); null
  // when off.
  std::unique_ptr<ResendOutbox> outbox_[2];
  std::unique_ptr<DropInjector> drops_;  // PS_DROP_RATE

  // Membership listeners and catch-up tickets (postoffice_catch_up.cc). A listener may
  // take tickets: listeners_mu_ comes before catch_up_mu_.
  std::mutex listeners_mu_;
  std::map<int, MembershipListener> membership_listeners_;  // under listeners_mu_
  int next_listener_ = 0;
  mutable std::mutex catch_up_mu_;
  std::set<int> catch_up_pending_;  // tickets not done, under catch_up_mu_
  int next_catch_up_ = 0;
  bool caught_up_ = false;  // every ticket done; under catch_up_mu_
  uint64_t catch_up_leave_ = 0;  // AddCatchUp's leave_version; under catch_up_mu_
  void SendCaughtUp();
  // Withdraw (postoffice_withdraw.cc): asked, and the scheduler said it is done.
  std::atomic<bool> withdraw_asked_{false};
  std::atomic<bool> withdrawn_{false};
  void SendWithdraw();  // on the control loop; again with each heartbeat until leaving
  void HandleWithdrawn(const Message& msg);
  void ListenForSigtermLeave();  // PS_LEAVE_ON_SIGTERM: the handler and its timer
  void CheckSigtermLeave();  // on the control loop
  // The most servers down at once (dead, or catching up) in the views this node saw,
  // each view counted with the one before it: with replication, what says whether
  // every key kept a live copy (ExitNonZeroIfNodesWereLost). Written on the control loop.
  std::atomic<int> most_servers_down_{0};
  std::atomic<int> server_slots_{0};  // one more than the highest server rank in a table

  // Customers, and data that arrived before its customer (inbound dispatch).
  std::unique_ptr<CustomerDirectory> directory_;

  LogLimiter stray_log_;   // data for unknown customers, from gone nodes
  LogLimiter forged_log_;  // messages whose sender does not match their connection
  std::atomic<uint64_t> forged_{0}, from_gone_{0}, resent_{0},
      duplicates_{0}, expired_early_{0}, refused_joins_{0}, before_table_{0};
};

}  // namespace ps

#endif  // PS_INTERNAL_POSTOFFICE_H_
