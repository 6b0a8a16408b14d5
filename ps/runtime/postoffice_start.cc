// Postoffice: Start, the join of this node to the job: reading the configuration,
// starting the control loop and the van, sending the join (or, on the scheduler,
// beginning its role) and waiting for the node table.
#include <glog/logging.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>

#include "barrier_releases.h"
#include "drop_injector.h"
#include "idle_trimmer.h"
#include "inbound_channel.h"
#include "join_state.h"
#include "ps/internal/event_loop.h"
#include "ps/internal/postoffice.h"
#include "ps/internal/reorder_window.h"
#include "ps/internal/resend_outbox.h"
#include "scheduler_role.h"
#include "worker_instances.h"

namespace ps {
namespace {

// How far ahead of the next expected message a sender may be (PS_RESEND); further
// messages are not acknowledged and come again. Also the most messages held per sender.
constexpr size_t kReorderWindow = 4096;

// The longest wait between two resends of a message, in resend timeouts. The doubling
// spares a dead or stalled peer a storm until the heartbeats declare it dead; a longer
// cap only lengthens the wait for a live peer on a lossy link: a message lost 8 times
// in a row goes the 9th time 79 s after its first send at 16 timeouts, 27 s at 4.
constexpr int kResendBackoffCap = 4;

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

void Postoffice::Start(int customer_id, const char* argv0, bool do_barrier) {
  {
    // Held while starting, but not while waiting for the job to form: a Start for
    // another customer meanwhile is one more worker of this process (as in ps-lite).
    std::unique_lock<std::mutex> lock(start_mu_);
    if (start_count_++ > 0) {
      if (join_->joining()) {
        AddInstance(customer_id);
        lock.unlock();
        Status joined = join_->Wait();
        if (!joined.ok()) throw Error("HerdPS cannot join: " + joined.message());
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
  if (do_barrier && join_->replaces_dead_node()) {
    // The others passed the start barrier long ago; waiting in it would wait forever.
    LOG(INFO) << "joined the running job as " << RoleName(my_node_.role) << " " << my_node_.rank
              << (my_node_.state == Node::kEntering ? ", added to it" : ", in a dead node's place")
              << ": no start barrier";
  } else if (do_barrier) {
    Barrier(customer_id, kScheduler + kServerGroup + kWorkerGroup);
  }
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
  join_->Reset();
  barriers_->Reset();
  membership_.Reset();
  server_slots_ = 0;
  most_servers_down_ = 0;
  withdraw_asked_ = false;
  withdrawn_ = false;
  {
    std::lock_guard<std::mutex> ranges_lock(key_ranges_mu_);
    key_ranges_.clear();
  }
  finalizing_ = false;
  {
    // The new van counts its traffic from zero; the start barrier may come before the
    // control loop's timers start.
    std::lock_guard<std::mutex> trim_lock(trim_mu_);
    idle_trimmer_->Start(std::chrono::milliseconds(std::max(config_.idle_trim_ms, 0)),
                         std::chrono::steady_clock::now());
  }
  started_at_ns_ = 0;
  process_incarnation_ = RandomU64();
  for (int c = 0; c < 2; ++c) {
    inbound_[c]->Reset(config_.resend, kReorderWindow);
    if (config_.resend) {
      auto timeout = std::chrono::milliseconds(config_.resend_timeout_ms);
      outbox_[c] = std::make_unique<ResendOutbox>(timeout, timeout * kResendBackoffCap);
    } else {
      outbox_[c].reset();
    }
  }
  drops_->Reset(config_.drop_rate, config_.drop_seed ? config_.drop_seed : RandomU64());
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
    replication_ = config_.replication;
    replicate_rounds_ = config_.replicate_rounds;
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
  options.zmq.send_high_water_mark = config_.send_high_water_mark;
  options.identity = my_node_.identity;
  options.zmq.curve_secret_key = config_.curve_secret_key;  // PS_SECURE
  options.zmq.shm = config_.shm;  // PS_SHM
  options.zmq.coalesce = config_.coalesce;  // PS_COALESCE
  options.zmq.coalesce_first = config_.coalesce_first;  // PS_COALESCE_FIRST
  options.zmq.shm_bytes = config_.shm_bytes;
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
  if (is_scheduler()) {
    Status metrics = scheduler_->StartMetrics();  // PS_METRICS_PORT
    if (!metrics.ok()) {
      start_count_ = 0;
      loop_->Stop();
      van_->Stop();
      van_.reset();
      scheduler_.reset();
      throw Error("HerdPS cannot start the scheduler node: " + metrics.message());
    }
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
    instances_->Reset(customer_id);
    auto begun = std::chrono::steady_clock::now();
    auto send_join = [this, begun] {
      if (join_->joined()) return;
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
  join_->set_joining(true);
  start_lock.unlock();
  Status error;
  bool done = join_->WaitFor(std::chrono::seconds(config_.start_timeout_s), &error);
  start_lock.lock();
  join_->set_joining(false);
  if (done && error.ok()) return;
  std::string why = done ? error.message() : JoinTimeoutReason();
  join_->Fail(Status::Unavailable(why));  // wakes other Starts (a refusal stays theirs)
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

void Postoffice::MarkJoined() { join_->MarkJoined(); }

}  // namespace ps
