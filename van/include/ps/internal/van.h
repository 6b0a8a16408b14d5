// Van: the transport between nodes. It moves Messages to peers named by node id and
// hands every well-formed incoming message to a handler; malformed input is logged
// and dropped, never passed on and never fatal.
//
// Two channels connect every pair of nodes: data (KV requests and answers) and control
// (membership, barriers, heartbeats, ACKs, plugin messages). Each has its own receiving
// socket and receive thread, so a data handler that blocks never delays control
// traffic, and control traffic never queues behind data.
//
// The van knows bytes and peers only: it has no idea of keys, apps or barriers.
#ifndef PS_INTERNAL_VAN_H_
#define PS_INTERNAL_VAN_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ps/internal/message.h"
#include "ps/status.h"

namespace ps {

// Which connection a message travels on.
enum class Channel { kData = 0, kControl = 1 };

struct VanOptions {
  std::string transport = "tcp";  // "tcp" or "ipc"
  std::string host = "127.0.0.1";  // address to bind and advertise (tcp)
  std::string bind_host;           // bind here instead of `host` (e.g. 0.0.0.0); tcp only
  int port = 0;                    // data channel; 0: pick a free port
  int control_port = 0;            // control channel; 0: pick a free port
  // Largest message accepted from the network; bigger ones are refused by the
  // transport before they are buffered.
  int64_t max_message_bytes = int64_t{4} << 30;
  int max_frames = 64;  // data frames per message; more is malformed
  // The name this node's connections present, 1..255 bytes; receivers see it as
  // Message::peer_identity. Empty: the transport picks one.
  std::string identity;
  // PS_RECEIVE_IN_WAIT: a thread waiting for an answer may receive the data channel
  // itself (ReceiveWhileWaiting). Off: only the receive thread receives.
  bool receive_in_wait = true;
  // Connections that have not shown a member's identity (AdmitIdentity) allowed at once;
  // what each may make this node hold is bounded too.
  size_t max_strangers = 64;

  // Read by the ZeroMQ van only (Van::Create("zmq"), van/zmq_van.h); another transport
  // ignores them.
  struct ZeroMq {
    int send_high_water_mark = 0;  // messages queued per outgoing connection; 0: ZeroMQ's
    // The job's CURVE secret key (40 characters of Z85; PS_SECURE=1). Non-empty: every
    // connection is encrypted, and only peers holding the same key are admitted (both
    // ways). Empty: plain connections. docs/security.md.
    std::string curve_secret_key;
    // Shared memory between processes on one host (PS_SHM): data frames of 64 KiB or
    // more to a peer on this host (an ipc endpoint, a loopback address or one of this
    // host's own) travel through a ring of shared memory the sender offers the
    // receiver, instead of through the socket. Off: this van neither offers rings nor
    // accepts them. docs/architecture.md, "Shared memory".
    bool shm = true;
    uint64_t shm_bytes = uint64_t{64} << 20;  // PS_SHM_BYTES: the size of each ring
    // How long the first message with a large frame to a peer waits for the answer to
    // the ring's offer, which goes alone just ahead of it; without an answer by then it
    // goes on the socket (and later ones through the ring once the answer is in). A
    // message whose large frames would take longer than this on the socket waits that
    // long instead (at 0.4 GB/s: 160 ms for a full 64 MiB ring), since a receiver busy
    // with other peers' messages answers late and the socket would cost more. 0: no
    // wait at all.
    int shm_offer_wait_ms = 10;
    // PS_COALESCE: small data messages (data frames under 4 KiB in all) that the data
    // receive thread sends while more input waits for it (a server's answers to a
    // window of requests), or a thread sends inside a CoalesceHint, go to their peer
    // together, in one frame (van/send_batch.h), when the thread runs out of input or
    // waits, or (a CoalesceHint with a deadline) at the van's deadline
    // (docs/architecture.md, "Coalescing"). Off: every message goes on its own.
    bool coalesce = true;
    // PS_COALESCE_FIRST: what a thread sends under a CoalesceHint with a deadline (a
    // worker's first request of a window) is coalesced too. Off: it goes at once, as
    // with no hint. SetPath("coalesce_first") switches it at run time.
    bool coalesce_first = true;
    // How long what a thread coalesced under a CoalesceHint with a deadline may wait
    // for the thread to flush it (by waiting) before the van sends it: longer than
    // issuing a window of 64 small requests takes (about 0.2 ms on 2 cores), short
    // against a request's round trip when the app does not wait.
    std::chrono::microseconds coalesce_first_delay{500};
  } zmq;
};

// While one lives on a thread (and `on`), the small data messages that thread sends may
// wait to go together with the ones it sends next, until someone calls
// Van::FlushCoalesced: the thread itself before it waits for an answer, the data receive
// thread whenever it runs out of input, the node's request sweep (every 200 ms). So set
// one only while an answer is on its way that the receive thread will get, or flush
// after: a worker issuing a request while others of its own are in flight, which then
// costs one send per server for a window of requests. With `deadline`, nothing need be
// on its way: the van sends every waiting batch about
// VanOptions::ZeroMq::coalesce_first_delay (0.5 ms) after this thread coalesced into
// one, if nobody flushed before (a worker issuing the first request of what is likely a
// window). Not copyable; nests (the innermost decides).
class CoalesceHint {
 public:
  explicit CoalesceHint(bool on, bool deadline = false);
  ~CoalesceHint();
  CoalesceHint(const CoalesceHint&) = delete;
  CoalesceHint& operator=(const CoalesceHint&) = delete;
  // Whether the innermost hint on this thread is on, and whether it asks for a deadline.
  static bool active();
  static bool deadline();

 private:
  bool outer_;
  bool outer_deadline_;
};

// For a handler on a thread that hands on the messages of a batch (coalescing): defers
// `cv`'s notify_all to when the batch's last message has been handled, so that a thread
// woken by an early message of the batch does not contend with the rest of it for the
// locks it needs; true. False (the caller notifies now) on any other thread or after
// the batch's last message. The notify happens whatever the handlers throw.
bool DeferWakeToBatchEnd(const std::shared_ptr<std::condition_variable>& cv);
// Makes the wake-ups deferred so far on this thread now (for a handler about to block:
// a woken thread may be the one it waits for). Nothing on any other thread.
void NotifyDeferredWakes();

// How Send behaves when the peer's queue is full.
enum class SendMode {
  kBlocking,     // wait for room, up to the van's send timeout (data)
  kNonBlocking,  // fail at once with Unavailable when the peer's queue is full
                 // (control traffic, timers)
};

// Counters of what a van has done; for benchmarks and tests. The counters of a path or
// check a transport does not have (CURVE handshakes, shared memory) stay 0.
struct VanStats {
  uint64_t sent_messages = 0;
  uint64_t sent_bytes = 0;
  uint64_t received_messages = 0;
  uint64_t received_bytes = 0;
  uint64_t dropped_messages = 0;  // malformed or oversized input that was rejected
  // Of sent_bytes: the KV push requests (meta and data frames, without ZeroMQ's own
  // framing), and how many there were.
  uint64_t push_request_bytes = 0;
  uint64_t push_requests = 0;
  // Received payload bytes that had to be copied for alignment (tiny frames only,
  // normally: large frames are handed over without a copy).
  uint64_t received_copied_bytes = 0;
  // With a CURVE key only: incoming connections refused (a peer without CURVE or
  // without the job's key), and connections of this node that a peer refused.
  uint64_t refused_handshakes = 0;
  uint64_t failed_handshakes = 0;
  // Connections shut down before they showed a member's identity, for carrying too much
  // or being too many (van/connection_guard.h).
  uint64_t refused_connections = 0;
  // The shared-memory path (VanOptions::ZeroMq::shm). Sent and received frames and their bytes
  // that travelled through a ring (also counted in sent_bytes / received_bytes); large
  // frames that went on the socket although the peer had accepted a ring (it was full,
  // or the frame larger than the ring); received ring frames copied out rather than
  // handed over as views (every frame that is not float or double, and frames past
  // the views' share of a ring); rings peers accepted from this node, and offers they
  // refused. Of the frames sent, those written in place in lent blocks
  // (LendSendBuffers) rather than copied into the ring.
  uint64_t shm_sent_frames = 0;
  uint64_t shm_lent_frames = 0;
  uint64_t shm_sent_bytes = 0;
  uint64_t shm_received_frames = 0;
  uint64_t shm_received_bytes = 0;
  uint64_t shm_fallback_frames = 0;
  uint64_t shm_copied_bytes = 0;
  uint64_t shm_accepted_rings = 0;
  uint64_t shm_refused_rings = 0;
  // Data messages received by threads waiting for an answer (ReceiveWhileWaiting)
  // rather than by the data channel's receive thread; included in received_messages.
  uint64_t received_in_wait = 0;
  // Coalescing (VanOptions::ZeroMq::coalesce): messages sent in batches (included in
  // sent_messages), the batches sent, and the batches received. deadline_flushes: the
  // flushes by the van's deadline that sent something (batches that waited
  // coalesce_first_delay after a CoalesceHint with a deadline and nobody flushed: an
  // app that issued requests and did not wait, or a peer that had no room).
  uint64_t coalesced_messages = 0;
  uint64_t sent_batches = 0;
  uint64_t received_batches = 0;
  uint64_t deadline_flushes = 0;
};

class Van {
 public:
  // Called once per valid message, in arrival order, by one thread at a time: the
  // channel's receive thread or, on the data channel, a thread that receives while it
  // waits (ReceiveWhileWaiting). The handler may block (backpressure): the van then
  // stops reading that channel.
  using Handler = std::function<void(Message&& msg, Channel channel)>;

  virtual ~Van() = default;

  // Binds both channels' endpoints and starts their receive threads. Returns an error
  // if an address cannot be bound. `handler` must outlive Stop().
  virtual Status Start(const VanOptions& options, Handler handler) = 0;

  // The endpoints peers connect to ("tcp://host:port" or "ipc://path"). After Start.
  virtual const std::string& endpoint() const = 0;  // data
  virtual const std::string& control_endpoint() const = 0;
  virtual int port() const = 0;  // data
  virtual int control_port() const = 0;

  // Makes `node_id` reachable at its data and control endpoints (an empty one is not
  // connected). Connecting is asynchronous: messages sent before the peer is up are
  // queued. Re-connecting an id to other endpoints replaces those connections.
  // `with_identity` false connects without this node's routing identity (for answers
  // to strangers, whose endpoint may be a member's: a second connection with our
  // identity would compete with the member's own connection from us). A new id whose
  // endpoints are another id's (workers of one process) shares that id's connection.
  virtual Status Connect(int node_id, const std::string& endpoint,
                         const std::string& control_endpoint, bool with_identity = true) = 0;

  // As Connect, with new connections even where an endpoint is unchanged (a new process
  // at a node's endpoints), each put in place of the old one at once: what was queued
  // for the old process and not delivered yet is discarded (a connection that reached
  // the new process by itself, at the same endpoint, may have delivered some), and a
  // send meanwhile goes on the old connection or the new one, never finds the node
  // unconnected. Connections that several node ids share are replaced for all of them.
  virtual Status Reconnect(int node_id, const std::string& endpoint,
                           const std::string& control_endpoint) = 0;

  // Forgets `node_id`: its connection is closed (unless another node id shares it)
  // and messages queued for it are discarded. Later sends to it fail with
  // Unavailable. Idempotent.
  virtual void Disconnect(int node_id) = 0;

  // Sends msg to msg.meta.recipient. Data frames of 4 KiB or more are sent without
  // copying: the van keeps a reference to each buffer until the transport is done with
  // it (smaller ones are copied, which is cheaper than that bookkeeping). Returns
  // InvalidArgument for a message over max_message_bytes (nothing is sent),
  // Unavailable for an unknown recipient, a full queue (kNonBlocking, or past the send
  // timeout) or a transport failure; a failure after the first frame replaces the
  // peer's connection so that the next message starts clean. Thread-safe; concurrent
  // sends to different peers do not contend on a shared lock.
  virtual Status Send(const Message& msg, SendMode mode = SendMode::kBlocking,
                      Channel channel = Channel::kData) = 0;

  // Stops the receive thread and closes every socket, waiting a bounded time for
  // queued outgoing messages. Does not depend on the node's own endpoint (an ipc
  // socket file that was removed does not matter). Idempotent.
  virtual void Stop() = 0;

  virtual VanStats stats() const = 0;

  // For an idle node: gives back memory the transport keeps for speed (the ZeroMQ van:
  // the free part of each shared-memory ring). Returns the bytes released. Thread-safe.
  virtual uint64_t ReleaseIdleMemory() { return 0; }

  // Buffers for the data frames of a message this node (`sender`) is about to send to
  // `recipient` on the data channel, one of sizes[i] bytes per entry, in memory the
  // transport sends from without a copy (the ZeroMQ van: the link's shared-memory ring,
  // negotiated now if it was not yet). So a caller that knows its frames' sizes before
  // it fills them (a push split by server) writes each byte once. An entry is empty where
  // there is no such memory (a peer on another host, shared memory off or refused, a
  // frame under 64 KiB, no room): the caller uses its own.
  //
  // A frame that is a lent buffer, whole, goes without a copy. Once the message is sent
  // the buffer is the receiver's and its memory may be lent again: the caller must
  // neither read nor write it afterwards, nor keep the message to send again (resend,
  // failover). A buffer dropped unsent gives its memory back. Thread-safe.
  virtual std::vector<SArray<char>> LendSendBuffers(int sender, int recipient,
                                                    const std::vector<uint64_t>& sizes) {
    (void)sender, (void)recipient;
    return std::vector<SArray<char>>(sizes.size());
  }

  // Switches one of this transport's paths on or off from now on, for benchmarks that
  // compare both sides of it in one run. `path` names it: the ZeroMQ van has "shm"
  // (VanOptions::ZeroMq::shm; a van started without it stays off), "receive_in_wait"
  // (ReceiveWhileWaiting; VanOptions::receive_in_wait) and "coalesce_first" (what a
  // thread sends under a CoalesceHint with a deadline is coalesced: a window's first
  // request; off, it goes at once; a van started without VanOptions::ZeroMq::coalesce
  // coalesces nothing either way). False, and nothing changes, for a path this van
  // does not have. Thread-safe.
  virtual bool SetPath(const std::string& path, bool on) {
    (void)path, (void)on;
    return false;
  }

  // Lets the calling thread receive the data channel itself while it waits for an
  // answer, so that the answer wakes it straight from the transport instead of through
  // the receive thread: one thread hand-off fewer per answer, which is a large part of
  // a small request's round trip. The thread takes the channel over from the receive
  // thread, receives and dispatches data messages exactly as that thread would (every
  // message, to whoever it is for, in arrival order, on this thread) until `done()`
  // holds, `deadline` passes or the van stops, then hands the channel back.
  //
  // Any number of threads may call this at once. Only a thread that waits alone takes
  // the channel; once several wait at once, none takes it for a while, and a holder
  // that is done hands it to the receive thread, which dispatches their answers.
  //
  // Returns at once, having received nothing, when the calling thread is dispatching a
  // message itself (a handle that waits), when the van is not running, when
  // receive-in-wait is off (VanOptions, SetPath), when other threads wait or did
  // lately, or when the transport cannot do this (the default); the caller then waits
  // as usual. Either way the caller looks at its condition again afterwards: returning
  // does not mean done() holds. If done() throws, the channel is handed on and the
  // exception propagates.
  //
  // `done` is called with a lock of the van held: it must be quick and must not call
  // into the van. Whoever makes done() true calls WakeReceivingWaiter afterwards (on
  // any thread, the receiving one included). Returns the number of messages this
  // thread received. Thread-safe.
  virtual uint64_t ReceiveWhileWaiting(const std::function<bool()>& done,
                                       std::chrono::steady_clock::time_point deadline) {
    (void)done, (void)deadline;
    return 0;
  }
  // Makes the threads in ReceiveWhileWaiting look at their done() again. Called on the
  // receiving thread itself (while it dispatches), it only wakes the threads waiting for
  // the channel. Thread-safe.
  virtual void WakeReceivingWaiter() {}
  // Puts on the wire the small messages that wait to go together (coalescing,
  // VanOptions::ZeroMq::coalesce): a thread about to wait for an answer calls it, so that
  // the requests it coalesced go now. kBlocking waits for room in a peer's queue as a
  // blocking send does; kNonBlocking leaves a batch that finds none for the next flush.
  // Cheap when nothing waits. Thread-safe.
  virtual void FlushCoalesced(SendMode mode = SendMode::kBlocking) { (void)mode; }

  // Removes the socket files of this van's ipc endpoints (nothing for tcp), for a
  // process about to exit without Stop; Stop removes them too. Thread-safe once started.
  virtual void RemoveEndpointFiles() {}

  // `identity` is a member's (or a joining node's) identity: connections that present
  // it may carry any message; others are bounded (VanOptions::max_strangers).
  // Thread-safe.
  virtual void AdmitIdentity(const std::string& identity) { (void)identity; }

  // Runs `task` on the thread that receives `channel` (the data channel's receive
  // thread or a thread receiving in a wait), after the messages that came before it,
  // and wakes that thread for it; for work that must run where that channel's messages are
  // dispatched (app handles) without waiting for the next message. False, and nothing
  // runs, when the van is not running or cannot wake its receivers. Thread-safe; never
  // blocks.
  virtual bool RunOnReceiver(Channel channel, std::function<void()> task) {
    (void)channel, (void)task;
    return false;
  }

  // The van for options.transport ("tcp" and "ipc" are both served by ZeroMQ).
  static std::unique_ptr<Van> Create(const std::string& type = "zmq");
};

// The endpoint a node listening on (transport, host, port) is reached at:
// "tcp://host:port", or for ipc a socket file named after the port in the system's
// temporary directory (so the scheduler's port alone names its ipc endpoint).
std::string EndpointFor(const std::string& transport, const std::string& host, int port);

}  // namespace ps

#endif  // PS_INTERNAL_VAN_H_
