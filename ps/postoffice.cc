#include "ps/internal/postoffice.h"

#include <glog/logging.h>
#include <malloc.h>

#include <chrono>
#include <cstdlib>

#include "scheduler_role.h"

namespace ps {
namespace {

// Data that arrives before its customer exists is held, up to this many messages and
// bytes; past that the sender is told the app is not running here.
constexpr size_t kMaxEarlyMessages = 1 << 16;
constexpr size_t kMaxEarlyBytes = size_t{1} << 30;
// How long a request may wait for its app to start on this node before the sender is
// told that it is not running here.
constexpr std::chrono::seconds kEarlyMessageGrace(10);

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

}  // namespace

Postoffice* Postoffice::Get() {
  static Postoffice* instance = new Postoffice();  // never destroyed: used until exit
  return instance;
}

void Postoffice::Start(int customer_id, const char* argv0, bool do_barrier) {
  {
    std::lock_guard<std::mutex> lock(start_mu_);
    if (start_count_++ == 0) {
      InitLogging(argv0);
      Status s = Config::FromEnvironment(&config_);
      if (!s.ok()) {
        start_count_ = 0;
        throw Error("HerdPS cannot start: " + s.message());
      }
      if (config_.tune_malloc) TuneMalloc();
      {
        std::lock_guard<std::mutex> state_lock(state_mu_);
        ready_ = false;
        join_error_ = Status::OK();
        nodes_.clear();
        barrier_releases_.clear();
      }
      std::string scheduler =
          EndpointFor(config_.transport, config_.scheduler_host, config_.scheduler_port);
      my_node_ = Node();
      my_node_.role = config_.role;
      my_node_.host = config_.node_host;
      my_node_.rank_hint = config_.rank_hint;
      if (is_scheduler()) {
        // The scheduler's address is fixed by the job, and its role must exist before
        // the van delivers the first join request.
        my_node_.id = kScheduler;
        my_node_.rank = 0;
        my_node_.port = config_.scheduler_port;
        my_node_.endpoint = scheduler;
        scheduler_ = std::make_unique<SchedulerRole>(this, config_, my_node_);
      }
      van_ = Van::Create("zmq");
      VanOptions options;
      options.transport = config_.transport;
      options.host = config_.node_host;
      options.port = config_.node_port;
      options.max_message_bytes = config_.max_message_bytes;
      s = van_->Start(options, [this](Message&& msg) { OnMessage(std::move(msg)); });
      if (!s.ok()) {
        start_count_ = 0;
        van_.reset();
        scheduler_.reset();
        throw Error("HerdPS cannot start the " + std::string(RoleName(config_.role)) +
                    " node: " + s.message());
      }
      if (!is_scheduler()) {
        my_node_.port = van_->port();
        my_node_.endpoint = van_->endpoint();
        s = van_->Connect(kScheduler, scheduler);
        if (s.ok()) {
          Message join;
          join.meta.control.cmd = Control::kAddNode;
          join.meta.control.nodes.push_back(my_node_);
          join.meta.request = true;
          join.meta.recipient = kScheduler;
          s = Send(join);
        }
        if (!s.ok()) {
          start_count_ = 0;
          van_->Stop();
          throw Error("HerdPS cannot reach the scheduler at " + scheduler + ": " + s.message());
        }
      }
      std::unique_lock<std::mutex> state_lock(state_mu_);
      bool joined = state_cv_.wait_for(state_lock, std::chrono::seconds(config_.start_timeout_s),
                                       [this] { return ready_ || !join_error_.ok(); });
      if (!joined || !join_error_.ok()) {
        std::string why = joined ? join_error_.message()
                                 : "no node table from the scheduler at " + scheduler +
                                       " within " + std::to_string(config_.start_timeout_s) +
                                       " s (PS_START_TIMEOUT); is it running, and do "
                                       "PS_SCHEDULER_URI / PS_SCHEDULER_PORT point at it?";
        state_lock.unlock();
        start_count_ = 0;
        van_->Stop();
        throw Error("HerdPS " + std::string(RoleName(config_.role)) + " cannot join: " + why);
      }
      if (verbose()) LOG(INFO) << "joined as " << my_node_.DebugString();
    }
  }
  if (do_barrier) Barrier(customer_id, kScheduler + kServerGroup + kWorkerGroup);
}

void Postoffice::Finalize(int customer_id, bool do_barrier) {
  if (!started()) return;
  if (do_barrier) Barrier(customer_id, kScheduler + kServerGroup + kWorkerGroup);
  std::lock_guard<std::mutex> lock(start_mu_);
  if (start_count_ == 0 || --start_count_ > 0) return;
  if (exit_callback_) exit_callback_();
  van_->Stop();
  {
    std::unique_lock<std::shared_mutex> dispatch_lock(dispatch_mu_);
    if (!early_messages_.empty()) {
      LOG(WARNING) << early_messages_.size()
                   << " messages for apps that never started on this node were dropped";
      early_messages_.clear();
      early_bytes_ = 0;
      has_early_ = false;
    }
  }
  scheduler_.reset();
}

void Postoffice::Barrier(int customer_id, int node_group) {
  if (!started()) throw Error("Barrier called before ps::Start");
  std::vector<int> members = GetNodeIDs(node_group);
  if (std::find(members.begin(), members.end(), my_node_.id) == members.end()) {
    throw Error("Barrier: this node (" + my_node_.DebugString() + ") is not in group " +
                std::to_string(node_group));
  }
  if (members.size() == 1) return;
  auto key = std::make_pair(node_group, customer_id);
  uint64_t seen;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    seen = barrier_releases_[key];
  }
  Message req;
  req.meta.control.cmd = Control::kBarrier;
  req.meta.control.barrier_group = node_group;
  req.meta.customer_id = customer_id;
  req.meta.request = true;
  req.meta.recipient = kScheduler;
  Status s = Send(req);
  if (!s.ok()) throw Error("Barrier: cannot reach the scheduler: " + s.message());
  std::unique_lock<std::mutex> lock(state_mu_);
  state_cv_.wait(lock, [&] { return barrier_releases_[key] > seen; });
}

Status Postoffice::Send(Message& msg) {
  msg.meta.sender = my_node_.id;
  if (verbose() && !msg.meta.control.empty()) LOG(INFO) << "send " << msg.DebugString();
  return van_->Send(msg);
}

std::vector<int> Postoffice::GetNodeIDs(int node_group) const {
  std::lock_guard<std::mutex> lock(state_mu_);
  std::vector<int> ids;
  if (node_group >= 8) {
    for (const Node& n : nodes_) {
      if (n.id == node_group) ids.push_back(n.id);
    }
    return ids;
  }
  for (const Node& n : nodes_) {
    bool in = (n.role == Node::kSchedulerRole && (node_group & kScheduler)) ||
              (n.role == Node::kServerRole && (node_group & kServerGroup)) ||
              (n.role == Node::kWorkerRole && (node_group & kWorkerGroup));
    if (in) ids.push_back(n.id);
  }
  return ids;
}

std::vector<Node> Postoffice::nodes() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return nodes_;
}

void Postoffice::InstallNodeTable(const std::vector<Node>& nodes, int my_id) {
  std::vector<int> servers;
  for (const Node& n : nodes) {
    if (n.id == my_id) my_node_ = n;
    if (n.role == Node::kServerRole) servers.push_back(n.rank);
    Status s = van_->Connect(n.id, n.endpoint);
    if (!s.ok()) LOG(ERROR) << "cannot connect to " << n.DebugString() << ": " << s;
  }
  ring_ = ConsistentHashRing(servers, config_.ring_virtual_nodes);
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    nodes_ = nodes;
    node_ids_.clear();
    for (const Node& n : nodes) node_ids_.insert(n.id);
    ready_.store(true, std::memory_order_release);
  }
  state_cv_.notify_all();
  // Data that raced ahead of the node table can be delivered now.
  std::unique_lock<std::shared_mutex> dispatch_lock(dispatch_mu_);
  std::deque<EarlyMessage> early;
  early.swap(early_messages_);
  early_bytes_ = 0;
  has_early_ = false;
  dispatch_lock.unlock();
  for (EarlyMessage& m : early) DispatchData(m.msg);
}

void Postoffice::OnMessage(Message&& msg) {
  if (verbose() && !msg.meta.control.empty()) LOG(INFO) << "recv " << msg.DebugString();
  if (has_early_.load(std::memory_order_relaxed)) ExpireEarlyMessages();
  if (msg.meta.control.empty()) {
    DispatchData(msg);
  } else {
    HandleControl(msg);
  }
}

void Postoffice::HandleControl(Message& msg) {
  switch (msg.meta.control.cmd) {
    case Control::kAddNode:
      if (msg.meta.request) {
        if (scheduler_) {
          scheduler_->HandleAddNode(msg);
        } else {
          LOG(WARNING) << "join request sent to a non-scheduler node; ignored";
        }
      } else if (msg.meta.sender == kScheduler && !is_scheduler()) {
        HandleNodeTable(msg);
      }
      break;
    case Control::kBarrier:
      if (msg.meta.request) {
        if (scheduler_) scheduler_->HandleBarrier(msg);
      } else if (msg.meta.sender == kScheduler) {
        HandleBarrierRelease(msg);
      }
      break;
    default:
      LOG(WARNING) << "control command " << msg.meta.control.cmd << " not handled yet; ignored";
  }
}

void Postoffice::HandleNodeTable(const Message& msg) {
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (ready_) return;  // the table is handed out once
    if (msg.meta.status_code != 0) {
      join_error_ = Status::FromWire(msg.meta.status_code, msg.meta.status_message);
      state_cv_.notify_all();
      return;
    }
  }
  int my_id = kEmpty;
  for (const Node& n : msg.meta.control.nodes) {
    if (n.endpoint == my_node_.endpoint) my_id = n.id;
  }
  if (my_id == kEmpty) {
    LOG(WARNING) << "node table from the scheduler does not list this node; ignored";
    return;
  }
  InstallNodeTable(msg.meta.control.nodes, my_id);
}

void Postoffice::HandleBarrierRelease(const Message& msg) {
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    ++barrier_releases_[{msg.meta.control.barrier_group, msg.meta.customer_id}];
  }
  state_cv_.notify_all();
}

void Postoffice::ReplyError(const Message& request, const Status& status) {
  Message reply;
  reply.meta.app_id = request.meta.app_id;
  reply.meta.customer_id = request.meta.customer_id;
  reply.meta.timestamp = request.meta.timestamp;
  reply.meta.push = request.meta.push;
  reply.meta.pull = request.meta.pull;
  reply.meta.head = request.meta.head;
  reply.meta.request = false;
  reply.meta.recipient = request.meta.sender;
  reply.meta.status_code = static_cast<int>(status.code());
  reply.meta.status_message = status.message();
  Status s = Send(reply);
  if (!s.ok()) LOG(WARNING) << "cannot send error reply to node " << request.meta.sender;
}

void Postoffice::DispatchData(Message& msg) {
  std::shared_lock<std::shared_mutex> lock(dispatch_mu_);
  bool ready = ready_.load(std::memory_order_acquire);
  // Requests go to the app's request handler, registered as (app_id, app_id) as in
  // ps-lite; responses go back to the customer that issued the request.
  int customer_id = msg.meta.request ? msg.meta.app_id : msg.meta.customer_id;
  auto hold_early = [&]() {
    lock.unlock();
    std::unique_lock<std::shared_mutex> write(dispatch_mu_);
    // The customer may have registered (and drained the held messages) while no lock
    // was held: deliver now, or this message would wait behind newer ones.
    if (ready_.load(std::memory_order_acquire)) {
      auto found = customers_.find({msg.meta.app_id, customer_id});
      if (found != customers_.end()) {
        found->second->Accept(msg);
        return true;
      }
    }
    size_t bytes = msg.DataBytes();
    if (early_messages_.size() < kMaxEarlyMessages && early_bytes_ + bytes <= kMaxEarlyBytes) {
      early_bytes_ += bytes;
      early_messages_.push_back({std::move(msg), std::chrono::steady_clock::now()});
      has_early_ = true;
      return true;
    }
    return false;
  };
  if (!ready) {
    if (!hold_early()) LOG(WARNING) << "data before the node table, over the limit; dropped";
    return;
  }
  if (!node_ids_.count(msg.meta.sender)) {
    LOG_IF(WARNING, stray_log_.ShouldLog())
        << "data message from unknown node " << msg.meta.sender << " dropped";
    return;
  }
  auto it = customers_.find({msg.meta.app_id, customer_id});
  if (it != customers_.end()) {
    it->second->Accept(msg);
    return;
  }
  if (!msg.meta.request) {
    LOG_IF(WARNING, stray_log_.ShouldLog())
        << "response for app " << msg.meta.app_id << " customer " << customer_id
        << ", which does not exist on this node, dropped";
    return;
  }
  Message copy = msg;
  if (!hold_early()) {
    ReplyError(copy, Status::NotFound("app " + std::to_string(copy.meta.app_id) +
                                      " is not running on node " + std::to_string(my_id())));
  }
}

void Postoffice::ExpireEarlyMessages() {
  if (!ready_.load(std::memory_order_acquire)) return;  // still joining: keep them
  auto deadline = std::chrono::steady_clock::now() - kEarlyMessageGrace;
  std::vector<Message> expired;
  {
    std::unique_lock<std::shared_mutex> lock(dispatch_mu_);
    while (!early_messages_.empty() && early_messages_.front().arrived < deadline) {
      early_bytes_ -= early_messages_.front().msg.DataBytes();
      expired.push_back(std::move(early_messages_.front().msg));
      early_messages_.pop_front();
    }
    has_early_ = !early_messages_.empty();
  }
  for (const Message& m : expired) {
    if (!m.meta.request) continue;
    ReplyError(m, Status::NotFound("app " + std::to_string(m.meta.app_id) +
                                   " is not running on node " + std::to_string(my_id())));
  }
}

void Postoffice::AddCustomer(Customer* customer) {
  if (!started()) {
    throw Error("create KVWorker / KVServer after ps::Start (app " +
                std::to_string(customer->app_id()) + ")");
  }
  std::unique_lock<std::shared_mutex> lock(dispatch_mu_);
  auto key = std::make_pair(customer->app_id(), customer->customer_id());
  if (customers_.count(key)) {
    throw Error("app " + std::to_string(key.first) + " customer " + std::to_string(key.second) +
                " already exists on this node");
  }
  customers_[key] = customer;
  // Deliver what arrived for it before it existed, in arrival order, before any new
  // message (the van thread waits on dispatch_mu_ meanwhile).
  std::deque<EarlyMessage> keep;
  for (EarlyMessage& e : early_messages_) {
    Message& m = e.msg;
    int cid = m.meta.request ? m.meta.app_id : m.meta.customer_id;
    if (m.meta.app_id == key.first && cid == key.second) {
      early_bytes_ -= m.DataBytes();
      customer->Accept(m);
    } else {
      keep.push_back(std::move(e));
    }
  }
  early_messages_.swap(keep);
  has_early_ = !early_messages_.empty();
}

void Postoffice::RemoveCustomer(Customer* customer) {
  std::unique_lock<std::shared_mutex> lock(dispatch_mu_);
  auto it = customers_.find({customer->app_id(), customer->customer_id()});
  if (it != customers_.end() && it->second == customer) customers_.erase(it);
}

}  // namespace ps
