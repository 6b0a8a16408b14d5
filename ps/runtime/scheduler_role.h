// SchedulerRole: what the scheduler node does for the job. It admits nodes (with the
// job's token, refusing surplus ones at once), assigns their ids and ranks, owns the
// membership (declares silent nodes dead, records nodes that leave, lets a new server
// take a dead server's place, broadcasts every change) and releases barriers among the
// live members of a group. It keeps what the nodes report with their heartbeats, for
// the stall report and the metrics endpoint (scheduler_observe.cc).
//
// Thread safety: used only on the scheduler's control loop (EventLoop) thread, except
// Heard (any thread).
#ifndef HERDPS_PS_SCHEDULER_ROLE_H_
#define HERDPS_PS_SCHEDULER_ROLE_H_

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ps/internal/config.h"
#include "ps/internal/log_limiter.h"
#include "ps/internal/membership.h"
#include "ps/internal/message.h"
#include "job_reports.h"
#include "metrics_endpoint.h"
#include "stall_report.h"

namespace ps {

class Postoffice;

class SchedulerRole {
 public:
  using Clock = std::chrono::steady_clock;
  SchedulerRole(Postoffice* postoffice, const Config& config, const Node& self);

  // Learns the scheduler's own endpoints (known once the van runs) and arms the
  // timers (join progress, liveness). Once; joins that come before it wait for it.
  void Begin(const Node& self);
  // A control message for the scheduler (joins, heartbeats, barriers, leaves).
  void Handle(const Message& msg);
  // For the receive path, on any thread: node `id` was heard from (any message of a
  // live member counts for its liveness, not only heartbeats).
  void Heard(int id);
  // A heartbeat from a node already declared dead (it was stopped, or cut off, and runs
  // again): answers with the table, in which it reads that it is dead.
  void AnswerDeadNode(int id);
  // Starts the metrics endpoint when PS_METRICS_PORT is set (scheduler_observe.cc);
  // Unavailable naming the address when it cannot listen.
  Status StartMetrics();

 private:
  struct PendingBarrier {
    std::set<int> arrived;
    Clock::time_point since;
  };
  void HandleJoin(const Message& msg);
  void Refuse(const Node& node, const std::string& why);
  void AssignAndBroadcast();
  // A server that joins a complete job takes the place of a dead server: the one of its
  // PS_RANK, else the lowest dead rank. It gets that server's id and rank (so its keys)
  // with its own endpoints and identity, under a new membership version that every
  // node hears of (scheduler_replacement.cc). One whose PS_RANK names a server not yet
  // declared dead waits (parked) until it is. With replication it is joining, not live,
  // until it caught up (HandleCaughtUp). False, with nothing changed and *why saying
  // what to tell the node, when there is no such place.
  bool AdmitReplacement(const Node& node, std::string* why);
  // A server that joins a complete job with no dead server's place to take (none is
  // dead, or its PS_RANK is above every rank) is added to the job
  // (scheduler_growth.cc): it gets the next rank and enters; the ring places keys on it
  // once it caught up (HandleCaughtUp). One at a time: another waits (parked) until the
  // one entering is live or gone. False, with *why, when the job cannot grow.
  bool AdmitAddedServer(const Node& node, std::string* why);
  // The next server waiting to be added, if any still asks.
  void AdmitWaitingServer();
  // An entering server died or left before it caught up: it leaves the table (it never
  // held a key), and the ring stays as it was.
  void DropEnteringServer(const Node& node, Node::State state);
  // Server `id` enters and will not catch up (another server is gone, or its deadline
  // passed; `why` says which): it leaves the table and is told (it gives up and exits 1;
  // started again, it enters anew). The caller publishes.
  void CallOffAdd(int id, const std::string& why);
  // Tells `told` (out of the table, marked dead) that it was not added: the table of
  // `version` with it in.
  void TellNotAdded(const Node& told, uint64_t version);
  // Takes node `id` out of view_.nodes (its entry is gone; pointers into it are stale).
  void EraseFromTable(int id);
  // A new server that caught up from its replicas (Control::kCaughtUp): it is live, and
  // its keys are its own again; an added server joins the ring. During a leave: a live
  // server that holds the keys the leaving one gives it.
  void HandleCaughtUp(const Message& msg);
  // A server asks to leave the running job (Control::kWithdraw, scheduler_withdraw.cc):
  // once every server is live it is marked leaving, the others take its keys over, and
  // when every live server has said it holds them it leaves the table (FinishLeave). A
  // server death meanwhile calls the leave off (CallOffLeave); the server asks again.
  void HandleWithdraw(const Message& msg);
  // Server `id` (marked leaving, or named retiring) leaves under a new version that
  // names the round: every live server takes its keys; installed, not yet broadcast.
  void BeginLeaveRound(int id);
  void FinishLeave();
  void CallOffLeave(const std::string& why);
  // Re-replication (scheduler_retire.cc): once the only dead server has been dead for
  // PS_REREPLICATE_AFTER, with no new server in its place, it is retired as a server
  // leaves, the live servers sending its keys; FinishLeave then takes it out of the
  // table. A retire not done within its deadline is called off and tried again later.
  // Called with each liveness check.
  void RetireLongDeadServer();
  // An add or a leave not done within RingChangeTimeoutSeconds is called off, as a death
  // would (RetireLongDeadServer calls a retire off at the same deadline, and tries it
  // again later); the leaving server asks again. Called with each liveness check.
  void CallOffLateRingChange();
  // Tells server `id` it has left the job.
  void AnswerWithdrawn(int id);

 public:
  // A message from node `id`, which is not in the table, on a connection of process
  // `identity`: if that is a server that left the job and missed the answer, it gets
  // it again (it asks with each heartbeat until it has it).
  void AnswerIfWithdrawn(int id, const std::string& identity);

 private:
  // Server `rank` was declared dead: a replacement waiting for its place takes it.
  void AdmitParkedReplacement(int rank);
  // Server `rank` left (or the job ends): a replacement waiting for its place is refused.
  void RefuseParkedReplacement(int rank, const std::string& why);
  void SendTable(const Node& node, bool replaces_dead_node = false);
  void HandleHeartbeat(const Message& msg);
  void HandleBarrier(const Message& msg);
  // Releases every pending barrier whose live members have all arrived.
  void ReleaseCompleteBarriers();
  void CheckLiveness();
  void LogProgress();
  // The stall report (scheduler_observe.cc): keeps the reports' copy of the membership
  // current, and logs who waits for whom once per stall (PS_STALL_REPORT) and when the
  // process got SIGUSR1.
  void CheckStall();
  std::vector<std::string> WhoWaitsForWhom(const JobReports::Snapshot& snapshot);
  // Makes SIGUSR1 ask for the report (tracker/launch forwards its own SIGUSR1), unless
  // the process has a handler of its own for it.
  static void ListenForSigusr1();
  // Marks a node dead or left, publishes and broadcasts the new membership.
  void MarkGone(int id, Node::State state);
  // Sends the membership to every live node but the scheduler and `except_id`.
  void Broadcast(int except_id = kEmpty);

  Postoffice* postoffice_;
  Config config_;
  Node self_;
  std::vector<Node> joining_;  // arrival order, until the job is complete
  bool complete_ = false;
  bool begun_ = false;
  Clock::time_point begun_at_;
  MembershipView view_;  // the truth, once complete
  std::set<int> live_;  // live nodes whose liveness is checked, by id
  // When each node id was last heard from (steady clock, ns), written by the receive
  // threads: an array indexed by id, published once the job is complete.
  std::unique_ptr<std::atomic<int64_t>[]> heard_storage_;
  std::atomic<std::atomic<int64_t>*> heard_ns_{nullptr};
  size_t heard_size_ = 0;
  int64_t last_check_ns_ = 0;  // CheckLiveness's previous run
  // Entries of each (group, customer_id) barrier not released yet.
  std::map<std::pair<int, int>, PendingBarrier> barriers_;
  std::set<int> replacements_;  // ids whose current node took a dead node's place
  // By rank: a replacement waiting for that server's death, and when it last asked.
  struct Parked {
    Node node;
    Clock::time_point heard;
    // Since when it waits for another new server to catch up (PS_REPLICATION >= 3).
    Clock::time_point behind_since{};
  };
  static constexpr std::chrono::seconds kParkedSilence{3};  // joins repeat every 1 s
  // How long a new server waits for another one in a dead one's place to catch up
  // before it is admitted anyway (one whose catch-up failed stays joining).
  static constexpr std::chrono::seconds kMostBehindJoiner{60};
  std::map<int, Parked> parked_;
  // The server leaving the job (kEmpty: none), the live servers that take its keys and
  // those that said they hold them; the servers that left this way (id -> identity).
  int leaving_ = kEmpty;
  std::set<int> leave_receivers_;
  std::set<int> leave_reported_;
  std::map<int, std::string> withdrawn_;
  std::map<int, Node> called_off_;  // entering servers not added (CallOffAdd), as told
  std::set<int> withdraw_waits_logged_;  // servers told once why their leave waits
  // When each dead server was declared dead (re-replication), and those whose keys were
  // said once to wait for a new server.
  std::map<int, Clock::time_point> dead_since_;
  std::set<int> retire_waits_logged_;
  // When the ring change under way began: a leave's round or a retire (BeginLeaveRound),
  // and a server's add (AdmitAddedServer).
  Clock::time_point leave_started_;
  Clock::time_point add_started_;
  // Servers waiting to be added while another one enters, by identity.
  std::map<std::string, Parked> waiting_adds_;
  // How many servers may be added to a running job over its life, and the rank the next
  // one gets at least.
  static constexpr int kMaxAddedServers = 1024;
  int next_added_rank_ = 0;
  JobReports reports_;  // what the nodes last reported (heartbeats, leaves)
  StallReport stall_;
  std::unique_ptr<MetricsEndpoint> metrics_;  // PS_METRICS_PORT
  int refusal_slot_ = 0;  // cycles the temporary ids used to answer refused joins
  LogLimiter refusal_log_;
};

}  // namespace ps

#endif  // HERDPS_PS_SCHEDULER_ROLE_H_
