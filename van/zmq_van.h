// ZmqVan: the ZeroMQ transport (tcp and ipc).
//
// Sockets: per channel (data, control), one ROUTER bound to this node's endpoint
// receives, read by that channel's own receive thread; per peer and channel one
// DEALER sends. Each DEALER has its own mutex (ZeroMQ sockets are not thread-safe),
// so senders to different peers never wait for each other. Data frames are handed to
// ZeroMQ without copying: the frame's SArray is kept alive by ZeroMQ's free callback.
// With a CURVE key (VanOptions::ZeroMq::curve_secret_key) a CurveGate secures every socket.
// With VanOptions::ZeroMq::shm, large data frames to peers on this host go through shared
// memory (shm_link.h sends, shm_receiver.h receives; docs/architecture.md).
// A thread waiting alone for an answer may take the data ROUTER over from its receive
// thread (ReceiveWhileWaiting, zmq_van_wait.cc); one thread at a time receives on it.
// Files: zmq_van.cc (start, bind, stop), zmq_van_peers.cc (connections, Send),
// zmq_van_receive.cc (receiving a message), zmq_van_wait.cc, zmq_van_shm.cc.
#ifndef HERDPS_VAN_ZMQ_VAN_H_
#define HERDPS_VAN_ZMQ_VAN_H_

#include <zmq.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "connection_guard.h"
#include "curve_gate.h"
#include "flush_timer.h"
#include "ps/internal/log_limiter.h"
#include "ps/internal/van.h"
#include "send_batch.h"
#include "shm_link.h"
#include "shm_receiver.h"

namespace ps {

// The text of ZeroMQ's last error on this thread (zmq_errno).
std::string ZmqError();

class ZmqVan : public Van {
 public:
  ZmqVan() = default;
  ~ZmqVan() override;

  Status Start(const VanOptions& options, Handler handler) override;
  const std::string& endpoint() const override { return receivers_[0].endpoint; }
  const std::string& control_endpoint() const override { return receivers_[1].endpoint; }
  int port() const override { return receivers_[0].port; }
  int control_port() const override { return receivers_[1].port; }
  Status Connect(int node_id, const std::string& endpoint,
                 const std::string& control_endpoint, bool with_identity) override;
  Status Reconnect(int node_id, const std::string& endpoint,
                   const std::string& control_endpoint) override;
  void Disconnect(int node_id) override;
  Status Send(const Message& msg, SendMode mode, Channel channel) override;
  void Stop() override;
  VanStats stats() const override;
  uint64_t ReleaseIdleMemory() override;
  // Blocks of the link's shared-memory ring (ShmLink::Lend), offering it first (and
  // waiting for the answer as for a first large message) if it was not yet.
  std::vector<SArray<char>> LendSendBuffers(int sender, int recipient,
                                            const std::vector<uint64_t>& sizes) override;
  // "shm", "receive_in_wait" and "coalesce_first".
  bool SetPath(const std::string& path, bool on) override;
  void AdmitIdentity(const std::string& identity) override { guard_.Admit(identity); }
  void RemoveEndpointFiles() override;
  uint64_t ReceiveWhileWaiting(const std::function<bool()>& done,
                               std::chrono::steady_clock::time_point deadline) override;
  void WakeReceivingWaiter() override;
  // Sends every batch waiting in a link (blocking while a socket has no room, up to the
  // send timeout).
  void FlushCoalesced(SendMode mode = SendMode::kBlocking) override;
  bool RunOnReceiver(Channel channel, std::function<void()> task) override;

 private:
  // How long Stop waits for queued outgoing messages to leave.
  static constexpr int kLingerMs = 2000;
  // Frames smaller than this are copied into ZeroMQ's own buffer: for them a copy is
  // cheaper than the allocation that keeps a zero-copy reference alive. Messages whose
  // data frames are smaller than this in all may be coalesced (copied into a batch).
  static constexpr size_t kZeroCopyThreshold = 4096;
  // A batch grows to this at most (a message that would make it larger sends it first):
  // a burst of small messages needs no more to cost one system call for many, and the
  // receiver gets the first of them sooner.
  static constexpr size_t kBatchFlushBytes = SendBatch::kMaxBytes;
  // How long the receive thread lets a batch wait while input keeps coming, and how long
  // it leaves batches that found no room before it tries them again.
  static constexpr std::chrono::microseconds kMaxBatchDelay{200};
  static constexpr std::chrono::milliseconds kFlushRetry{1};
  // How long a send may wait for room in a peer's queue, and how long it sleeps between
  // attempts (without holding the link, and checking whether the peer is being
  // disconnected).
  static constexpr int kSendTimeoutMs = 60000;
  static constexpr int kSendRetryMicros = 500;
  // Data frames this large go through shared memory when the peer is on this host.
  // Below it the socket costs about as much as the ring's bookkeeping and message
  // round trip (measured with apps/bench --workload shm).
  static constexpr uint64_t kShmMinFrameBytes = 64 << 10;
  // An offer makes the meta this much larger at most: one is attached only to a
  // message that stays within PS_MAX_MESSAGE_BYTES with it.
  static constexpr uint64_t kShmOfferBytes = 128;
  // Bytes of meta one shared-memory descriptor may add (a receiver allows for them
  // when it checks the declared size of a message against PS_MAX_MESSAGE_BYTES).
  static constexpr uint64_t kShmDescriptorBytes = 32;
  // How fast the socket carries large frames into a receiver's fresh buffers (about
  // 0.4 GB/s measured on loopback on a small machine, page faults included): a first
  // large message waits for the answer to its ring's offer at most as long as the
  // socket would take for its frames (OfferRingAhead).
  static constexpr uint64_t kFreshSocketBytesPerMs = 400 << 10;
  // The addresses of this host's interfaces, as text.
  static std::unordered_set<std::string> LocalAddresses();

  // One channel's connection to a peer.
  struct Link {
    // Set (before taking mu) by Disconnect and Stop: a sender waiting for room gives
    // up within one retry slice instead of holding mu for the whole send timeout.
    std::atomic<bool> closing{false};
    std::mutex mu;  // serialises use of `socket`
    void* socket = nullptr;
    std::string endpoint;
    bool with_identity = true;
    // The data link's shared-memory path: whether the peer is on this host, and the
    // ring and its negotiation (made with the first large frame). Dropped whenever
    // `socket` is replaced: a ring belongs to one connection.
    bool shm_possible = false;
    std::shared_ptr<ShmLink> shm;
    // Small messages coalesced (by the data receive thread while it had more input to
    // handle, or by a thread in a CoalesceHint), not yet on the socket
    // (zmq_van_batch.cc). Any other send on the link puts them on the socket first, so
    // the link keeps its order. `batch_has_own`: some are the receive thread's.
    SendBatch batch;
    bool batch_has_own = false;
  };
  struct Peer {
    Link links[2];  // by Channel
    // Whether this peer's connections go to these endpoints (both set).
    bool Reaches(const std::string& data, const std::string& control) {
      if (data.empty() || control.empty()) return false;
      std::lock_guard<std::mutex> data_lock(links[0].mu);
      std::lock_guard<std::mutex> control_lock(links[1].mu);
      return links[0].endpoint == data && links[1].endpoint == control;
    }
  };
  // One channel's receiving side.
  struct Receiver {
    void* socket = nullptr;  // owned by `thread` after Start
    std::string endpoint;
    std::string wake_endpoint;  // inproc: Stop sends one message here to end `thread`
    int port = 0;
    std::thread thread;
  };

  void ReceiveLoop(Channel channel);
  // What ReceiveOne did.
  enum class Received {
    kMessage,   // received one message and handed it on (or dropped it)
    kNudge,     // received a nudge (zmq_van_wait.cc): look at the receive role again
    kTimedOut,  // nothing came within the socket's ZMQ_RCVTIMEO (or at once, kNoWait)
    kDone,      // the socket failed for good or the van is stopping
  };
  // Waits for one multipart message (kNoWait: takes one only if it is there) and hands
  // it on.
  enum class Wait { kBlock, kNoWait };
  Received ReceiveOne(Channel channel, Wait wait = Wait::kBlock);
  // For ReceiveOne: a message, decoded, handed to the handler and counted (`bytes`:
  // its meta and data frames).
  void Deliver(Message&& msg, Channel channel, uint64_t bytes);

  // Coalescing (zmq_van_batch.cc). Whether a data message sent by this thread now may
  // wait in its link's batch: on the data receive thread, and on a thread inside a
  // CoalesceHint (see van.h for who flushes).
  bool CoalescesOnThisThread() const;
  // Whether this thread is the van's data receive thread.
  bool OnReceiveThread() const;
  // The largest a batch gets: kBatchFlushBytes, or less to stay within what receivers
  // accept (PS_MAX_MESSAGE_BYTES).
  uint64_t BatchLimit() const;
  // Adds `msg` (its encoded `meta`; SendBatch::MaxAddedBytes within BatchLimit) to the
  // link's batch. A batch it would make larger than BatchLimit goes first, waiting for
  // room in the peer's queue as Send does in `mode`.
  Status Coalesce(const std::shared_ptr<Peer>& peer, const Message& msg, const std::string& meta,
                  SendMode mode);
  // Puts the link's batch on its socket. Under link->mu. 0, or the errno of a failed
  // send: EAGAIN leaves the batch for the next try; any other error loses it (logged).
  int SendBatchLocked(Link* link);
  // FlushCoalesced, where `own_blocking` makes a batch holding messages of the data
  // receive thread wait for room whatever `mode` says. True when a batch that found no
  // room stays for a later flush (the FlushTimer is then armed, unless this runs on its
  // thread). `sent`, if given, counts the batches this call put on sockets.
  bool Flush(SendMode mode, bool own_blocking, uint64_t* sent = nullptr);
  // Counts a message handed to a socket or a batch (`bytes`: meta and data frames).
  void CountSent(const Message& msg, uint64_t bytes);
  // Discards the link's batch, saying why (a warning). Under link->mu.
  void DropBatchLocked(Link* link, const std::string& why);
  // The data receive thread's flush: its own messages wait for room (as its blocking
  // sends did), other threads' do not (it would stop draining the answers that make
  // room); those that found none are tried again after kFlushRetry at the earliest.
  void FlushFromReceiveThread();
  // A batch of messages (frames: identity, batch) from ReceiveOne.
  Received ReceiveBatch(Channel channel, std::vector<zmq_msg_t*>* frames);

  // Who holds the data ROUTER (zmq_van_wait.cc).
  enum class DataReceiver {
    kNobody,
    kReceiveThread,
    kWaiter,  // a thread in ReceiveWhileWaiting receives
    kParked,  // a waiter left it with nothing queued; the receive thread watches it
  };
  // The data channel's receive thread: receives while it holds the ROUTER, gives it to
  // a waiter that asks, watches it while a waiter has it parked and takes it back when
  // input comes.
  void DataReceiveLoop();
  // For DataReceiveLoop, under `lock` (of role_mu_): waits until the receive thread may
  // take the ROUTER (*from_parked: because input came for a parked one); false when the
  // van stops.
  bool WaitForDataRole(std::unique_lock<std::mutex>& lock, bool* from_parked);
  // ReceiveOne for the receive loops and the data ROUTER's holders: an exception (out
  // of memory while taking a message apart) costs that message, never the thread or
  // the data ROUTER's role.
  Received ReceiveOneGuarded(Channel channel, Wait wait);
  // For ReceiveWhileWaiting, under `lock` (of role_mu_): waits until this thread holds
  // the ROUTER (true), or until done(), the deadline or Stop, or at once when several
  // threads wait or did lately (false: the caller waits as with receive-in-wait off).
  bool TakeDataRole(std::unique_lock<std::mutex>& lock, const std::function<bool()>& done,
                    std::chrono::steady_clock::time_point deadline);
  // For a waiter whose spell ends (`ended`: the van stops): parks the ROUTER, or gives
  // it back to the receive thread (at once when other threads wait).
  void ReleaseDataRole(bool ended);
  // For Start: reads the data ROUTER's ZMQ_FD, makes the event descriptor and the
  // nudge sockets. False if any of it fails (waiters then sleep; RunOnReceiver fails).
  bool StartReceiveInWait();
  // Wakes the receive thread wherever it waits for the role (its condition variable,
  // or its poll of a parked ROUTER). Under role_mu_.
  void SignalReceiveThreadLocked();
  // For Stop, after stopped_ is set: wakes the receive thread and any waiter waiting
  // for the ROUTER.
  void WakeRoleThreadsForStop();
  // For ReceiveOne, before a message is handed on: counts it if a waiter receives it.
  void CountDelivery();
  // Sends a nudge to the data ROUTER, which makes its holder look at the receive role
  // again. Under role_mu_.
  void NudgeLocked();
  // For Stop, after the receive threads ended: wakes a waiter that holds or wants the
  // ROUTER, waits until it has let go, and closes the nudge socket and event descriptor.
  void ReleaseWaiters();
  // For ReceiveOne, on a nudge: runs the tasks RunOnReceiver queued for `channel`.
  void RunReceiverTasks(Channel channel);
  // Whether a message from `identity` with an empty meta frame is a nudge.
  bool IsNudge(const char* identity, size_t size) const;
  Status Bind(Receiver* receiver, int port);
  // A DEALER connected to `endpoint` (with this node's identity if `with_identity`),
  // or nullptr.
  void* NewPeerSocket(const std::string& endpoint, bool with_identity, Status* error);
  static void CloseLink(Link* link, int linger_ms);
  // Connect (fresh: Reconnect): sets up node_id's links to the endpoints.
  Status ConnectLinks(int node_id, const std::string& endpoint,
                      const std::string& control_endpoint, bool with_identity, bool fresh);
  std::shared_ptr<Peer> FindPeer(int node_id);
  void LogDropped(const std::string& reason);

  // The shared-memory path. Whether `endpoint` is a peer on this host.
  bool OnThisHost(const std::string& endpoint) const;
  // The data link's ShmLink (made at the first call), having read the peer's answer to
  // an offer if one is pending; null where shared memory is not possible for the link.
  std::shared_ptr<ShmLink> ShmOf(Link* link);
  // What frames of `sizes` bytes take of a ring, its header included (frames under
  // kShmMinFrameBytes take none).
  static uint64_t RingBytesFor(const std::vector<uint64_t>& sizes);
  // Decides what of `msg` goes through the data link's ring (ShmLink::Plan), first
  // reading the peer's answer to an offer if one is pending.
  void PlanShm(Link* link, const Message& msg, bool room_for_offer, ShmSend* send);
  // Sends the link's ring offer alone, ahead of `msg` (the first message to the peer
  // with a large frame), and waits for the answer (VanOptions::zmq.shm_offer_wait_ms,
  // longer for a larger message), so that `msg` itself can go through the ring: the
  // first large message between two processes is often the largest of all (a model's
  // first push). Without an answer in time, `msg` goes on the socket and the answer is
  // read later.
  // `bytes`: what the frames will take of the ring (their pages are made resident
  // first when `prefault`).
  void OfferRingAhead(Link* link, int sender, int recipient, uint64_t bytes, bool prefault,
                      const std::shared_ptr<ShmLink>& shm);
  // Reads the peer's answers to offers from a link's socket. Under link->mu.
  void ReadShmAnswers(Link* link);
  // On the data receive thread: answers an offer on the connection it came on.
  void AnswerShmOffer(void* socket, const std::string& identity, const ShmOfferFields& offer);
  // On the data receive thread: claims the ring blocks `shm` describes and makes them
  // the message's data frames (views of float and double frames, copies of the rest).
  // On error nothing stays claimed and the message is to be dropped.
  // On the data receive thread: frees the ring blocks of a message that is dropped.
  void DiscardShmFrames(const std::string& identity, const ShmFields& shm);
  Status AdoptShmFrames(const std::string& identity, const ShmFields& shm,
                        std::vector<SArray<char>>* data, const Meta& meta);

  VanOptions options_;
  Handler handler_;
  void* context_ = nullptr;
  std::unique_ptr<CurveGate> gate_;  // set by Start when the van has a CURVE key
  ConnectionGuard guard_;  // bounds connections that have not shown a member's identity
  Receiver receivers_[2];  // by Channel
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};

  std::shared_mutex peers_mu_;  // guards the map, not the peers' sockets
  std::unordered_map<int, std::shared_ptr<Peer>> peers_;

  LogLimiter drop_log_;
  // Coalescing: whether it is on (VanOptions::ZeroMq::coalesce), and the peers whose
  // data link may hold a batch (pending_any_: the list is not empty).
  bool coalesce_on_ = false;
  std::mutex pending_mu_;
  std::vector<std::shared_ptr<Peer>> pending_peers_;
  std::atomic<bool> pending_any_{false};
  // Sends what threads coalesced under a CoalesceHint with a deadline and nobody flushed
  // (made by Start when coalescing is on; stopped by Stop before its last flush).
  std::unique_ptr<FlushTimer> lead_timer_;
  // VanOptions::ZeroMq::coalesce_first, SetPath("coalesce_first"): off, a CoalesceHint
  // with a deadline coalesces nothing (a window's first request goes at once, as with
  // no hint).
  std::atomic<bool> coalesce_first_{true};
  // The data receive thread's (used by it only): since when batches wait (zero: not
  // known to), and before when it leaves those that found no room alone.
  std::chrono::steady_clock::time_point batches_since_{};
  std::chrono::steady_clock::time_point flush_retry_at_{};
  std::atomic<uint64_t> coalesced_messages_{0}, sent_batches_{0}, received_batches_{0},
      deadline_flushes_{0};
  std::atomic<uint64_t> sent_messages_{0}, sent_bytes_{0}, received_messages_{0},
      received_bytes_{0}, dropped_messages_{0}, received_copied_bytes_{0},
      push_request_bytes_{0}, push_requests_{0};

  // The data ROUTER's receive role (zmq_van_wait.cc).
  std::mutex role_mu_;  // guards the role's state below and the nudge socket
  DataReceiver role_holder_ = DataReceiver::kNobody;
  int waiting_threads_ = 0;  // threads in ReceiveWhileWaiting, the holder included
  int role_wanted_ = 0;  // a lone waiter asked the receive thread for the ROUTER (0 or 1)
  bool nudge_pending_ = false;  // a nudge asks the receive thread to let go
  std::chrono::steady_clock::time_point receiving_since_;  // when the waiter took it
  // When two or more threads last waited at once (kSeveralWaitersQuiet).
  std::chrono::steady_clock::time_point several_waited_at_;
  std::chrono::milliseconds park_check_{1};  // the receive thread's interval (wait.cc)
  void* nudge_socket_ = nullptr;    // DEALER to the data ROUTER's inproc endpoint
  // RunOnReceiver's tasks by channel, and the control ROUTER's nudge socket; guarded by
  // tasks_mu_ (the data channel's nudge socket by role_mu_).
  std::mutex tasks_mu_;
  std::vector<std::function<void()>> receiver_tasks_[2];
  void* control_nudge_socket_ = nullptr;
  std::string nudge_identity_;      // its routing id, random; set by Start
  int data_socket_fd_ = -1;         // the data ROUTER's ZMQ_FD, watched while parked
  int role_event_fd_ = -1;          // eventfd the receive thread watches beside it
  std::condition_variable role_freed_cv_;  // for the receive thread: the role changed
  std::condition_variable waiter_cv_;      // for a waiter waiting for the role
  std::atomic<uint64_t> received_in_wait_{0};
  std::atomic<bool> receive_in_wait_{false};  // VanOptions::receive_in_wait, SetPath("receive_in_wait")

  std::atomic<bool> shm_on_{false};  // SetPath("shm"); never on without options_.zmq.shm
  std::unordered_set<std::string> local_hosts_;  // this host's addresses; set by Start
  ShmReceiver shm_receiver_;  // used by the data ROUTER's holder (Stop clears it after)
  LogLimiter shm_log_;
  std::atomic<uint64_t> shm_sent_frames_{0}, shm_lent_frames_{0}, shm_sent_bytes_{0},
      shm_received_frames_{0},
      shm_received_bytes_{0}, shm_fallback_frames_{0}, shm_copied_bytes_{0},
      shm_accepted_rings_{0}, shm_refused_rings_{0};
};

}  // namespace ps

#endif  // HERDPS_VAN_ZMQ_VAN_H_
