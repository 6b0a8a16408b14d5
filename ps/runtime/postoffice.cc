// Postoffice: lifecycle (Start, Finalize), sending, barriers, customers and membership.
// The receive path is in postoffice_receive.cc, the control loop's work in
// postoffice_control.cc.
#include "ps/internal/postoffice.h"

#include <glog/logging.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "customer_directory.h"
#include "ps/internal/event_loop.h"
#include "ps/internal/reorder_window.h"
#include "ps/internal/resend_outbox.h"
#include "scheduler_role.h"

namespace ps {
namespace {

// How far ahead of the next expected message a sender may be (PS_RESEND); further
// messages are not acknowledged and come again. Also the most messages held per sender.
constexpr size_t kReorderWindow = 4096;
// How long Finalize waits for the leave to be acknowledged (PS_RESEND), and the
// scheduler for every node to leave.
constexpr std::chrono::seconds kFinalizeWait(5);
// The longest the scheduler's Finalize waits for live nodes to leave.
constexpr std::chrono::seconds kLeaveWait(60);
// How often a leaving node sends its leave again until it is acknowledged (PS_RESEND).
constexpr std::chrono::milliseconds kLeaveRepeat(250);

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

void InitLogging(const char* argv0) {
  if (google::IsGoogleLoggingInitialized()) return;
  // Nodes run under the launcher, which collects stderr: log there unless the user
  // asked glog for files.
  if (!std::getenv("GLOG_log_dir") && !std::getenv("GLOG_logtostderr")) {
    FLAGS_logtostderr = true;
  }
  google::InitGoogleLogging(argv0 ? argv0 : "herdps");
}

// Every large message arrives in a fresh allocation. With glibc's defaults, buffers of
// a few MiB are mapped and unmapped each time (or trimmed off the heap top), so every
// message pays a page fault per 4 KiB before a byte is read: about as much time as the
// transfer itself on loopback. Serving such allocations from the heap and keeping
// freed memory for reuse removes that. Settings the user gave glibc win.
void TuneMalloc() {
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 32 << 20);
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

uint64_t RandomU64() {
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return v ? v : 1;
}

// A routing identity: printable, never starting with a zero byte (ZeroMQ reserves
// those), unguessable enough (56 random bits) that a process outside the job cannot
// claim a member's, and 15 characters, so that the copy every received message
// carries (Message::peer_identity) fits a std::string without an allocation.
std::string RandomIdentity() {
  static const char kHex[] = "0123456789abcdef";
  std::string id = "h";
  uint64_t v = RandomU64();
  for (int j = 0; j < 14; ++j) id += kHex[(v >> (4 * j)) & 15];
  return id;
}

}  // namespace

Postoffice::Postoffice() : directory_(std::make_unique<CustomerDirectory>()) {}

Postoffice* Postoffice::Get() {
  static Postoffice* instance = new Postoffice();  // never destroyed: used until exit
  return instance;
}

void Postoffice::Start(int customer_id, const char* argv0, bool do_barrier) {
  {
    // Held while starting, but not while waiting for the job to form: a Start for
    // another customer meanwhile is one more worker of this process (as in ps-lite).
    std::unique_lock<std::mutex> lock(start_mu_);
    if (start_count_++ > 0) {
      if (joining_) {
        AddInstance(customer_id);
        lock.unlock();
        std::unique_lock<std::mutex> state_lock(state_mu_);
        state_cv_.wait(state_lock, [this] { return joined_ || !join_error_.ok(); });
        if (!joined_) throw Error("HerdPS cannot join: " + join_error_.message());
      }
    } else {
      InitLogging(argv0);
      Status s = Config::FromEnvironment(&config_);
      if (!s.ok()) {
        start_count_ = 0;
        throw Error("HerdPS cannot start: " + s.message());
      }
      ResetForStart();
      StartVan();
      BeginJoin(customer_id);
      AwaitJoin(lock);
      FinishJoin();
    }
  }
  if (do_barrier) Barrier(customer_id, kScheduler + kServerGroup + kWorkerGroup);
  // The apps of this node can start serving from now on: a request held for one of them
  // gets its grace from here (a Start barrier whose release is lost a few times takes
  // seconds, during which requests from nodes already past it arrive).
  int64_t expected = 0;
  started_at_ns_.compare_exchange_strong(
      expected, std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count());
}

void Postoffice::ResetForStart() {
  if (config_.tune_malloc) TuneMalloc();
  {
    std::lock_guard<std::mutex> state_lock(state_mu_);
    joined_ = false;
    join_error_ = Status::OK();
    fatal_error_.clear();
    gave_up_ = false;
    barrier_releases_.clear();
  }
  membership_.Reset();
  {
    std::lock_guard<std::mutex> ranges_lock(key_ranges_mu_);
    key_ranges_.clear();
  }
  finalizing_ = false;
  started_at_ns_ = 0;
  process_incarnation_ = RandomU64();
  for (int c = 0; c < 2; ++c) {
    if (config_.resend) {
      inbound_[c].sequencer = std::make_unique<InboundSequencer>(kReorderWindow);
      auto timeout = std::chrono::milliseconds(config_.resend_timeout_ms);
      outbox_[c] = std::make_unique<ResendOutbox>(timeout, timeout * 16);
    } else {
      inbound_[c].sequencer.reset();
      outbox_[c].reset();
    }
    inbound_[c].unverified.clear();
    inbound_[c].unverified_bytes = 0;
  }
  drop_rng_.seed(config_.drop_seed ? config_.drop_seed : RandomU64());
  scheduler_endpoint_ =
      EndpointFor(config_.transport, config_.scheduler_host, config_.scheduler_port);
  my_node_ = Node();
  my_node_.role = config_.role;
  my_node_.host = config_.node_host;
  my_node_.rank_hint = config_.rank_hint;
  my_node_.identity = RandomIdentity();
}

void Postoffice::StartVan() {
  loop_ = std::make_unique<EventLoop>("control");
  loop_->Start();
  if (is_scheduler()) {
    // The scheduler's address is fixed by the job, and its role must exist before
    // the van delivers the first join request.
    my_node_.id = kScheduler;
    my_node_.rank = 0;
    consistency_ = config_.consistency;
    key_placement_ = config_.key_placement;
    chunk_bytes_ = config_.chunk_bytes;
    scheduler_ = std::make_unique<SchedulerRole>(this, config_, my_node_);
  }
  van_ = Van::Create("zmq");
  VanOptions options;
  options.transport = config_.transport;
  options.host = config_.node_host;
  // Nodes find the scheduler at its control endpoint, PS_SCHEDULER_PORT; every
  // other endpoint is picked here and travels in the node table.
  options.port = is_scheduler() ? 0 : config_.node_port;
  options.control_port = is_scheduler() ? config_.scheduler_port : config_.control_port;
  options.max_message_bytes = config_.max_message_bytes;
  options.bind_host = config_.bind_host;
  options.send_high_water_mark = config_.send_high_water_mark;
  options.identity = my_node_.identity;
  options.curve_secret_key = config_.curve_secret_key;  // PS_SECURE
  options.shm = config_.shm;  // PS_SHM
  options.shm_bytes = config_.shm_bytes;
  options.receive_in_wait = config_.receive_in_wait;  // PS_RECEIVE_IN_WAIT
  // Every node of the job opens two connections here (and a few more while joining);
  // room for as many connections that have not identified yet, and some.
  options.max_strangers =
      64 + 2 * static_cast<size_t>(config_.num_workers + config_.num_servers + 1);
  Status s = van_->Start(options, [this](Message&& msg, Channel channel) {
    OnMessage(std::move(msg), channel);
  });
  if (!s.ok()) {
    start_count_ = 0;
    loop_->Stop();
    van_.reset();
    scheduler_.reset();
    throw Error("HerdPS cannot start the " + std::string(RoleName(config_.role)) +
                " node: " + s.message());
  }
  running_van_.store(van_.get(), std::memory_order_release);
  van_->AdmitIdentity(my_node_.identity);  // this node's connections to itself
  my_node_.port = van_->port();
  my_node_.endpoint = van_->endpoint();
  my_node_.control_endpoint = van_->control_endpoint();
  // One line per node, always: on several hosts the first thing to check is which
  // address each node chose and why.
  LOG(INFO) << RoleName(config_.role) << " listening at " << my_node_.endpoint
            << " (control " << my_node_.control_endpoint << "; address from "
            << config_.node_host_source << ")";
}

void Postoffice::BeginJoin(int customer_id) {
  if (is_scheduler()) {
    if (config_.job_token.empty()) {
      LOG(WARNING) << "PS_JOB_TOKEN is not set: this job is open, any process that "
                      "can reach " << scheduler_endpoint_
                   << " may join it (tracker/launch sets a token)";
    }
    loop_->Post([this, self = my_node_] { scheduler_->Begin(self); });
  } else {
    Status s = van_->Connect(kScheduler, "", scheduler_endpoint_);
    if (!s.ok()) {
      start_count_ = 0;
      StopRuntime();
      throw Error("HerdPS cannot reach the scheduler at " + scheduler_endpoint_ + ": " +
                  s.message());
    }
    // The join is repeated until the table comes (a message may be lost, or the
    // scheduler may start after this node); the scheduler ignores repeats.
    {
      std::lock_guard<std::mutex> instances_lock(instances_mu_);
      instances_.clear();
      has_instances_ = false;
      first_customer_ = customer_id;
    }
    auto begun = std::chrono::steady_clock::now();
    auto send_join = [this, begun] {
      if (joined_) return;
      SendJoins();
      auto waited = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::steady_clock::now() - begun)
                        .count();
      if (waited > 0 && waited % 10 == 0) {
        LOG(INFO) << RoleName(config_.role) << " at " << my_node_.endpoint
                  << " still waiting for the scheduler at " << scheduler_endpoint_
                  << " to admit it (" << waited << " s of PS_START_TIMEOUT="
                  << config_.start_timeout_s << " s)";
      }
    };
    loop_->Post(send_join);
    loop_->RunEvery(std::chrono::seconds(1), send_join);
  }
}

void Postoffice::AwaitJoin(std::unique_lock<std::mutex>& start_lock) {
  joining_ = true;
  start_lock.unlock();
  std::unique_lock<std::mutex> state_lock(state_mu_);
  bool done = state_cv_.wait_for(state_lock, std::chrono::seconds(config_.start_timeout_s),
                                 [this] { return joined_ || !join_error_.ok(); });
  state_lock.unlock();
  start_lock.lock();
  state_lock.lock();
  joining_ = false;
  if (done && join_error_.ok()) return;
  std::string why = done ? join_error_.message() : JoinTimeoutReason();
  if (join_error_.ok()) join_error_ = Status::Unavailable(why);  // wakes other Starts
  state_lock.unlock();
  state_cv_.notify_all();
  start_count_ = 0;
  StopRuntime();
  throw Error("HerdPS " + std::string(RoleName(config_.role)) + " cannot join: " + why);
}

std::string Postoffice::JoinTimeoutReason() const {
  std::string why = "the job did not come together within " +
                    std::to_string(config_.start_timeout_s) + " s (PS_START_TIMEOUT)";
  if (is_scheduler()) return why + "; see the log for the missing nodes";
  return why + ": either no scheduler runs at " + scheduler_endpoint_ +
         " (check PS_SCHEDULER_URI / PS_SCHEDULER_PORT), or not all " +
         std::to_string(config_.num_servers) + " servers and " +
         std::to_string(config_.num_workers) +
         " workers have started (the scheduler logs which are missing)" +
         (config_.secure ? ", or this node's CURVE key is not the job's (the log says "
                           "whether a handshake failed)"
                         : ", or the job runs with PS_SECURE=1 and this node without it");
}

void Postoffice::FinishJoin() {
  loop_->Post([this] { StartNodeTimers(); });
  // Before the first barrier: the clock coordinator's pushes may follow at once.
  if (NodeServices* services = services_.load()) services->OnJoined(this);
  LOG_IF(INFO, verbose()) << "joined as " << my_node_.DebugString();
  // As ps-lite: apps (and the libraries they use) read the node's rank from here.
  setenv("DMLC_RANK", std::to_string(my_node_.rank).c_str(), 1);
}

void Postoffice::MarkJoined() {
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    joined_ = true;
  }
  state_cv_.notify_all();
}

void Postoffice::Finalize(int customer_id, bool do_barrier) {
  if (!started()) return;
  if (NodeServices* services = services_.load()) services->OnLeaving(this);
  if (do_barrier) Barrier(customer_id, kScheduler + kServerGroup + kWorkerGroup);
  std::lock_guard<std::mutex> lock(start_mu_);
  if (start_count_ == 0 || --start_count_ > 0) return;
  DrainCustomers();
  if (exit_callback_) exit_callback_();
  finalizing_ = true;
  if (is_scheduler()) {
    WaitForNodesToLeave();
  } else {
    // Leave explicitly, so that the scheduler does not wait for this node in
    // barriers nor later declare it dead: this process's other workers first.
    std::vector<int> instance_ids;
    {
      std::lock_guard<std::mutex> instances_lock(instances_mu_);
      for (const auto& instance : instances_) instance_ids.push_back(instance.second.id);
    }
    for (int id : instance_ids) {
      Message instance_leave;
      instance_leave.meta.control.cmd = Control::kLeave;
      instance_leave.meta.request = true;
      instance_leave.meta.recipient = kScheduler;
      instance_leave.meta.sender = id;
      SendControl(instance_leave);
    }
    Message leave;
    leave.meta.control.cmd = Control::kLeave;
    leave.meta.request = true;
    leave.meta.recipient = kScheduler;
    SendControl(leave);
    // With resend on, wait for the ACK, asking again every kLeaveRepeat rather than by
    // the resend backoff: a node that exits before its leave arrived would be declared
    // dead, and the job would count as having lost it. Heartbeats go on meanwhile.
    using Clock = std::chrono::steady_clock;
    const Clock::time_point deadline =
        Clock::now() + (config_.heartbeat_interval_s > 0
                            ? std::max<Clock::duration>(Millis(config_.heartbeat_timeout_s),
                                                        kFinalizeWait)
                            : Clock::duration(kFinalizeWait));
    Clock::time_point repeat = Clock::now() + kLeaveRepeat;
    ResendOutbox* outbox = outbox_[static_cast<int>(Channel::kControl)].get();
    while (outbox && outbox->Tracked(kScheduler, leave.meta.sequence) &&
           Clock::now() < deadline) {
      if (Clock::now() >= repeat) {
        van_->Send(leave, SendMode::kNonBlocking, Channel::kControl);  // same sequence
        repeat = Clock::now() + kLeaveRepeat;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  if (NodeServices* services = services_.load()) services->OnStopping();
  StopRuntime();
  if (size_t dropped = directory_->DropHeld()) {
    LOG(WARNING) << dropped << " messages for apps that never started on this node were dropped";
  }
  scheduler_.reset();
  ExitNonZeroIfNodesWereLost();
}

void Postoffice::WaitForNodesToLeave() {
  // Stay until every node has left (or died): their last messages need a live
  // scheduler (the closing barrier's release, resent while it is lost; the ACK of their
  // leave). Liveness bounds the wait, since a node that vanished is declared dead; a
  // node that lives on without leaving is given up on after kLeaveWait. Nothing more is
  // broadcast meanwhile.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + (config_.heartbeat_interval_s > 0 ? kLeaveWait : kFinalizeWait);
  Clock::time_point next_report = start + kFinalizeWait;
  for (;;) {
    std::string waiting;
    for (const Node& n : membership_.Get()->nodes) {
      if (n.id == my_node_.id || !n.alive()) continue;
      waiting += (waiting.empty() ? "" : ", ") + std::string(RoleName(n.role)) + " " +
                 std::to_string(n.rank);
    }
    if (waiting.empty()) return;
    const Clock::time_point now = Clock::now();
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start).count();
    if (now >= deadline) {
      LOG(ERROR) << "the scheduler stops without waiting longer for " << waiting
                 << " to leave (" << waited << " s after its Finalize)";
      return;
    }
    if (now >= next_report) {
      LOG(INFO) << "the scheduler waits for " << waiting << " to leave (" << waited << " s)";
      next_report = now + kFinalizeWait;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

namespace {

void ExitWithStatusOne() {
  google::FlushLogFiles(google::GLOG_INFO);
  std::fflush(nullptr);
  _exit(1);
}

}  // namespace

void Postoffice::ExitNonZeroIfNodesWereLost() {
  // A job that lost a node did not succeed, whatever the survivors did: a supervisor
  // that reads this process's exit status must not take it for success.
  std::string lost;
  for (const Node& n : membership_.Get()->nodes) {
    if (n.state != Node::kDead) continue;
    lost += (lost.empty() ? "" : ", ") + std::string(RoleName(n.role)) + " " +
            std::to_string(n.rank) + " (node " + std::to_string(n.id) + ")";
  }
  if (lost.empty()) return;
  LOG(ERROR) << "the job lost " << lost
             << " (declared dead): this process exits with status 1 when it ends";
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(ExitWithStatusOne); });
}

void Postoffice::DrainCustomers() {
  // What reached this node before the closing barrier has run when Finalize returns
  // (an app that counts the requests its handle answered, as ps-lite's tests do, sees
  // them all). Bounded: a handle that never returns does not hold the node forever.
  auto deadline = std::chrono::steady_clock::now() + kFinalizeWait;
  directory_->ForEach([&deadline](int app_id, int customer_id, Customer* customer) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (customer->DrainOwnThread(std::max(left, std::chrono::milliseconds(0)))) return true;
    LOG(WARNING) << "app " << app_id << " customer " << customer_id
                 << " is still running a handle " << kFinalizeWait.count()
                 << " s into Finalize; stopping without it";
    return false;
  });
}

void Postoffice::StopRuntime() {
  // Timers first, so that nothing sends on a stopping van.
  if (loop_) loop_->Stop();
  running_van_.store(nullptr, std::memory_order_release);
  if (van_) van_->Stop();
}

void Postoffice::Barrier(int customer_id, int node_group) {
  if (!started()) throw Error("Barrier called before ps::Start");
  std::vector<int> members = GetNodeIDs(node_group);
  if (std::find(members.begin(), members.end(), my_node_.id) == members.end()) {
    throw Error("Barrier: this node (" + my_node_.DebugString() + ") is not in group " +
                std::to_string(node_group));
  }
  if (members.size() == 1) return;
  // In a process of several workers each customer is its own worker, and its
  // barriers are that worker's (the customer id no longer tells them apart).
  const int me = InstanceIdOf(customer_id);
  const int barrier_customer = has_instances_ ? 0 : customer_id;
  auto key = std::make_tuple(node_group, barrier_customer, me);
  uint64_t seen;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    seen = barrier_releases_[key];
  }
  Message req;
  req.meta.control.cmd = Control::kBarrier;
  req.meta.control.barrier_group = node_group;
  req.meta.customer_id = barrier_customer;
  req.meta.request = true;
  req.meta.recipient = kScheduler;
  req.meta.sender = me;
  if (is_scheduler()) {
    // The scheduler's own entry goes straight to its role, on the control loop.
    req.meta.sender = kScheduler;
    loop_->Post([this, req]() mutable { HandleControl(req); });
  } else {
    Status s = SendControl(req);
    if (!s.ok()) throw Error("Barrier: cannot reach the scheduler: " + s.message());
  }
  std::unique_lock<std::mutex> lock(state_mu_);
  state_cv_.wait(lock, [&] { return barrier_releases_[key] > seen || !fatal_error_.empty(); });
  if (barrier_releases_[key] <= seen) throw Error("Barrier: " + fatal_error_);
}

Status Postoffice::PrepareSend(Message& msg) {
  if (!IsMyInstanceId(msg.meta.sender)) msg.meta.sender = my_node_.id;
  msg.meta.sender_incarnation = process_incarnation_;
  if (gave_up_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(state_mu_);
    return Status::Unavailable(fatal_error_);
  }
  const MembershipView* view = membership_.Get();
  const Node* to = view->Find(msg.meta.recipient);
  // ACKs still go to a node that left: it may be resending its leave.
  if (view->version > 0 && to && !to->alive() && msg.meta.control.cmd != Control::kAck) {
    return Status::Unavailable(std::string(RoleName(to->role)) + " " +
                               std::to_string(to->rank) + " (node " + std::to_string(to->id) +
                               ") is " + StateName(to->state));
  }
  return Status::OK();
}

Status Postoffice::Send(Message& msg, SendMode mode) {
  Status ready = PrepareSend(msg);
  if (!ready.ok()) return ready;
  LOG_IF(INFO, verbose() && !msg.meta.control.empty()) << "send " << msg.DebugString();
  const Channel channel = ChannelOf(msg);
  if (msg.meta.recipient == my_node_.id) return SendToSelf(msg, channel);
  ResendOutbox* outbox = outbox_[static_cast<int>(channel)].get();
  if (!outbox || msg.meta.control.cmd == Control::kAck ||
      msg.meta.control.cmd == Control::kHeartbeat) {
    return van_->Send(msg, mode, channel);
  }
  uint64_t seq = outbox->Track(&msg, std::chrono::steady_clock::now());
  Status s = van_->Send(msg, mode, channel);
  // A message that could not leave is the caller's failure to report; a resend
  // behind its back would deliver what the caller was told failed.
  if (!s.ok()) outbox->Ack(msg.meta.recipient, seq);
  return s;
}

Status Postoffice::SendToSelf(const Message& msg, Channel channel) {
  // A SimpleApp request to a group this node is in (ps-lite's test_simple_app sends to
  // kScheduler + kServerGroup + kWorkerGroup from the scheduler) reaches this node's
  // own app, handed over by the thread that receives the channel as if it had arrived:
  // the app's handle runs on its own thread, never on the sender's.
  if (!msg.meta.simple_app || !msg.meta.control.empty()) {
    return Status::InvalidArgument("node " + std::to_string(my_node_.id) +
                                   " cannot send a KV or control message to itself");
  }
  auto deliver = [this, m = msg, channel]() mutable { DispatchData(m, channel); };
  if (!van_->RunOnReceiver(channel, deliver)) loop_->Post(std::move(deliver));
  return Status::OK();
}

Status Postoffice::SendControl(Message& msg) {
  const Channel channel = ChannelOf(msg);
  ResendOutbox* outbox = outbox_[static_cast<int>(channel)].get();
  if (!outbox) return Send(msg, SendMode::kNonBlocking);
  // With resend on, a message that finds the peer's queue full is still tracked and
  // goes out with the next resend.
  Status ready = PrepareSend(msg);
  if (!ready.ok()) return ready;
  outbox->Track(&msg, std::chrono::steady_clock::now());
  van_->Send(msg, SendMode::kNonBlocking, channel);
  return Status::OK();
}

std::vector<int> Postoffice::GetNodeIDs(int node_group) const {
  return membership_.Get()->Ids(node_group, /*alive_only=*/true);
}

NodeStats Postoffice::stats() const {
  NodeStats s;
  s.forged_messages = forged_.load();
  s.from_gone_nodes = from_gone_.load();
  s.injected_drops = injected_drops_.load();
  s.resent_messages = resent_.load();
  s.duplicates = duplicates_.load();
  s.expired_early_messages = expired_early_.load();
  s.before_table = before_table_.load();
  s.refused_joins = refused_joins_.load();
  for (int c = 0; c < 2; ++c) {
    if (outbox_[c]) s.awaiting_ack += outbox_[c]->Size();
    s.held_out_of_order += inbound_[c].held.load(std::memory_order_relaxed);
  }
  return s;
}

void Postoffice::InstallMembership(MembershipView view) {
  const MembershipView* old = membership_.Get();
  std::vector<Node> gone;
  for (const Node& n : view.nodes) {
    if (n.alive()) van_->AdmitIdentity(n.identity);
    const Node* before = old->Find(n.id);
    if (n.id == my_node_.id) continue;
    if (n.alive() && (!before || before->endpoint != n.endpoint ||
                      before->control_endpoint != n.control_endpoint)) {
      Status s = van_->Connect(n.id, n.endpoint, n.control_endpoint);
      if (!s.ok()) LOG(ERROR) << "cannot connect to " << n.DebugString() << ": " << s;
    }
    if (!n.alive() && (!before || before->alive())) gone.push_back(n);
  }
  bool first = old->version == 0;
  for (const Node& n : view.nodes) {
    if (n.id == my_node_.id) {
      // Other threads read my_node_ once the node has joined: it is written only by
      // the first table (before joined_ is published); later views only change state.
      if (first) my_node_ = n;
      if (n.state == Node::kDead && !finalizing_) {
        membership_.Publish(std::move(view));
        const double stalled = stalled_for_s_;
        GiveUp("the scheduler declared this node dead (silent for more than "
               "PS_HEARTBEAT_TIMEOUT=" + SecondsText(config_.heartbeat_timeout_s) + " s" +
               (stalled > 0 ? ": this node did not run for " + SecondsText(stalled) +
                                  " s, it was stopped or starved of CPU"
                            : std::string()) +
               "); a dead node does not come back");
        return;
      }
    }
  }
  membership_.Publish(std::move(view));
  if (first) return;
  for (const Node& n : gone) {
    if (n.state == Node::kDead) {
      // The scheduler has said it already, in its own words.
      LOG_IF(ERROR, !is_scheduler()) << n.DebugString() << " is dead (silent for more than PS_HEARTBEAT_TIMEOUT="
                 << SecondsText(config_.heartbeat_timeout_s) << " s)";
    } else {
      LOG_IF(INFO, verbose()) << n.DebugString() << " left the job";
    }
    // A dead node's connections go at once (what is queued for it is of no use), except
    // on the scheduler, which tells a dead node that runs again (it was stopped) that it
    // is dead; a node that left keeps them until this node stops, for the ACKs it may
    // still need.
    if (n.state == Node::kDead && !is_scheduler()) van_->Disconnect(n.id);
    for (auto& outbox : outbox_) {
      if (outbox) outbox->DropPeer(n.id);
    }
    Status why = Status::Unavailable(
        std::string(RoleName(n.role)) + " " + std::to_string(n.rank) + " (node " +
        std::to_string(n.id) + ", " + n.endpoint + ") " +
        (n.state == Node::kDead ? "is dead: silent for more than PS_HEARTBEAT_TIMEOUT=" +
                                      SecondsText(config_.heartbeat_timeout_s) + " s"
                                : std::string("left the job")));
    directory_->ForEach([&n, &why](int, int, Customer* customer) {
      customer->AbortRequestsWaitingFor(n, why);
      return true;
    });
  }
  if (NodeServices* services = services_.load()) {
    services->OnMembershipChange(membership_.Get());
  }
}

void Postoffice::AddCustomer(Customer* customer) {
  // Messages held for it are delivered once the node table is in (before it, their
  // senders are not verified yet).
  directory_->Add(customer, joined_.load());
}

void Postoffice::RemoveCustomer(Customer* customer) { directory_->Remove(customer); }

}  // namespace ps
