// OptimizerServer: round copies (PS_REPLICATE_ROUNDS with synchronous aggregation,
// docs/fault-tolerance.md). A key's owner answers a worker's push once the push is in
// its round, and copies nothing then; when the round closes, the owner sends the round
// (its sum and count) to the key's replica, which applies it as the owner did: one
// optimizer step with the same mean, so owner and replica stay identical, bit for bit.
//
// Until the replica has the round, the owner alone holds the pushes in it: every answer
// says below which clock this server's rounds are copied (KVServer::
// set_rounds_copied_below), and the worker keeps each push of a round not copied yet.
// When the owner dies, the replica serves its keys: it holds their rounds from the
// first one the owner did not copy to it (by the owner's shard: whole closes only),
// takes the pushes the workers send again into them, even of clocks it closed for its
// own keys, parks the requests that read those keys, and applies the rounds once every
// live worker said it sent again what it kept (Meta::rounds_resent), or after
// kRoundsResentWait.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ps/internal/event_loop.h"
#include "ps/internal/kv_message.h"
#include "ps/internal/membership.h"
#include "ps/internal/postoffice.h"
#include "ps/optimizer_server.h"
#include "round_copies.h"
#include "shard_thread.h"

namespace ps {
namespace {

// Values per round copy message (16 MiB of floats).
constexpr size_t kRoundCopyFloats = size_t{4} << 20;
// Rounds of one close a replica keeps until its last message (a close is one shard's
// keys: far fewer, unless a peer misbehaves).
constexpr size_t kMaxBufferedRounds = size_t{1} << 26;
// How long a request that a worker routed by a newer table waits for this server's (it
// is refused at the first check after that: 10 to 20 s), and how many wait at most.
constexpr std::chrono::seconds kTableWait{10};
constexpr size_t kMaxWaitingForTable = 65536;
// How long a dead owner's rounds are held for the workers' word at most: a worker that
// never says so (stopped, or a process of an older version) must not stop the keys.
constexpr std::chrono::seconds kRoundsResentWait{30};

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct OptimizerServer::RoundClose {
  int shard = 0;
  int64_t below = 0;
  std::atomic<int> outstanding{0};
  bool done = false;    // under rounds_mu_
  bool failed = false;  // under rounds_mu_: a live replica did not take it
};

bool OptimizerServer::CopiesRounds() const {
  return options_.sync_aggregation && Postoffice::Get()->replicate_rounds();
}

void OptimizerServer::CloseShardRounds(int shard, int64_t minimum, ShardStore& store) {
  if (!CopiesRounds()) return store.CloseRounds(minimum);
  std::vector<ClosedRound> closed;
  store.CloseRounds(minimum, &closed);
  SendRoundCopies(shard, std::max(minimum, store.closed_below()), &closed);
}

void OptimizerServer::SendRoundCopies(int shard, int64_t below,
                                      std::vector<ClosedRound>* closed) {
  if (stopping_.load(std::memory_order_acquire)) return;  // no answer would come
  Postoffice* po = Postoffice::Get();
  const MembershipView* view = po->membership();
  const int me = po->my_rank();
  auto close = std::make_shared<RoundClose>();
  close->shard = shard;
  close->below = below;
  close->outstanding.store(1);  // the sending's own, ended below
  {
    std::lock_guard<std::mutex> lock(rounds_mu_);
    round_closes_[shard].push_back(close);
  }
  std::map<int, std::vector<const ClosedRound*>> by_replica;
  std::vector<int> replicas;
  for (const ClosedRound& r : *closed) {
    if (r.key.chunk >= 0) {
      view->ring.ReplicasOfChunk(r.key.key, static_cast<uint32_t>(r.key.chunk),
                                 po->replication(), &replicas);
    } else {
      view->ring.ReplicasOf(r.key.key, po->replication(), &replicas);
    }
    for (int rank : replicas) {
      if (rank != me && view->IsAlive(Postoffice::ServerRankToID(rank))) {
        by_replica[rank].push_back(&r);
      }
    }
  }
  RoundCopyHeader header;
  header.shard = static_cast<uint32_t>(shard);
  header.shards = static_cast<uint32_t>(shards_.size());
  header.below = below;
  Customer* customer = server_->get_customer();
  for (auto& [rank, rounds] : by_replica) {
    std::vector<KVPairs<float>> parts;
    Status encoded = EncodeRoundCopies(header, rounds, kRoundCopyFloats, &parts);
    if (!encoded.ok()) {
      replica_losses_.fetch_add(1, std::memory_order_relaxed);
      LOG(ERROR) << "cannot copy the rounds closed below clock " << below << " to server " << rank
                 << ": " << encoded << "; its copies of those keys part from this server's";
      continue;
    }
    const int to = Postoffice::ServerRankToID(rank);
    const Node* replica = view->Find(to);
    for (const KVPairs<float>& part : parts) {
      Message msg = PushToServer(to, kRoundCopyCmd, part);
      const int timestamp = msg.meta.timestamp;
      const uint64_t id = msg.meta.request_id;
      {
        // The destructor ends the copies registered before it set stopping_ (under
        // this lock); none is registered after.
        std::lock_guard<std::mutex> lock(copies_mu_);
        if (stopping_.load(std::memory_order_acquire)) {
          customer->FinishRequest(timestamp, Status::Unavailable("the server is shutting down"));
          break;
        }
        close->outstanding.fetch_add(1);
        copies_in_flight_[id] = CopyInFlight{
            nullptr, timestamp, to, replica ? replica->identity : std::string(), false, close};
      }
      Status sent = po->Send(msg);
      if (!sent.ok()) EndCopy(id, sent, /*answered=*/false);
    }
  }
  round_copies_sent_.fetch_add(closed->size(), std::memory_order_relaxed);
  EndRoundCopy(close, -1, Status::OK(), true);
}

void OptimizerServer::EndRoundCopy(const std::shared_ptr<RoundClose>& close, int replica_rank,
                                   const Status& status, bool answered) {
  if (replica_rank >= 0 && !status.ok()) {
    const MembershipView* view = Postoffice::Get()->membership();
    const Node* replica = view->Find(Postoffice::ServerRankToID(replica_rank));
    if (answered || (replica && replica->alive())) {
      // A live replica lacks rounds the owner applied: their states part from here, and
      // the answers no longer say these rounds are copied (the workers keep the pushes).
      replica_losses_.fetch_add(1, std::memory_order_relaxed);
      LOG(ERROR) << "server " << replica_rank << " did not take the rounds closed below clock "
                 << close->below << ": " << status << "; its copies of those keys now part from "
                 << "this server's";
      std::lock_guard<std::mutex> lock(rounds_mu_);
      close->failed = true;
    }
  }
  if (close->outstanding.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  {
    std::lock_guard<std::mutex> lock(rounds_mu_);
    close->done = true;
    auto& closes = round_closes_[close->shard];
    int64_t& copied = rounds_copied_below_[close->shard];
    // A failed close stays: the shard's copied clock never passes it.
    while (!closes.empty() && closes.front()->done && !closes.front()->failed) {
      copied = std::max(copied, closes.front()->below);
      closes.pop_front();
    }
  }
  // Copies ended by the shutdown did not land: the answers still to go say nothing new.
  if (!stopping_.load(std::memory_order_acquire)) PublishRoundsCopied();
}

void OptimizerServer::PublishRoundsCopied() {
  std::lock_guard<std::mutex> lock(rounds_mu_);
  int64_t below = rounds_copied_below_.empty() ? 0 : rounds_copied_below_[0];
  for (int64_t b : rounds_copied_below_) below = std::min(below, b);
  server_->set_rounds_copied_below(below);
}

void OptimizerServer::TakeRoundCopy(const KVMeta& meta, const KVPairs<float>& data) {
  if (!IsServerId(meta.sender) || meta.pull) {
    return Refuse(meta, Status::InvalidArgument(
                            "push cmd 0x524e4443 is a round copy, which only servers send"));
  }
  const int origin = Postoffice::IDtoRank(meta.sender);
  if (held_origins_.count(origin) || rounds_released_.count(origin)) {
    // Its rounds are rebuilt here from the workers' pushes since the holds were set: a
    // copy still on its way when it died is not applied (its pushes come again).
    return Refuse(meta, Status::Unavailable("server " + std::to_string(origin) +
                                            " is dead here: its rounds are rebuilt"));
  }
  if (round_copies_broken_.count(origin)) {
    return Refuse(meta, Status::InvalidArgument(
                            "an earlier round copy from server " + std::to_string(origin) +
                            " was refused: none of its later ones is applied"));
  }
  // A message refused in the middle of a close would leave the rest to apply in part:
  // nothing more from that owner is applied (its answers then stop saying its rounds are
  // copied, and the workers keep its pushes).
  auto refuse_all = [&](const Status& why) {
    round_copies_broken_.insert(origin);
    for (auto it = round_copy_parts_.begin(); it != round_copy_parts_.end();) {
      it = it->first.first == origin ? round_copy_parts_.erase(it) : std::next(it);
    }
    LOG(ERROR) << "refused a round copy from server " << origin << ": " << why
               << "; its later round copies are refused too";
    Refuse(meta, why);
  };
  RoundCopyHeader header;
  std::vector<ClosedRound> rounds;
  Status decoded = DecodeRoundCopy(data, &header, &rounds);
  if (!decoded.ok()) return refuse_all(decoded);
  // A close in several messages is applied whole, at its last: should the owner die
  // before, none of it is, as the workers' pushes of those rounds come again.
  auto& parts = round_copy_parts_[{origin, header.shard}];
  if (!header.last) {
    if (parts.size() + rounds.size() > kMaxBufferedRounds) {
      return refuse_all(Status::InvalidArgument("a close of more than " +
                                                std::to_string(kMaxBufferedRounds) +
                                                " rounds in round copies"));
    }
    for (ClosedRound& r : rounds) parts.push_back(std::move(r));
    server_->Response(meta);
    answered_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!parts.empty()) {
    for (ClosedRound& r : rounds) parts.push_back(std::move(r));
    rounds = std::move(parts);
  }
  round_copy_parts_.erase({origin, header.shard});
  {
    // What a hold of the owner's keys starts from, should it die (HoldRoundsOf). The
    // rounds are queued on the shards before any hold that reads this.
    RoundOrigin& copied = round_origins_[origin];
    if (copied.shards != header.shards) {
      copied.shards = header.shards;
      copied.below.assign(header.shards, 0);
    }
    copied.below[header.shard] = std::max(copied.below[header.shard], header.below);
  }
  const size_t taken = rounds.size();
  const int threads = static_cast<int>(shards_.size());
  std::vector<std::vector<ClosedRound>> by_shard(threads);
  for (ClosedRound& r : rounds) {
    by_shard[ShardOf(r.key.key, r.key.chunk, threads)].push_back(std::move(r));
  }
  // Answered once every shard applied its share (the first failure wins).
  struct Taking {
    KVMeta meta;
    std::atomic<int> remaining{0};
    std::mutex mu;
    Status status;
  };
  auto taking = std::make_shared<Taking>();
  taking->meta = meta;
  for (const auto& shard : by_shard) taking->remaining += !shard.empty();
  for (int t = 0; t < threads; ++t) {
    if (by_shard[t].empty()) continue;
    auto mine = std::make_shared<std::vector<ClosedRound>>(std::move(by_shard[t]));
    shards_[t]->Enqueue([this, taking, mine](ShardStore& store) {
      Status failed;
      for (const ClosedRound& r : *mine) {
        Status s = store.ApplyRound(r.key, r.sum.data(), static_cast<uint32_t>(r.sum.size()),
                                    r.count);
        if (!s.ok() && failed.ok()) failed = s;
      }
      if (!failed.ok()) {
        std::lock_guard<std::mutex> lock(taking->mu);
        if (taking->status.ok()) taking->status = failed;
      }
      if (taking->remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
      if (taking->status.ok()) {
        server_->Response(taking->meta);
      } else {
        server_->ResponseError(taking->meta, taking->status);
      }
      answered_.fetch_add(1, std::memory_order_relaxed);
    });
  }
  round_copies_taken_.fetch_add(taken, std::memory_order_relaxed);
}

HoldFunction OptimizerServer::ByOwner(std::map<int, RoundOrigin> origins) {
  if (origins.empty()) return nullptr;
  auto ring = std::make_shared<const ConsistentHashRing>(Postoffice::Get()->membership()->ring);
  return [ring, origins](const StoreKey& key) -> int64_t {
    const int owner = key.chunk >= 0
                          ? ring->OwnerOfChunk(key.key, static_cast<uint32_t>(key.chunk))
                          : ring->OwnerOf(key.key);
    auto it = origins.find(owner);
    if (it == origins.end()) return -1;
    const RoundOrigin& copied = it->second;
    // No copy came from the owner: every round of its keys is rebuilt here.
    if (copied.shards == 0) return 0;
    return copied.below[ShardOf(key.key, key.chunk, static_cast<int>(copied.shards))];
  };
}

HoldFunction OptimizerServer::HoldsNow() const {
  std::map<int, RoundOrigin> origins;
  for (const auto& [rank, held] : held_origins_) origins[rank] = held.copied;
  return ByOwner(std::move(origins));
}

HoldFunction OptimizerServer::CopiedNow() const {
  std::map<int, RoundOrigin> origins = rounds_released_;
  for (const auto& [rank, held] : held_origins_) origins[rank] = held.copied;
  return ByOwner(std::move(origins));
}

void OptimizerServer::InstallHolds(bool release) {
  HoldFunction holds = HoldsNow(), copied = CopiedNow();
  for (size_t t = 0; t < shards_.size(); ++t) {
    shards_[t]->Enqueue([this, t, holds, copied, release](ShardStore& store) {
      store.SetCopied(copied);
      if (!release) return store.SetHolds(holds);
      std::vector<ClosedRound> closed;
      store.ReleaseHolds(holds, &closed);
      LOG_IF(INFO, !closed.empty()) << "shard " << t << " applied " << closed.size()
                                    << " rebuilt round(s) of a dead owner's keys";
      SendRoundCopies(static_cast<int>(t), store.closed_below(), &closed);
    });
  }
}

void OptimizerServer::HoldRoundsOf(int dead_rank) {
  if (!CopiesRounds() || held_origins_.count(dead_rank) || rounds_released_.count(dead_rank) ||
      stopping_.load()) {
    return;
  }
  for (auto it = round_copy_parts_.begin(); it != round_copy_parts_.end();) {
    it = it->first.first == dead_rank ? round_copy_parts_.erase(it) : std::next(it);
  }
  HeldOrigin& held = held_origins_[dead_rank];
  auto copied = round_origins_.find(dead_rank);
  if (copied != round_origins_.end()) held.copied = copied->second;
  held.generation = ++hold_generation_;
  InstallHolds(/*release=*/false);
  LOG(WARNING) << "server " << dead_rank << " died: this server rebuilds the rounds of its keys "
               << "that it had not copied here, from the pushes the workers kept, and holds "
               << "them until every worker says it sent them again";
  std::shared_ptr<Lifeline> lifeline = lifeline_;
  const uint64_t generation = held.generation;
  Postoffice::Get()->control_loop()->RunAfter(kRoundsResentWait, [this, lifeline, dead_rank,
                                                                  generation] {
    // Not posted only when the van stops: the shards then answer the parked requests.
    Postoffice::Get()->van()->RunOnReceiver(Channel::kData, [this, lifeline, dead_rank,
                                                             generation] {
      std::lock_guard<std::mutex> alive(lifeline->mu);
      if (!lifeline->alive) return;
      auto it = held_origins_.find(dead_rank);
      if (it == held_origins_.end() || it->second.generation != generation) return;
      std::string missing;
      for (int worker : LiveWorkers()) {
        if (!rounds_resent_[dead_rank].count(worker)) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(worker);
        }
      }
      LOG(ERROR) << "the workers (nodes " << missing << ") did not say within "
                 << kRoundsResentWait.count() << " s that they sent again the pushes they kept "
                 << "for dead server " << dead_rank << ": its rounds are applied without "
                 << "them, and updates of theirs may be lost";
      ReleaseRoundsOf(dead_rank);
    });
  });
  // Every worker may have said so already; checked once the request being handled (it
  // may be a push sent again) and those waiting for this table are queued.
  Postoffice::Get()->van()->RunOnReceiver(Channel::kData, [this, lifeline] {
    std::lock_guard<std::mutex> alive(lifeline->mu);
    if (lifeline->alive) CheckHeldRounds();
  });
}

bool OptimizerServer::PlacedByMyTable(const KVMeta& meta, const KVPairs<float>& data) {
  const MembershipView* view = Postoffice::Get()->membership();
  const ConsistentHashRing& ring = view->ring;
  if (ring.failed_over()) {
    for (int rank : ring.FailedOverRanks()) HoldRoundsOf(rank);
  }
  const int me = Postoffice::Get()->my_rank();
  const size_t n = data.keys.size();
  int elsewhere = -1;
  if (meta.chunk >= 0) {
    if (n > 0) {
      const int server = ring.ServerOfChunk(data.keys[0], static_cast<uint32_t>(meta.chunk));
      if (server != me) elsewhere = server;
    }
  } else if (n > 0) {
    thread_local std::vector<uint16_t> servers;
    servers.resize(n);
    ring.ServersOf(data.keys.data(), n, servers.data());
    for (size_t i = 0; i < n && elsewhere < 0; ++i) {
      if (servers[i] != me) elsewhere = servers[i];
    }
  }
  if (elsewhere < 0) return true;
  WaitForTable(meta, data);
  return false;
}

void OptimizerServer::WaitForTable(const KVMeta& meta, const KVPairs<float>& data) {
  if (waiting_for_table_.size() >= kMaxWaitingForTable) {
    return Refuse(meta, Status::Unavailable(
                            "this server's table gives keys of this request to other servers, "
                            "and " + std::to_string(kMaxWaitingForTable) +
                            " requests already wait for a table that gives them here"));
  }
  WaitingForTable w;
  w.meta = meta;
  w.data = data;
  w.since = SteadySeconds();
  waiting_for_table_.push_back(std::move(w));
  LOG_IF(INFO, waiting_for_table_.size() == 1)
      << "a request from node " << meta.sender << " holds keys this server's table gives to "
      << "others: it waits for the next table (a server died, and the worker heard first)";
  ArmTableWait();
}

void OptimizerServer::ArmTableWait() {
  if (table_wait_armed_ || waiting_for_table_.empty()) return;
  table_wait_armed_ = true;
  std::shared_ptr<Lifeline> lifeline = lifeline_;
  Postoffice::Get()->control_loop()->RunAfter(kTableWait, [this, lifeline] {
    Postoffice::Get()->van()->RunOnReceiver(Channel::kData, [this, lifeline] {
      std::lock_guard<std::mutex> alive(lifeline->mu);
      if (!lifeline->alive) return;
      table_wait_armed_ = false;
      RetryWaitingForTable(/*expire=*/true);
    });
  });
}

void OptimizerServer::RetryWaitingForTable(bool expire) {
  std::vector<WaitingForTable> waiting;
  waiting.swap(waiting_for_table_);
  const double now = SteadySeconds();
  const double wait = std::chrono::duration<double>(kTableWait).count();
  for (WaitingForTable& w : waiting) {
    if (w.rounds_resent_for >= 0) {
      OnRoundsResent(w.meta.sender, w.rounds_resent_for);  // after the requests before it
      continue;
    }
    if (expire && now - w.since >= wait) {
      Refuse(w.meta, Status::Unavailable(
                         "this server's table gives keys of this request to other servers, "
                         "and no table that gives them here came within " +
                         std::to_string(kTableWait.count()) + " s"));
      continue;
    }
    const size_t before = waiting_for_table_.size();
    try {
      Handle(w.meta, w.data);  // may wait again
    } catch (const std::exception& e) {
      Refuse(w.meta, Status::Internal(std::string("server handle failed: ") + e.what()));
    } catch (...) {
      Refuse(w.meta, Status::Internal("server handle failed: an exception that is not a "
                                      "std::exception"));
    }
    // Waiting again: since its first wait.
    if (waiting_for_table_.size() > before) waiting_for_table_.back().since = w.since;
  }
  ArmTableWait();
}

std::vector<int> OptimizerServer::LiveWorkers() const {
  std::vector<int> workers;
  for (const Node& n : Postoffice::Get()->membership()->nodes) {
    if (n.role == Node::kWorkerRole && n.alive()) workers.push_back(n.id);
  }
  return workers;
}

void OptimizerServer::OnRoundsResent(int worker, int dead_rank) {
  if (!IsWorkerId(worker) || dead_rank < 0) return;
  for (const WaitingForTable& w : waiting_for_table_) {
    if (w.meta.sender != worker) continue;
    // A push it sent before waits for this server's table: the word counts after it.
    WaitingForTable word;
    word.meta.sender = worker;
    word.rounds_resent_for = dead_rank;
    word.since = SteadySeconds();
    waiting_for_table_.push_back(std::move(word));
    return;
  }
  rounds_resent_[dead_rank].insert(worker);
  CheckHeldRounds();
}

void OptimizerServer::CheckHeldRounds() {
  std::vector<int> done;
  const std::vector<int> workers = LiveWorkers();
  for (const auto& [rank, held] : held_origins_) {
    const std::set<int>& said = rounds_resent_[rank];
    bool all = true;
    for (int worker : workers) all = all && said.count(worker) > 0;
    if (all) done.push_back(rank);
  }
  for (int rank : done) {
    LOG(INFO) << "every live worker sent again the pushes it kept for dead server " << rank
              << ": the rounds of its keys rebuilt here are applied";
    ReleaseRoundsOf(rank);
  }
}

void OptimizerServer::ReleaseRoundsOf(int dead_rank) {
  auto held = held_origins_.find(dead_rank);
  if (held == held_origins_.end()) return;
  rounds_released_[dead_rank] = held->second.copied;
  held_origins_.erase(held);
  InstallHolds(/*release=*/true);
}

void OptimizerServer::NoteDeadServers(const MembershipView& view) {
  std::vector<int> dead;
  for (const Node& n : view.nodes) {
    if (n.role != Node::kServerRole || n.state != Node::kDead) continue;
    if (dead_servers_seen_.insert(n.rank).second) dead.push_back(n.rank);
  }
  std::shared_ptr<Lifeline> lifeline = lifeline_;
  const bool posted = Postoffice::Get()->van()->RunOnReceiver(Channel::kData, [this, lifeline,
                                                                               dead] {
    std::lock_guard<std::mutex> alive(lifeline->mu);
    if (!lifeline->alive) return;
    for (int rank : dead) HoldRoundsOf(rank);
    if (!waiting_for_table_.empty()) RetryWaitingForTable(/*expire=*/false);
    CheckHeldRounds();  // a worker may have died
  });
  LOG_IF(ERROR, !posted && !dead.empty())
      << "cannot hold the rounds of the dead servers' keys: the van does not run";
}

}  // namespace ps
