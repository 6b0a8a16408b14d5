#include "scheduler_role.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "ps/base.h"
#include "ps/internal/event_loop.h"
#include "ps/internal/postoffice.h"

namespace ps {
namespace {

// Refused joins are answered from a few temporary ids, reused in turn, so that a
// flood of bad joins costs a bounded number of connections. Above every real id.
constexpr int kRefusalIdBase = 1 << 28;
constexpr int kRefusalSlots = 16;
// How often the scheduler says who it is still waiting for.
constexpr std::chrono::seconds kProgressEvery(5);
constexpr std::chrono::seconds kSlowBarrier(30);
// How often the scheduler looks for a stall (and for SIGUSR1).
constexpr std::chrono::milliseconds kStallCheck(250);

// Compares without an early exit, so that timing does not reveal the token.
bool SameToken(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

SchedulerRole::SchedulerRole(Postoffice* postoffice, const Config& config, const Node& self)
    : postoffice_(postoffice), config_(config), self_(self) {}

void SchedulerRole::Begin(const Node& self) {
  self_ = self;
  begun_ = true;
  begun_at_ = Clock::now();
  EventLoop* loop = postoffice_->control_loop();
  loop->RunEvery(kProgressEvery, [this] { LogProgress(); });
  loop->RunEvery(kStallCheck, [this] { CheckStall(); });
  ListenForSigusr1();
  if (config_.heartbeat_interval_s > 0) {
    auto check = std::max(std::chrono::milliseconds(50),
                          std::min(Millis(config_.heartbeat_interval_s),
                                   std::chrono::milliseconds(250)));
    loop->RunEvery(check, [this] { CheckLiveness(); });
  }
  if (joining_.size() == static_cast<size_t>(config_.num_workers + config_.num_servers)) {
    AssignAndBroadcast();
  }
}

void SchedulerRole::Handle(const Message& msg) {
  switch (msg.meta.control.cmd) {
    case Control::kAddNode:
      if (msg.meta.request) HandleJoin(msg);
      break;
    case Control::kHeartbeat:
      if (msg.meta.request) HandleHeartbeat(msg);
      break;
    case Control::kBarrier:
      if (msg.meta.request) HandleBarrier(msg);
      break;
    case Control::kCaughtUp:
      HandleCaughtUp(msg);
      break;
    case Control::kWithdraw:
      if (msg.meta.request && complete_) HandleWithdraw(msg);
      break;
    case Control::kLeave:
      // The leaving node's final counters (a node that is not live sends none that count).
      if (live_.count(msg.meta.sender) && !msg.meta.body.empty()) {
        reports_.Update(msg.meta.sender, msg.meta.body, Clock::now());
      }
      if (complete_) MarkGone(msg.meta.sender, Node::kLeft);
      break;
    default:
      break;
  }
}

void SchedulerRole::Refuse(const Node& node, const std::string& why) {
  uint64_t n = postoffice_->refused_joins_.fetch_add(1) + 1;
  LOG_IF(WARNING, refusal_log_.ShouldLog())
      << "refused the join of " << RoleName(node.role) << " at '" << node.endpoint
      << "': " << why << " (" << n << " refused so far)";
  if (node.control_endpoint.empty()) return;
  Message reply;
  reply.meta.control.cmd = Control::kAddNode;
  // The joining node accepts a refusal only if it names the identity it joined with:
  // nobody else knows that identity, so nobody else can send it a refusal in the
  // scheduler's name, nor have it sent to a node that did not ask.
  reply.meta.control.nodes.push_back(node);
  reply.meta.status_code = static_cast<int>(Status::Code::kUnavailable);
  reply.meta.status_message = "the scheduler refused this node: " + why;
  int temp_id = kRefusalIdBase + refusal_slot_;
  refusal_slot_ = (refusal_slot_ + 1) % kRefusalSlots;
  // From a connection without the scheduler's identity: a join is not authenticated,
  // and its endpoint may be another node's, whose connection from the scheduler must
  // not be disturbed.
  if (postoffice_->van()->Connect(temp_id, "", node.control_endpoint,
                                  /*with_identity=*/false).ok()) {
    // Not tracked for resend: a temporary id has no link to number messages on, and
    // the refused node sends a new join if this answer is lost.
    reply.meta.recipient = temp_id;
    reply.meta.sender = self_.id;
    postoffice_->van()->Send(reply, SendMode::kNonBlocking, Channel::kControl);
  }
}

void SchedulerRole::HandleJoin(const Message& msg) {
  if (msg.meta.control.nodes.size() != 1) {
    Refuse(Node(), "a join must describe exactly one node");
    return;
  }
  Node node = msg.meta.control.nodes[0];
  if (!config_.job_token.empty() && !SameToken(msg.meta.control.token, config_.job_token)) {
    Refuse(node, msg.meta.control.token.empty()
                     ? "it has no PS_JOB_TOKEN and this job requires one"
                     : "its PS_JOB_TOKEN is not this job's");
    return;
  }
  if (node.role == Node::kSchedulerRole || node.endpoint.empty() ||
      node.control_endpoint.empty() ||
      node.identity != msg.peer_identity || node.identity.empty()) {
    Refuse(node, node.role == Node::kSchedulerRole ? "a second scheduler"
                                                   : "no endpoint or a wrong identity");
    return;
  }
  if (complete_) {
    for (const Node& n : view_.nodes) {
      if (n.endpoint == node.endpoint && n.identity == node.identity &&
          n.instance == node.instance) {
        // Our reply was lost: send it again. The node runs (it asks again every
        // second), so its silence until the table reaches it is no death: with resend
        // on, the table's first copy is the one it waits for, and its resends back off.
        if (n.alive()) {
          Heard(n.id);
          SendTable(n, replacements_.count(n.id) > 0);
        }
        return;
      }
    }
    std::string why;
    if (postoffice_->finalizing_) {
      Refuse(node, "the job is ending");
    } else if (!AdmitReplacement(node, &why)) {
      Refuse(node, why);
    }
    return;
  }
  int same_role = 0;
  if (node.instance > 0 && node.role != Node::kWorkerRole) {
    Refuse(node, "only a worker process may run several workers");
    return;
  }
  for (Node& n : joining_) {
    if (n.endpoint == node.endpoint && n.instance == node.instance) {
      n = node;  // a repeated join (or a restart before the job began)
      return;
    }
    same_role += n.role == node.role;
  }
  int wanted = node.role == Node::kWorkerRole ? config_.num_workers : config_.num_servers;
  if (same_role >= wanted) {
    Refuse(node, "the job wants " + std::to_string(wanted) + " " + RoleName(node.role) +
                     "s and all have joined; this one is surplus");
    return;
  }
  joining_.push_back(node);
  // Its connections may carry more than a stranger's from now on (van/connection_guard.h).
  postoffice_->van()->AdmitIdentity(node.identity);
  LOG_IF(INFO, postoffice_->verbose())
      << "node joined: " << RoleName(node.role) << " at " << node.endpoint << " ("
      << joining_.size() << "/" << config_.num_workers + config_.num_servers << ")";
  if (begun_ &&
      joining_.size() == static_cast<size_t>(config_.num_workers + config_.num_servers)) {
    AssignAndBroadcast();
  }
}

void SchedulerRole::AssignAndBroadcast() {
  complete_ = true;
  MembershipView view;
  view.version = 1;
  Node self = self_;
  self.state = Node::kLive;
  view.nodes.push_back(self);
  for (Node::Role role : {Node::kServerRole, Node::kWorkerRole}) {
    std::vector<Node*> group;
    for (Node& n : joining_) {
      if (n.role == role) group.push_back(&n);
    }
    // Use the launcher's labels as ranks when they are exactly 0..n-1, so that
    // "[worker 2]" in the launcher's output is rank 2.
    std::vector<bool> seen(group.size(), false);
    bool hints_ok = true;
    for (Node* n : group) {
      if (n->rank_hint < 0 || n->rank_hint >= static_cast<int>(group.size()) ||
          seen[n->rank_hint]) {
        hints_ok = false;
        break;
      }
      seen[n->rank_hint] = true;
    }
    for (size_t i = 0; i < group.size(); ++i) {
      Node* n = group[i];
      n->rank = hints_ok ? n->rank_hint : static_cast<int>(i);
      n->id = role == Node::kServerRole ? Postoffice::ServerRankToID(n->rank)
                                        : Postoffice::WorkerRankToID(n->rank);
      n->state = Node::kLive;
    }
  }
  for (const Node& n : joining_) view.nodes.push_back(n);
  std::sort(view.nodes.begin(), view.nodes.end(),
            [](const Node& a, const Node& b) { return a.id < b.id; });
  view_ = view;
  postoffice_->InstallMembership(std::move(view));
  // Joined before the tables leave: the first barrier request may follow at once.
  postoffice_->MarkJoined();
  int max_id = 0;
  for (const Node& n : joining_) max_id = std::max(max_id, n.id);
  // Room for the servers that may be added to the running job: the array is published
  // once and never moves, for the receive threads that write it.
  max_id = std::max(max_id, Postoffice::ServerRankToID(config_.num_servers + kMaxAddedServers));
  heard_size_ = static_cast<size_t>(max_id) + 1;
  heard_storage_.reset(new std::atomic<int64_t>[heard_size_]);
  const int64_t now = NowNs();
  for (size_t i = 0; i < heard_size_; ++i) heard_storage_[i].store(now);
  heard_ns_.store(heard_storage_.get(), std::memory_order_release);
  last_check_ns_ = now;
  for (const Node& n : joining_) {
    live_.insert(n.id);
    SendTable(n);
  }
  LOG(INFO) << "all " << joining_.size() << " nodes joined (" << config_.num_servers
            << " servers, " << config_.num_workers << " workers)";
  joining_.clear();
}

void SchedulerRole::SendTable(const Node& node, bool replaces_dead_node) {
  Message reply;
  reply.meta.control.cmd = Control::kAddNode;
  reply.meta.control.replaces_dead_node = replaces_dead_node;
  reply.meta.control.nodes = view_.nodes;
  reply.meta.control.membership_version = view_.version;
  reply.meta.control.leave_version = view_.leave_version;
  reply.meta.control.retiring = view_.retiring;
  // The job's consistency model comes with the table, so no node can disagree.
  reply.meta.control.consistency = static_cast<int>(config_.consistency.kind);
  reply.meta.control.staleness = config_.consistency.staleness;
  reply.meta.control.key_placement = static_cast<int>(config_.key_placement);
  reply.meta.control.chunk_bytes = config_.chunk_bytes;
  reply.meta.control.replication = config_.replication;
  reply.meta.control.replicate_rounds = config_.replicate_rounds;
  reply.meta.recipient = node.id;
  Status s = postoffice_->SendControl(reply);
  LOG_IF(WARNING, !s.ok()) << "cannot send the node table to " << node.DebugString() << ": "
                           << s;
}

void SchedulerRole::Heard(int id) {
  std::atomic<int64_t>* heard = heard_ns_.load(std::memory_order_acquire);
  if (heard && id >= 0 && static_cast<size_t>(id) < heard_size_) {
    heard[id].store(NowNs(), std::memory_order_relaxed);
  }
}

void SchedulerRole::HandleHeartbeat(const Message& msg) {
  if (!live_.count(msg.meta.sender)) return;  // not a live node (anymore)
  if (!msg.meta.body.empty() && !reports_.Update(msg.meta.sender, msg.meta.body, Clock::now())) {
    LOG_IF(WARNING, refusal_log_.ShouldLog())
        << "node " << msg.meta.sender << " sent a heartbeat whose report does not parse; ignored";
  }
  Message reply;
  reply.meta.control.cmd = Control::kHeartbeat;
  reply.meta.control.membership_version = view_.version;
  reply.meta.control.leave_version = view_.leave_version;
  reply.meta.control.retiring = view_.retiring;
  // A node that missed a membership change gets the whole table with the reply.
  if (msg.meta.control.membership_version < view_.version) reply.meta.control.nodes = view_.nodes;
  reply.meta.recipient = msg.meta.sender;
  postoffice_->Send(reply, SendMode::kNonBlocking);
}

void SchedulerRole::AnswerDeadNode(int id) {
  const Node* node = view_.Find(id);
  if (!node || node->state != Node::kDead) return;
  Message reply;
  reply.meta.control.cmd = Control::kHeartbeat;
  reply.meta.control.membership_version = view_.version;
  reply.meta.control.leave_version = view_.leave_version;
  reply.meta.control.retiring = view_.retiring;
  reply.meta.control.nodes = view_.nodes;
  reply.meta.recipient = id;
  // Straight through the van: the runtime sends nothing to a dead node.
  reply.meta.sender = self_.id;
  postoffice_->van()->Send(reply, SendMode::kNonBlocking, Channel::kControl);
}

void SchedulerRole::CheckLiveness() {
  if (!complete_) return;
  const int64_t now = NowNs();
  const double gap = (now - last_check_ns_) / 1e9;
  last_check_ns_ = now;
  std::atomic<int64_t>* heard = heard_ns_.load(std::memory_order_acquire);
  if (gap > LivenessStallSeconds(config_.heartbeat_timeout_s)) {
    // The scheduler itself did not run (stopped, or starved of CPU): the silence it
    // would see is its own. Every node gets a new PS_HEARTBEAT_TIMEOUT.
    LOG(WARNING) << "the scheduler did not run for " << SecondsText(gap)
                 << " s (it was stopped, or starved of CPU); every node gets a new "
                    "PS_HEARTBEAT_TIMEOUT to be heard from";
    for (int id : live_) heard[id].store(now, std::memory_order_relaxed);
    // And the ring change under way as much more time (PS_RING_CHANGE_TIMEOUT).
    const auto lost = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(gap));
    add_started_ += lost;
    leave_started_ += lost;
    return;
  }
  // The workers of one process (instances) live and die with it: whatever one of them
  // sends counts for all.
  std::map<std::string, int64_t> by_process;
  for (int id : live_) {
    const Node* n = view_.Find(id);
    if (!n) continue;
    int64_t& latest = by_process[n->identity];
    latest = std::max(latest, heard[id].load(std::memory_order_relaxed));
  }
  const int64_t timeout_ns = static_cast<int64_t>(config_.heartbeat_timeout_s * 1e9);
  std::vector<int> silent;
  for (int id : live_) {
    const Node* n = view_.Find(id);
    if (n && now - by_process[n->identity] > timeout_ns) silent.push_back(id);
  }
  for (int id : silent) MarkGone(id, Node::kDead);
  CallOffLateRingChange();
  RetireLongDeadServer();
}

void SchedulerRole::MarkGone(int id, Node::State state) {
  if (!live_.erase(id)) return;  // not live: nothing changes
  const Node* node = view_.Find(id);
  if (node && node->state == Node::kEntering) return DropEnteringServer(*node, state);
  if (leaving_ == id) {
    // It died while leaving: it stays on the ring, dead, and its keys fail over.
    leaving_ = kEmpty;
    leave_receivers_.clear();
    leave_reported_.clear();
    view_.leave_version = 0;
  } else if (leaving_ != kEmpty && node && node->role == Node::kServerRole) {
    CallOffLeave("server " + std::to_string(node->rank) + " is gone");
  }
  if (node && node->role == Node::kServerRole && state == Node::kDead) {
    // A server that enters catches up from every live one: with one dead, some of its
    // keys are served by another now, which did not send them. It is not added.
    const std::string why = "server " + std::to_string(node->rank) + " died while it caught up";
    std::vector<int> entering;
    for (const Node& n : view_.nodes) {
      if (n.role == Node::kServerRole && n.state == Node::kEntering) entering.push_back(n.id);
    }
    for (int other : entering) CallOffAdd(other, why);  // changes view_.nodes: node is stale
  }
  for (Node& n : view_.nodes) {
    if (n.id == id) {
      n.state = state;
      if (state == Node::kDead && n.role == Node::kServerRole) dead_since_[id] = Clock::now();
      if (state == Node::kDead) {
        LOG(ERROR) << n.DebugString() << " has been silent for more than PS_HEARTBEAT_TIMEOUT="
                   << SecondsText(config_.heartbeat_timeout_s) << " s: declared dead";
      } else {
        LOG_IF(INFO, postoffice_->verbose()) << n.DebugString() << " left the job";
      }
    }
  }
  ++view_.version;
  postoffice_->InstallMembership(view_);
  // Once the scheduler is finalizing, everyone is leaving: nobody needs the news.
  if (!postoffice_->finalizing_) Broadcast();
  ReleaseCompleteBarriers();
  const Node* gone = view_.Find(id);
  if (gone && gone->role == Node::kServerRole) {
    if (state == Node::kDead && !postoffice_->finalizing_) {
      AdmitParkedReplacement(gone->rank);
    } else {
      RefuseParkedReplacement(gone->rank, "server " + std::to_string(gone->rank) +
                                              " left the job: its place is not free");
    }
  }
}

void SchedulerRole::Broadcast(int except_id) {
  for (const Node& n : view_.nodes) {
    if (n.id == self_.id || n.id == except_id || !n.alive()) continue;
    Message update;
    update.meta.control.cmd = Control::kMembership;
    update.meta.control.nodes = view_.nodes;
    update.meta.control.membership_version = view_.version;
    update.meta.control.leave_version = view_.leave_version;
    update.meta.control.retiring = view_.retiring;
    update.meta.recipient = n.id;
    postoffice_->SendControl(update);
  }
}

void SchedulerRole::HandleBarrier(const Message& msg) {
  int group = msg.meta.control.barrier_group;
  std::vector<int> members = view_.Ids(group, /*alive_only=*/true);
  if (std::find(members.begin(), members.end(), msg.meta.sender) == members.end()) {
    LOG_IF(WARNING, refusal_log_.ShouldLog())
        << "barrier request from node " << msg.meta.sender << " for group " << group
        << " it is not a live member of; ignored";
    return;
  }
  auto key = std::make_pair(group, msg.meta.customer_id);
  auto it = barriers_.find(key);
  if (it == barriers_.end()) it = barriers_.emplace(key, PendingBarrier{{}, Clock::now()}).first;
  it->second.arrived.insert(msg.meta.sender);
  ReleaseCompleteBarriers();
}

void SchedulerRole::ReleaseCompleteBarriers() {
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    std::vector<int> members = view_.Ids(it->first.first, /*alive_only=*/true);
    bool complete = std::all_of(members.begin(), members.end(),
                                [&](int id) { return it->second.arrived.count(id) > 0; });
    if (!complete) {
      ++it;
      continue;
    }
    for (int id : members) {
      Message release;
      release.meta.control.cmd = Control::kBarrier;
      release.meta.control.barrier_group = it->first.first;
      release.meta.customer_id = it->first.second;
      release.meta.request = false;
      release.meta.recipient = id;
      if (id == self_.id) {
        release.meta.sender = self_.id;
        postoffice_->HandleBarrierRelease(release);
      } else {
        Status s = postoffice_->SendControl(release);
        LOG_IF(WARNING, !s.ok()) << "cannot release node " << id << " from a barrier: " << s;
      }
    }
    it = barriers_.erase(it);
    reports_.CountBarrierRelease();
  }
}

void SchedulerRole::LogProgress() {
  Clock::time_point now = Clock::now();
  if (!complete_) {
    // Who is missing, by the launcher's rank hints where the nodes have them.
    std::ostringstream missing;
    int joined[2] = {0, 0};
    for (Node::Role role : {Node::kServerRole, Node::kWorkerRole}) {
      int wanted = role == Node::kWorkerRole ? config_.num_workers : config_.num_servers;
      std::vector<bool> seen(wanted, false);
      int& count = joined[role == Node::kWorkerRole];
      for (const Node& n : joining_) {
        if (n.role != role) continue;
        ++count;
        if (n.rank_hint >= 0 && n.rank_hint < wanted) seen[n.rank_hint] = true;
      }
      int unnamed = wanted - count;
      for (int r = 0; r < wanted && unnamed > 0; ++r) {
        if (seen[r]) continue;
        missing << " " << RoleName(role) << "-" << r;
        --unnamed;
      }
    }
    LOG(INFO) << "waiting for nodes to join ("
              << std::chrono::duration_cast<std::chrono::seconds>(now - begun_at_).count()
              << " s of PS_START_TIMEOUT=" << config_.start_timeout_s << " s): " << joined[1]
              << "/" << config_.num_workers << " workers and " << joined[0] << "/"
              << config_.num_servers << " servers have joined; missing (by PS_RANK):"
              << missing.str();
    return;
  }
  for (const auto& kv : barriers_) {
    if (now - kv.second.since < kSlowBarrier) continue;
    std::ostringstream missing;
    for (int id : view_.Ids(kv.first.first, true)) {
      if (!kv.second.arrived.count(id)) {
        const Node* n = view_.Find(id);
        missing << " " << (n ? RoleName(n->role) : "node") << "-" << (n ? n->rank : id);
      }
    }
    LOG(INFO) << "barrier of group " << kv.first.first << " (customer " << kv.first.second
              << ") has waited "
              << std::chrono::duration_cast<std::chrono::seconds>(now - kv.second.since).count()
              << " s for:" << missing.str();
  }
}

}  // namespace ps
