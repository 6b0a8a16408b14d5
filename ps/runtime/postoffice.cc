// Postoffice: sending, barriers, customers and membership. Start is in
// postoffice_start.cc, Finalize in postoffice_leave.cc, the receive path in
// postoffice_receive.cc, the control loop's work in postoffice_control.cc.
#include "ps/internal/postoffice.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "barrier_releases.h"
#include "customer_directory.h"
#include "drop_injector.h"
#include "idle_trimmer.h"
#include "inbound_channel.h"
#include "join_state.h"
#include "ps/internal/event_loop.h"
#include "ps/internal/reorder_window.h"
#include "ps/internal/resend_outbox.h"
#include "scheduler_role.h"
#include "scheduler_watch.h"
#include "worker_instances.h"

namespace ps {
namespace {

// PS_RESEND: the message `unsent` on `channel` never left. It is the caller's failure to
// report, never resent; its sequence is taken, though, and the recipient would hold
// everything after it for good: a skip of that sequence takes its place, sent now and
// resent until ACKed.
void SkipUnsent(Van* van, ResendOutbox* outbox, const ResendOutbox::Unsent& unsent,
                Channel channel) {
  Message skip;
  if (outbox->Skip(unsent, std::chrono::steady_clock::now(), &skip)) {
    van->Send(skip, SendMode::kNonBlocking, channel);
  }
}

}  // namespace

Postoffice::Postoffice()
    : join_(std::make_unique<JoinState>()),
      barriers_(std::make_unique<BarrierReleases>()),
      instances_(std::make_unique<WorkerInstances>()),
      scheduler_watch_(std::make_unique<SchedulerWatch>()),
      idle_trimmer_(std::make_unique<IdleTrimmer>()),
      inbound_{std::make_unique<InboundChannel>(), std::make_unique<InboundChannel>()},
      drops_(std::make_unique<DropInjector>()),
      directory_(std::make_unique<CustomerDirectory>()) {}

Postoffice* Postoffice::Get() {
  static Postoffice* instance = new Postoffice();  // never destroyed: used until exit
  return instance;
}

bool Postoffice::gave_up() const { return join_->gave_up(); }

void Postoffice::Barrier(int customer_id, int node_group) {
  if (!started()) throw Error("Barrier called before ps::Start");
  if (withdrawn_.load()) return;  // out of the job (Withdraw): it waits for nobody
  std::vector<int> members = GetNodeIDs(node_group);
  if (std::find(members.begin(), members.end(), my_node_.id) == members.end()) {
    throw Error("Barrier: this node (" + my_node_.DebugString() + ") is not in group " +
                std::to_string(node_group));
  }
  if (members.size() == 1) return;
  // In a process of several workers each customer is its own worker, and its
  // barriers are that worker's (the customer id no longer tells them apart).
  const int me = InstanceIdOf(customer_id);
  const int barrier_customer = instances_->any() ? 0 : customer_id;
  const BarrierReleases::Key key{node_group, barrier_customer, me};
  const uint64_t seen = barriers_->Count(key);
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
    // This node's work before the barrier is done: the memory kept for its bursts
    // goes back while the others catch up (at most once per PS_IDLE_TRIM_MS).
    TrimMemoryAtBarrier();
  }
  Status released = barriers_->WaitBeyond(key, seen);
  if (!released.ok()) throw Error("Barrier: " + released.message());
  // A node that entered before its traffic ended (a server waiting for its workers'
  // barrier) gives back what that traffic left, before the next phase starts.
  TrimMemoryAtBarrier();
}

Status Postoffice::PrepareSend(Message& msg) {
  if (!IsMyInstanceId(msg.meta.sender)) msg.meta.sender = my_node_.id;
  msg.meta.sender_incarnation = process_incarnation_;
  if (join_->gave_up()) {
    return Status::Unavailable(join_->why_gave_up());
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
  // Not due for resend while this send runs (it may block for long): a resend must
  // not deliver a message whose caller may yet be told it failed.
  ResendOutbox::Unsent unsent = outbox->TrackUnsent(&msg);
  Status s = van_->Send(msg, mode, channel);
  if (s.ok()) {
    outbox->Sent(unsent, std::chrono::steady_clock::now());
  } else {
    SkipUnsent(van_.get(), outbox, unsent, channel);
  }
  return s;
}

std::vector<SArray<char>> Postoffice::LendSendBuffers(int recipient,
                                                      const std::vector<uint64_t>& sizes) {
  if (!van_ || outbox_[static_cast<int>(Channel::kData)] || recipient == my_node_.id) {
    return std::vector<SArray<char>>(sizes.size());
  }
  return van_->LendSendBuffers(my_node_.id, recipient, sizes);
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
  // With resend on, a message that finds the peer's queue full (or no connection) is
  // still tracked and goes out with the next resend. One that can never leave (over
  // PS_MAX_MESSAGE_BYTES, or not encodable) fails here, and a skip takes its place.
  Status ready = PrepareSend(msg);
  if (!ready.ok()) return ready;
  ResendOutbox::Unsent unsent = outbox->TrackUnsent(&msg);
  Status s = van_->Send(msg, SendMode::kNonBlocking, channel);
  if (s.ok() || s.code() == Status::Code::kUnavailable) {
    outbox->Sent(unsent, std::chrono::steady_clock::now());
    return Status::OK();
  }
  SkipUnsent(van_.get(), outbox, unsent, channel);
  return s;
}

std::vector<int> Postoffice::GetNodeIDs(int node_group) const {
  return membership_.Get()->Ids(node_group, /*alive_only=*/true);
}

NodeStats Postoffice::stats() const {
  NodeStats s;
  s.forged_messages = forged_.load();
  s.from_gone_nodes = from_gone_.load();
  s.injected_drops = drops_->drops();
  s.resent_messages = resent_.load();
  s.duplicates = duplicates_.load();
  s.expired_early_messages = expired_early_.load();
  s.before_table = before_table_.load();
  s.refused_joins = refused_joins_.load();
  for (int c = 0; c < 2; ++c) {
    if (outbox_[c]) s.awaiting_ack += outbox_[c]->Size();
    s.held_out_of_order += inbound_[c]->held_out_of_order();
  }
  return s;
}

void Postoffice::InstallMembership(MembershipView view) {
  // With replication, a dead server's keys go to their first live replica; so do those
  // of a new server in a dead one's place until it has caught up (joining): it does not
  // hold them yet.
  const MembershipView* old = membership_.Get();
  // Every node places keys by the same table (a server added to the job joins the ring
  // once it caught up): built here, from the states.
  view.PlaceKeys(key_placement_, config_.ring_virtual_nodes);
  int slots = 0;
  for (const Node& n : view.nodes) {
    if (n.role == Node::kServerRole) slots = std::max(slots, n.rank + 1);
  }
  // Before the view is published: a reader that sees the view sees the count.
  if (slots > server_slots_.load()) server_slots_.store(slots);
  std::vector<int> dead_servers;
  std::set<int> down;  // servers down in this view or the one before
  for (const MembershipView* v : {old, static_cast<const MembershipView*>(&view)}) {
    for (const Node& n : v->nodes) {
      const bool not_serving = n.state == Node::kDead || (n.state == Node::kJoining && v->version);
      if (n.role != Node::kServerRole || !not_serving) continue;
      down.insert(n.rank);
      if (v == &view) dead_servers.push_back(n.rank);
    }
  }
  if (static_cast<int>(down.size()) > most_servers_down_.load()) most_servers_down_ = down.size();
  view.ring = view.ring.WithFailover(replication_, dead_servers);
  std::vector<Node> gone;
  std::vector<Node> replaced;  // live before and now, but another process (below)
  // Endpoints of new processes connected afresh so far: node ids of one process share
  // its connections, replaced once.
  std::set<std::pair<std::string, std::string>> reconnected;
  for (const Node& n : view.nodes) {
    if (n.alive()) van_->AdmitIdentity(n.identity);
    const Node* before = old->Find(n.id);
    if (n.id == my_node_.id) continue;
    const bool new_process =
        n.alive() && before && before->alive() && before->identity != n.identity;
    if (new_process) {
      // A new process in a dead node's place, and this node missed the version that
      // said it died: the old process goes first (what is queued or numbered for it;
      // its requests below), as if that version had come. Its connections are replaced
      // at once (Reconnect, below): a send meanwhile, which reads the table before this
      // one, must never find the node unconnected and take it for a live one that
      // failed it.
      Node old_process = *before;
      old_process.state = Node::kDead;
      replaced.push_back(old_process);
      for (auto& outbox : outbox_) {
        if (outbox) outbox->DropPeer(n.id);
      }
    }
    // A node that is back (a new process in a dead node's place) is connected afresh:
    // its old connections went when it died.
    if (n.alive() && (!before || !before->alive() || before->identity != n.identity ||
                      before->endpoint != n.endpoint ||
                      before->control_endpoint != n.control_endpoint)) {
      const bool fresh = new_process && !is_scheduler() &&
                         reconnected.insert({n.endpoint, n.control_endpoint}).second;
      Status s = fresh ? van_->Reconnect(n.id, n.endpoint, n.control_endpoint)
                       : van_->Connect(n.id, n.endpoint, n.control_endpoint);
      if (!s.ok()) LOG(ERROR) << "cannot connect to " << n.DebugString() << ": " << s;
    }
    if (!n.alive() && (!before || before->alive())) gone.push_back(n);
  }
  std::vector<int> not_added;  // entering servers out of the table: dead, or called off
  for (const Node& n : old->nodes) {
    // Out of the table: an added server that died before it caught up (it never held a
    // key) goes as a dead node does, its connection too once the table says so (below:
    // a send that finds it gone must read a table without it, else it would take the
    // server for a live one that failed it); a server that left the job once the others
    // held its keys (Withdraw), as a node that left.
    if (n.alive() && n.id != my_node_.id && !view.Find(n.id)) {
      gone.push_back(n);
      gone.back().state = n.state == Node::kEntering ? Node::kDead : Node::kLeft;
      if (n.state == Node::kEntering) not_added.push_back(n.id);
    }
  }
  bool first = old->version == 0;
  for (const Node& n : view.nodes) {
    if (n.id == my_node_.id) {
      // Other threads read my_node_ once the node has joined: it is written only by
      // the first table (before joined_ is published); later views only change state.
      if (first) my_node_ = n;
      const Node* was = old->Find(n.id);
      if (n.state == Node::kDead && was && was->state == Node::kEntering && !finalizing_) {
        membership_.Publish(std::move(view));
        GiveUp("this server was not added to the job: the scheduler called its add off (a "
               "server died while it caught up, or it did not hold its keys within "
               "PS_RING_CHANGE_TIMEOUT; the scheduler's log says which); start it again "
               "once every server of the job is live");
        return;
      }
      if (n.state == Node::kDead && !finalizing_) {
        membership_.Publish(std::move(view));
        const double stalled = scheduler_watch_->stalled_for_s();
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
  // The requests meant for a replaced process: those registered so far, just before the
  // table that names the new one is out. Any later one is sent over the new connections
  // (Reconnect, above), to the new process, whose answer it waits for (a replica's copy
  // sent by a thread that reads this table).
  std::map<std::pair<int, int>, uint64_t> meant_for_old_process;
  if (!replaced.empty()) {
    directory_->ForEach([&meant_for_old_process](int app, int customer, Customer* c) {
      meant_for_old_process[{app, customer}] = c->NextRequestId();
      return true;
    });
  }
  const MembershipView* installed = membership_.Publish(std::move(view));
  {
    std::lock_guard<std::mutex> lock(listeners_mu_);
    for (auto& listener : membership_listeners_) listener.second(*installed);
  }
  if (first) return;
  for (const Node& n : gone) {
    const bool entering =
        std::find(not_added.begin(), not_added.end(), n.id) != not_added.end();
    if (entering) {
      LOG_IF(WARNING, !is_scheduler()) << n.DebugString() << " is out of the job before it "
                                       << "was added (it ended, or its add was called off)";
    } else if (n.state == Node::kDead) {
      // The scheduler has said it already, in its own words.
      LOG_IF(ERROR, !is_scheduler())
          << n.DebugString() << " is dead (silent for more than PS_HEARTBEAT_TIMEOUT="
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
        (entering ? std::string("is out of the job before it was added")
         : n.state == Node::kDead ? "is dead: silent for more than PS_HEARTBEAT_TIMEOUT=" +
                                        SecondsText(config_.heartbeat_timeout_s) + " s"
                                  : std::string("left the job")));
    directory_->ForEach([&n, &why](int, int, Customer* customer) {
      customer->AbortRequestsWaitingFor(n, why);
      return true;
    });
  }
  for (const Node& n : replaced) {
    // Its requests in flight were sent before this node knew of the new process.
    Status why = Status::Unavailable(std::string(RoleName(n.role)) + " " +
                                     std::to_string(n.rank) + " (node " + std::to_string(n.id) +
                                     ", " + n.endpoint + ") died and was replaced");
    LOG(WARNING) << why.message();
    directory_->ForEach([&n, &why, &meant_for_old_process](int app, int id, Customer* customer) {
      auto bound = meant_for_old_process.find({app, id});
      // A customer opened since registered nothing before the new process was known.
      if (bound != meant_for_old_process.end()) {
        customer->AbortRequestsWaitingFor(n, why, bound->second);
      }
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
  directory_->Add(customer, join_->joined());
}

void Postoffice::RemoveCustomer(Customer* customer) { directory_->Remove(customer); }

}  // namespace ps
