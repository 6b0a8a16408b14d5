// OptimizerServer: catching up a new server in a dead one's place (PS_REPLICATION >= 2),
// and moving keys while a server is added or leaves (any PS_REPLICATION;
// docs/fault-tolerance.md).
//
// The scheduler admits the new server as joining: every node connects to it, and each
// live server forwards it the copies of the pushes it takes on keys the two hold, while
// the workers still send its keys to their replicas. Each live server also sends it
// every key the two hold (values, optimizer state, step count, open rounds), again if
// a server is failed over after it listed them (PS_REPLICATION >= 3, TopUpCatchUps): it
// lists them, then sends them a slice at a time, each slice read on the data receive
// thread, paced by PS_CATCH_UP_RATE, taking requests between slices. Each record is a
// cut: the copies planned before it are in it, those planned after reach the new
// server after it (one connection, in order). The new server sets each key to what it
// is sent, so a copy that came before the cut is neither lost nor counted twice. Once
// every live server has said it sent everything, the new server tells the scheduler,
// which makes it live: its keys come back to it.
#include <glog/logging.h>

#include <algorithm>
#include <iterator>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "applied_copies.h"
#include "catch_up_records.h"
#include "imported_copies.h"
#include "owner_pushes.h"
#include "record_senders.h"
#include "ps/internal/event_loop.h"
#include "ps/internal/postoffice.h"
#include "ps/optimizer_server.h"
#include "shard_thread.h"

namespace ps {
namespace {

// Values per catch-up message (4 MiB of floats): large enough to cost little per
// message, small enough not to hold the connection long for the copies behind it.
constexpr size_t kCatchUpFloatsPerMessage = size_t{1} << 20;
// The first slice of a catch-up, in keys at most (fewer when the budget of a slice
// holds fewer one-value records): the later ones are sized by what a key took in the
// slice before, so that a slice of wide keys stays near the budget.
constexpr size_t kFirstSliceKeys = 64;
constexpr size_t kLeastRecordBytes = sizeof(Key) + sizeof(int) + sizeof(float);
// A slice is what PS_CATCH_UP_RATE allows in this long (one message at most): requests
// wait little behind it, and the slices cost little each.
constexpr std::chrono::milliseconds kSlicePeriod{10};
// How long after a ring change a server erases the keys it no longer holds: every node
// has the new table by then (a table goes out at once; one missed comes with the next
// heartbeat's answer).
constexpr std::chrono::seconds kDropAfterRingChange{2};
// With one copy of each key, how long after a ring change a server still copies the
// pushes it takes to the keys' servers by the ring (CopiesPushes): a push planned by
// the old ring that comes late (sent again after a loss, or from a worker whose table
// came late) still reaches the key's new server. Longer than the erase, which is only
// about the keys' memory here: a late push recreates the key here either way.
constexpr std::chrono::seconds kCopyAfterRingChange{30};
// How long after a catch-up a server keeps which server sent it each key.
constexpr std::chrono::seconds kKeepRecordSenders{60};

}  // namespace

void OptimizerServer::BeginCatchUpLocked(const MembershipView& view) {
  Postoffice* po = Postoffice::Get();
  if (catch_up_ticket_ >= 0 || !po->catching_up()) return;
  catch_up_ticket_ = po->AddCatchUp();
  // The servers live now hold every key this one holds that has a copy left: each must
  // send them all before this one serves any.
  for (const Node& n : po->membership()->nodes) {
    if (n.role == Node::kServerRole && n.state == Node::kLive) catch_up_senders_[n.id] = n.identity;
  }
  if (!restored().checkpoint.empty()) {
    // An app made before ps::Start resumed before it knew: the checkpoint may hold keys
    // erased since, which the catch-up would not remove.
    catch_up_failed_ = true;
    LOG(ERROR) << "this server resumed from " << restored().checkpoint << " before it knew "
               << "it catches up from the other servers: it will not take its keys over (a "
               << "server that catches up must start empty; make the OptimizerServer after "
               << "ps::Start, which then skips the checkpoint)";
  }
  const Node* me = view.Find(po->my_id());
  LOG(INFO) << "server " << po->my_rank()
            << (me && me->state == Node::kEntering ? " is added to the job"
                                                    : " takes a dead server's place")
            << " and catches up: its keys stay where they are until every live server has "
            << "sent them";
}

void OptimizerServer::OnMembership(const MembershipView& view) {
  Postoffice* po = Postoffice::Get();
  if (!po->is_server()) return;
  const Node* me = view.Find(po->my_id());
  if (!me) return;
  std::lock_guard<std::mutex> lock(catch_up_mu_);
  if (CopiesRounds() && me->state == Node::kLive) NoteDeadServers(view);
  // A new process at a sender's node: the ids the old one sent say nothing of its keys.
  for (const Node& n : view.nodes) {
    if (n.role == Node::kServerRole) imported_copies_->KeepOnly(n.id, n.identity);
  }
  if (me->state == Node::kJoining || me->state == Node::kEntering) {
    BeginCatchUpLocked(view);
    CheckCaughtUpLocked(view);  // a server it waited for may have died
    return;
  }
  if (me->state != Node::kLive && me->state != Node::kLeaving) return;
  if (me->state == Node::kLive && view.ring.servers() != placed_servers_) {
    const bool changed = !placed_servers_.empty();
    placed_servers_ = view.ring.servers();
    if (changed) {
      ++ring_changes_;
      DropKeysNotHeldLater(view.ring);
    } else {
      // Its first table as a live server (an added one): the ring it holds its keys by
      // (CopiesPushes), in place of whatever a push that came first found.
      std::shared_ptr<Lifeline> lifeline = lifeline_;
      std::vector<int> servers = placed_servers_;
      po->van()->RunOnReceiver(Channel::kData, [this, lifeline, servers] {
        std::lock_guard<std::mutex> alive(lifeline->mu);
        if (lifeline->alive) settled_servers_ = servers;
      });
    }
  }
  OnLeaveLocked(view, *me);
  for (const Node& n : view.nodes) {
    // With one copy of each key a server in a dead one's place resumes from its
    // checkpoint: nobody holds its keys to send.
    const bool catches_up = (n.state == Node::kJoining && po->replication() >= 2) ||
                            n.state == Node::kEntering;
    if (n.role != Node::kServerRole || !catches_up || n.id == me->id) continue;
    if (!catch_up_sent_.insert({n.id, n.identity}).second) continue;
    const int rank = n.rank;
    const std::string identity = n.identity;
    std::shared_ptr<Lifeline> lifeline = lifeline_;
    const bool posted = po->van()->RunOnReceiver(Channel::kData, [this, lifeline, rank, identity] {
      std::lock_guard<std::mutex> alive(lifeline->mu);
      if (lifeline->alive) SendCatchUp(rank, identity, 0);
    });
    LOG_IF(ERROR, !posted) << "cannot send server " << rank << " its keys: the van does not "
                           << "run; it stays out of the job's placement";
  }
  if (!catch_up_sent_.empty() && po->replication() >= 3) {
    // A server failed over since a catch-up listed its keys: the keys it served then
    // are served by others now, which send them too.
    std::shared_ptr<Lifeline> lifeline = lifeline_;
    po->van()->RunOnReceiver(Channel::kData, [this, lifeline] {
      std::lock_guard<std::mutex> alive(lifeline->mu);
      if (lifeline->alive) TopUpCatchUps();
    });
  }
}

void OptimizerServer::DropKeysNotHeldLater(const ConsistentHashRing& ring) {
  Postoffice* po = Postoffice::Get();
  auto placed = std::make_shared<const ConsistentHashRing>(ring);
  std::shared_ptr<Lifeline> lifeline = lifeline_;
  const uint64_t changed_at = Postoffice::Get()->membership()->version;
  // A node that has not learned of the change yet may still send a key here (a copy
  // from its old owner): erased at once, it would come back as a stale remnant.
  const uint64_t change = ring_changes_;  // catch_up_mu_ held (OnMembership)
  po->control_loop()->RunAfter(kCopyAfterRingChange, [this, lifeline, placed, change] {
    Postoffice::Get()->van()->RunOnReceiver(Channel::kData, [this, lifeline, placed, change] {
      std::lock_guard<std::mutex> alive(lifeline->mu);
      if (!lifeline->alive) return;
      // A change since (even back to these servers) settles 30 s after itself. A ring
      // change under way now copies anyway.
      std::lock_guard<std::mutex> lock(catch_up_mu_);
      if (ring_changes_ == change) settled_servers_ = placed->servers();  // CopiesPushes' thread
    });
  });
  po->control_loop()->RunAfter(kDropAfterRingChange, [this, lifeline, placed, changed_at] {
    Postoffice* po = Postoffice::Get();
    if (po->membership()->ring.servers() != placed->servers()) return;  // changed again
    po->van()->RunOnReceiver(Channel::kData, [this, lifeline, placed, changed_at] {
      std::lock_guard<std::mutex> alive(lifeline->mu);
      if (!lifeline->alive) return;
      // A leave began since (this server may hold keys the ring without the leaving one
      // gives it, taken on this thread before now, whatever its table says yet): the
      // stale copies stay, never served nor sent.
      bool leave = Postoffice::Get()->membership()->LeavingServer() != nullptr;
      {
        std::lock_guard<std::mutex> lock(catch_up_mu_);
        leave |= round_epoch_ > changed_at;
      }
      if (leave) {
        LOG(INFO) << "keeps the keys a ring change took from this server: a leave began "
                  << "before they were erased";
        return;
      }
      const int me = Postoffice::Get()->my_rank();
      const int replication = Postoffice::Get()->replication();
      size_t dropped = 0;
      for (auto& shard : shards_) {
        shard->RunAndWait([&](ShardStore& store) {
          std::vector<int> replicas;
          dropped += store.DropKeys([&](const StoreKey& key) {
            if (key.chunk >= 0) {
              placed->ReplicasOfChunk(key.key, static_cast<uint32_t>(key.chunk), replication,
                                      &replicas);
            } else {
              placed->ReplicasOf(key.key, replication, &replicas);
            }
            return std::find(replicas.begin(), replicas.end(), me) == replicas.end();
          });
        });
      }
      LOG_IF(INFO, dropped) << "erased the " << dropped << " keys (and chunks) this server "
                            << "no longer holds: the ring changed, and their servers have them";
    });
  });
}

void OptimizerServer::DropRecordSendersLater() {
  // A push comes again for the keys of a catch-up while a worker's answer was missing
  // at it, or a copy of one planned then: within seconds. Then the record of each key's
  // sender (24 bytes a key) goes.
  std::shared_ptr<Lifeline> lifeline = lifeline_;
  const uint64_t epoch = ++record_senders_epoch_;
  Postoffice::Get()->control_loop()->RunAfter(kKeepRecordSenders, [this, lifeline, epoch] {
    std::lock_guard<std::mutex> alive(lifeline->mu);
    if (!lifeline->alive) return;
    std::lock_guard<std::mutex> lock(catch_up_mu_);
    if (record_senders_epoch_ == epoch) record_senders_->Clear();
  });
}

void OptimizerServer::EnterRoundLocked(uint64_t epoch) {
  if (epoch <= round_epoch_) return;  // this leave's round, or an earlier one's
  round_epoch_ = epoch;
  record_senders_->Clear();  // the keys of this leave's round from now on
  ++record_senders_epoch_;
  catch_up_from_.clear();
  catch_up_listed_.clear();
  catch_up_taken_.clear();
  catch_up_failed_ = false;
  catch_up_done_ = false;
}

void OptimizerServer::OnLeaveLocked(const MembershipView& view, const Node& me) {
  Postoffice* po = Postoffice::Get();
  const Node* leaving = view.LeavingServer();
  if (!leaving || view.leave_version == 0) {
    if (leave_epoch_ == 0) return;
    // The server left (its keys are held) or its leave was called off (a server died):
    // a round not done is forgotten; what it took stays, never served.
    if (catch_up_ticket_ >= 0) po->CancelCatchUp(catch_up_ticket_);  // nothing if done
    leave_epoch_ = 0;
    return;
  }
  if (leave_epoch_ == view.leave_version) {
    if (me.state == Node::kLive) CheckCaughtUpLocked(view);  // a sender may have died
    return;
  }
  const uint64_t epoch = view.leave_version;
  leave_epoch_ = epoch;
  // As a sender: each live server gets the keys the ring without the leaving one gives
  // it and that it does not hold, from the server that serves them now.
  std::shared_ptr<Lifeline> lifeline = lifeline_;
  for (const Node& n : view.nodes) {
    if (n.role != Node::kServerRole || n.state != Node::kLive || n.id == me.id) continue;
    const int rank = n.rank;
    const std::string identity = n.identity;
    const bool posted =
        po->van()->RunOnReceiver(Channel::kData, [this, lifeline, rank, identity, epoch] {
          std::lock_guard<std::mutex> alive(lifeline->mu);
          if (lifeline->alive) SendCatchUp(rank, identity, epoch);
        });
    LOG_IF(ERROR, !posted) << "cannot send server " << rank << " the keys server "
                           << leaving->rank << " leaves it: the van does not run";
  }
  if (me.state != Node::kLive) return;
  // As a receiver: every other server that serves keys now sends its end. What a
  // sender's table made it send before this server's table said so counts already
  // (EnterRoundLocked ran for the first of it).
  EnterRoundLocked(epoch);
  if (catch_up_ticket_ >= 0) po->CancelCatchUp(catch_up_ticket_);  // done, or another leave's
  catch_up_senders_.clear();
  for (const Node& n : view.nodes) {
    if (n.role != Node::kServerRole || n.id == me.id) continue;
    if (n.state == Node::kLive || n.state == Node::kLeaving) catch_up_senders_[n.id] = n.identity;
  }
  catch_up_ticket_ = po->AddCatchUp(epoch);
  LOG(INFO) << "server " << leaving->rank << " leaves the job: this server takes the keys the "
            << "ring without it gives it, from the " << catch_up_senders_.size()
            << " servers that serve them now";
  CheckCaughtUpLocked(view);
}

struct OptimizerServer::CatchUpSending {
  int rank = 0;
  int to = 0;  // its node id
  std::string identity;
  uint64_t epoch = 0;
  bool held_now = false;  // a live receiver, while another server leaves
  // The rings the keys were listed by: the receiver gets the keys this server serves by
  // `ring` that `placed` gives it (and, held_now, that `ring` does not).
  std::shared_ptr<const ConsistentHashRing> ring, placed;
  int me = 0;
  int replication = 1;
  std::vector<StoreKey> keys;  // to send, ascending, as listed at the start
  size_t next = 0;  // keys[next..] are still to go
  size_t slice_keys = 1;  // set from the budget before the first slice
  uint64_t messages = 0;
  size_t records = 0;
  size_t bytes = 0;
  size_t ids = 0;
  std::chrono::steady_clock::time_point started;
  // To a new server in a dead one's place: the ranks `ring` had failed over (ascending),
  // which the end names; whether the end went; and whether the keys go again after it
  // (TopUpCatchUps: a server failed over since served keys this one serves now).
  bool joining = false;
  std::vector<int> listed_failed;
  bool finished = false;
  bool again = false;

  // Whether the receiver gets (key, chunk) from this server.
  bool Sends(Key key, int chunk, std::vector<int>* replicas) const {
    if (chunk >= 0) {
      const uint32_t c = static_cast<uint32_t>(chunk);
      if (ring->ServerOfChunk(key, c) != me) return false;
      if (held_now) {
        ring->ReplicasOfChunk(key, c, replication, replicas);
        if (std::find(replicas->begin(), replicas->end(), rank) != replicas->end()) {
          return false;
        }
      }
      placed->ReplicasOfChunk(key, c, replication, replicas);
    } else {
      if (ring->ServerOf(key) != me) return false;
      if (held_now) {
        ring->ReplicasOf(key, replication, replicas);
        if (std::find(replicas->begin(), replicas->end(), rank) != replicas->end()) {
          return false;
        }
      }
      placed->ReplicasOf(key, replication, replicas);
    }
    return std::find(replicas->begin(), replicas->end(), rank) != replicas->end();
  }
};

namespace {

// PS_CATCH_UP_RATE in bytes per second; 0: no bound.
double SliceRate() { return Postoffice::Get()->config().catch_up_rate_mb * 1e6; }

// The bytes of one slice at `rate`: what it allows in kSlicePeriod, one message at most.
double SliceBudget(double rate) {
  const double most = static_cast<double>(kCatchUpFloatsPerMessage * sizeof(float));
  return rate > 0 ? std::min(most, rate * std::chrono::duration<double>(kSlicePeriod).count())
                  : most;
}

}  // namespace

bool OptimizerServer::StillSending(const MembershipView& view,
                                   const CatchUpSending& sending) const {
  // A task of another leave than the table's now (it moved on) sends nothing.
  if (sending.epoch != 0 && view.leave_version != sending.epoch) return false;
  const Node* target = view.Find(sending.to);
  // Live already (another server's word could not make it so: it waits for this one's),
  // gone, or another process by now: nothing to send.
  const bool leave = view.LeavingServer() != nullptr;
  return target && target->identity == sending.identity &&
         (target->state == Node::kJoining || target->state == Node::kEntering ||
          (target->state == Node::kLive && leave));
}

void OptimizerServer::SendCatchUp(int rank, const std::string& identity, uint64_t epoch) {
  Postoffice* po = Postoffice::Get();
  const MembershipView* view = po->membership();
  auto sending = std::make_shared<CatchUpSending>();
  sending->rank = rank;
  sending->to = Postoffice::ServerRankToID(rank);
  sending->identity = identity;
  sending->epoch = epoch;
  sending->started = std::chrono::steady_clock::now();
  if (!StillSending(*view, *sending)) return;
  const Node* target = view->Find(sending->to);
  // A server in a dead one's place holds the keys of its rank on the ring; an added one,
  // those of its rank on the grown ring; a live one, while another leaves, those of its
  // rank on the ring without it that it does not hold yet. Each key comes from the
  // server that serves it now, the one whose copies of later pushes reach the receiver
  // after it: a server that held a key once and no more (the ring changed) keeps a
  // stale copy it never sends.
  const bool joining = target->state == Node::kJoining;
  sending->held_now = target->state == Node::kLive;
  sending->ring = std::make_shared<const ConsistentHashRing>(view->ring);
  sending->placed = joining ? sending->ring
                            : std::make_shared<const ConsistentHashRing>(view->next_ring);
  sending->me = po->my_rank();
  sending->replication = po->replication();
  // A listing by a ring that failed over fewer servers than one later (TopUpCatchUps)
  // matters with PS_REPLICATION >= 3 only: with 2 each key a new server holds has one
  // other holder, which serves it whatever else fails.
  sending->joining = joining && po->replication() >= 3;
  sending->listed_failed = sending->ring->FailedOverRanks();
  for (auto& shard : shards_) {
    shard->RunAndWait([&](ShardStore& store) {
      std::vector<int> replicas;
      store.KeysWhere(
          [&](const StoreKey& key) { return sending->Sends(key.key, key.chunk, &replicas); },
          &sending->keys);
    });
  }
  std::sort(sending->keys.begin(), sending->keys.end(), [](const StoreKey& a, const StoreKey& b) {
    return a.key != b.key ? a.key < b.key : a.chunk < b.chunk;
  });
  // First, the pushes taken once here, and those the keys sent here held, as of now:
  // every record sent later holds them, and the copy of any push taken from now on
  // reaches the receiver too (from this server, the keys' owner), so a copy sent again
  // (a part a worker sent again, answered as taken) is a duplicate there by one or the
  // other, whichever slice its key comes in. A worker may also send one of them again to
  // the receiver once it serves the key. Those taken here last (the receiver keeps the
  // newest AppliedCopies::kCapacity of a sender's): the ones a part sent again can still
  // be.
  std::vector<AppliedCopies::Record> ids = imported_copies_->Records();
  std::vector<AppliedCopies::Record> own = applied_copies_->Records();
  ids.insert(ids.end(), std::make_move_iterator(own.begin()), std::make_move_iterator(own.end()));
  // And the pushes taken here from workers as their keys' server, newest last: a worker
  // whose answer did not come sends the part again to the key's new server.
  std::vector<AppliedCopies::Record> as_owner = owner_pushes_->Records();
  ids.insert(ids.end(), std::make_move_iterator(as_owner.begin()),
             std::make_move_iterator(as_owner.end()));
  if (ids.size() > AppliedCopies::kCapacity) {
    ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(AppliedCopies::kCapacity));
  }
  for (const KVPairs<float>& m : EncodeAppliedIds(ids, kCatchUpFloatsPerMessage)) {
    if (!SendCatchUpPart(sending->to, kCatchUpIdsCmd, m, epoch)) return;  // logged
    ++sending->messages;
  }
  sending->ids = ids.size();
  sending->slice_keys = std::max<size_t>(
      1, std::min(kFirstSliceKeys, static_cast<size_t>(SliceBudget(SliceRate()) /
                                                        static_cast<double>(kLeastRecordBytes))));
  catch_up_sending_[sending->to] = sending;
  SendCatchUpSlice(sending);
}

std::vector<Message> OptimizerServer::PlanCatchUpForwards(const KVMeta& meta,
                                                         const KVPairs<float>& data) {
  std::vector<std::vector<uint32_t>> by_rank;
  const MembershipView* view = Postoffice::Get()->membership();
  std::vector<int> replicas;
  for (auto it = catch_up_sending_.begin(); it != catch_up_sending_.end();) {
    const CatchUpSending& s = *it->second;
    if (!StillSending(*view, s)) {
      it = catch_up_sending_.erase(it);  // the receiver serves its keys, or went
      continue;
    }
    ++it;
    // The server the copy came from has the push.
    if (s.to == meta.sender) continue;
    for (size_t i = 0; i < data.keys.size(); ++i) {
      if (!s.Sends(data.keys[i], meta.chunk, &replicas)) continue;
      if (static_cast<size_t>(s.rank) >= by_rank.size()) by_rank.resize(s.rank + 1);
      by_rank[s.rank].push_back(static_cast<uint32_t>(i));
    }
  }
  if (by_rank.empty()) return {};
  return CopiesFor(meta, data, by_rank);
}

void OptimizerServer::SendCatchUpSlice(const std::shared_ptr<CatchUpSending>& sending) {
  CatchUpSending& s = *sending;
  // Given up: late copies go to the receiver no more (PlanCatchUpForwards). Once sent,
  // they still go until the receiver serves its keys or its round ends (StillSending):
  // nodes that route by an older ring may send this server copies meanwhile.
  auto ended = [this, &sending] {
    auto it = catch_up_sending_.find(sending->to);
    if (it != catch_up_sending_.end() && it->second == sending) catch_up_sending_.erase(it);
  };
  if (!StillSending(*Postoffice::Get()->membership(), s)) {
    LOG(INFO) << "stopped sending server " << s.rank << " its keys after " << s.records
              << " of " << s.keys.size() << ": it is gone, or its round ended";
    return ended();
  }
  Postoffice* po = Postoffice::Get();
  const auto slice_started = std::chrono::steady_clock::now();
  // Each record is read now, on this thread: the copies of the pushes taken after it
  // leave after it, on the same connection.
  const int threads = static_cast<int>(shards_.size());
  const size_t end = std::min(s.keys.size(), s.next + s.slice_keys);
  std::vector<std::vector<StoreKey>> by_shard(threads);
  for (size_t i = s.next; i < end; ++i) {
    by_shard[ShardOf(s.keys[i].key, s.keys[i].chunk, threads)].push_back(s.keys[i]);
  }
  std::vector<CatchUpRecord> records;
  for (int t = 0; t < threads; ++t) {
    if (by_shard[t].empty()) continue;
    shards_[t]->RunAndWait([&](ShardStore& store) {
      store.CatchUpRecordsOf(by_shard[t].data(), by_shard[t].size(), &records);
    });
  }
  std::sort(records.begin(), records.end(), [](const CatchUpRecord& a, const CatchUpRecord& b) {
    return a.record.key != b.record.key ? a.record.key < b.record.key
                                        : a.record.chunk < b.record.chunk;
  });
  // Encoded and sent a message at a time, each record's arrays freed once sent.
  size_t slice_bytes = 0;
  for (size_t next = 0; next < records.size();) {
    const size_t first = next;
    KVPairs<float> m;
    Status bad = NextCatchUpMessage(records, &next, optimizer_->StateWidth(),
                                    kCatchUpFloatsPerMessage, &m);
    if (!bad.ok()) {
      LOG(ERROR) << "cannot send server " << s.rank << " its keys: " << bad
                 << "; it stays out of the job's placement";
      return ended();
    }
    if (!SendCatchUpPart(s.to, kCatchUpCmd, m, s.epoch)) return ended();  // logged; no end
    ++s.messages;
    slice_bytes += m.vals.size() * sizeof(float) + m.keys.size() * (sizeof(Key) + sizeof(int));
    for (size_t i = first; i < next; ++i) records[i] = CatchUpRecord();
  }
  s.records += records.size();
  s.bytes += slice_bytes;
  // The next slice: what the rate allows in kSlicePeriod (a message at most), in keys
  // of the size these were; and sent once the rate allows it.
  const double rate = SliceRate();
  const double budget = SliceBudget(rate);
  if (end > s.next && slice_bytes > 0) {
    const double per_key = static_cast<double>(slice_bytes) / static_cast<double>(end - s.next);
    s.slice_keys = std::max<size_t>(1, static_cast<size_t>(budget / per_key));
  }
  s.next = end;
  if (s.next < s.keys.size()) {
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - slice_started).count();
    const double wait = rate > 0 ? static_cast<double>(slice_bytes) / rate - spent : 0;
    std::shared_ptr<Lifeline> lifeline = lifeline_;
    auto next_slice = [this, lifeline, sending] {
      std::lock_guard<std::mutex> alive(lifeline->mu);
      if (lifeline->alive) SendCatchUpSlice(sending);
    };
    // Posted, not run here: the requests that came meanwhile go first.
    if (wait < 0.001) {
      if (!po->van()->RunOnReceiver(Channel::kData, next_slice)) {
        LOG(ERROR) << "cannot send server " << s.rank << " the rest of its keys: the van "
                   << "does not run";
        ended();
      }
    } else {
      const int rank = s.rank;
      po->control_loop()->RunAfter(
          std::chrono::microseconds(static_cast<int64_t>(wait * 1e6)), [next_slice, rank] {
            LOG_IF(ERROR, !Postoffice::Get()->van()->RunOnReceiver(Channel::kData, next_slice))
                << "cannot send server " << rank << " the rest of its keys: the van does "
                << "not run";
          });
    }
    return;
  }
  if (!SendCatchUpPart(s.to, kCatchUpEndCmd, EncodeCatchUpEnd(s.messages, s.listed_failed),
                       s.epoch)) {
    return;
  }
  s.finished = true;
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started).count();
  LOG(INFO) << "sent server " << s.rank << " the " << s.records
            << (s.held_now ? " keys a leaving server's place gives it"
                           : " keys it holds with this one")
            << " (" << s.bytes << " bytes) and " << s.ids << " pushes taken once, in "
            << s.messages + 1 << " messages over " << took << " s; the copies of later "
            << "pushes follow";
  if (s.again) SendCatchUp(s.rank, s.identity, s.epoch);
}

void OptimizerServer::TopUpCatchUps() {
  const MembershipView* view = Postoffice::Get()->membership();
  const std::vector<int> failed = view->ring.FailedOverRanks();
  std::vector<std::shared_ptr<CatchUpSending>> again;
  for (auto& [to, sending] : catch_up_sending_) {
    CatchUpSending& s = *sending;
    if (!s.joining || !StillSending(*view, s)) continue;
    if (std::includes(s.listed_failed.begin(), s.listed_failed.end(), failed.begin(),
                      failed.end())) {
      continue;
    }
    if (s.finished) {
      again.push_back(sending);
    } else {
      s.again = true;  // once this round's end went
    }
  }
  for (const auto& sending : again) {
    LOG(INFO) << "sends server " << sending->rank << " its keys again: a server failed over "
              << "since they were listed served some of those this server serves now";
    SendCatchUp(sending->rank, sending->identity, sending->epoch);
  }
}

bool OptimizerServer::SendCatchUpPart(int to, int cmd, const KVPairs<float>& part,
                                      uint64_t epoch) {
  Message msg = PushToServer(to, cmd, part);
  // Which leave it belongs to (0: a new server's catch-up): the clock field, unused by
  // a catch-up otherwise.
  msg.meta.clock = static_cast<int64_t>(epoch);
  const int timestamp = msg.meta.timestamp;
  const uint64_t id = msg.meta.request_id;
  {
    std::lock_guard<std::mutex> lock(copies_mu_);
    // None waits.
    copies_in_flight_[id] = CopyInFlight{nullptr, timestamp, to, std::string(), false, nullptr};
  }
  Status sent = Postoffice::Get()->Send(msg);
  if (sent.ok()) return true;
  LOG(ERROR) << "cannot send server " << Postoffice::IDtoRank(to) << " its keys: " << sent
             << "; it stays out of the job's placement";
  EndCopy(id, sent, /*answered=*/false);
  return false;
}

void OptimizerServer::TakeCatchUp(const KVMeta& meta, const KVPairs<float>& data) {
  Postoffice* po = Postoffice::Get();
  if (!IsServerId(meta.sender) || meta.pull) {
    return Refuse(meta, Status::InvalidArgument(
                            "push cmds 0x43544348, 0x43544349 and 0x43544345 are catch-up "
                            "messages, which only servers send to a new server catching up"));
  }
  // meta.clock names a leave's messages (0: a new server's catch-up). A server takes a
  // leave's whatever its table says yet (a sender's table may say so first, and one made
  // live a moment ago may still read that it catches up); each leave's count apart, an
  // earlier one's refused.
  const Node* me = po->membership()->Find(po->my_id());
  const uint64_t epoch = meta.clock > 0 ? static_cast<uint64_t>(meta.clock) : 0;
  if (epoch == 0 && !po->catching_up()) {
    return Refuse(meta, Status::InvalidArgument("this server is not catching up"));
  }
  if (epoch > 0) {
    bool earlier = false;
    {
      std::lock_guard<std::mutex> lock(catch_up_mu_);
      earlier = !me || epoch < round_epoch_;
      if (!earlier) EnterRoundLocked(epoch);
    }
    if (earlier) {
      return Refuse(meta, Status::InvalidArgument(
                              "a catch-up message of a leave before this one, or to a server "
                              "out of the table"));
    }
  }
  const int from = Postoffice::IDtoRank(meta.sender);
  auto fail = [&](const Status& why) {
    {
      std::lock_guard<std::mutex> lock(catch_up_mu_);
      catch_up_failed_ = true;
    }
    LOG(ERROR) << "a catch-up message from server " << from << " cannot be taken (" << why
               << "): this server will not take its keys over";
    Refuse(meta, why);
  };
  if (meta.cmd == kCatchUpEndCmd) {
    uint64_t before = 0;
    std::vector<int> listed_failed;
    Status bad = DecodeCatchUpEnd(data, &before, &listed_failed);
    if (!bad.ok()) return fail(bad);
    // What it sent before is queued on the shards; once applied, it counts as sent.
    for (auto& shard : shards_) shard->RunAndWait([](ShardStore&) {});
    {
      std::lock_guard<std::mutex> lock(catch_up_mu_);
      // Counted from its end before (each round's messages come in order, then its end).
      const uint64_t taken = catch_up_taken_[meta.sender];
      catch_up_taken_[meta.sender] = 0;
      if (taken != before) {
        catch_up_failed_ = true;
        LOG(ERROR) << "server " << from << " sent " << before << " catch-up messages and this "
                   << "server took " << taken << " (the others were "
                   << "refused or lost): it will not take its keys over";
      }
      catch_up_from_.insert(meta.sender);
      catch_up_listed_[meta.sender] = std::move(listed_failed);
      record_senders_->End(meta.sender);
      CheckCaughtUpLocked(*po->membership());
    }
    server_->Response(meta);
    answered_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (meta.cmd == kCatchUpIdsCmd) {
    std::vector<AppliedCopies::Record> ids;
    Status bad = DecodeAppliedIds(data, &ids);
    if (!bad.ok()) return fail(bad);
    // Kept apart by sender: they name what the keys this sender sent hold, not what the
    // others' hold (ImportedCopies).
    const Node* sender = po->membership()->Find(meta.sender);
    imported_copies_->Add(meta.sender, sender ? sender->identity : std::string(), ids);
    {
      std::lock_guard<std::mutex> lock(catch_up_mu_);
      ++catch_up_taken_[meta.sender];
      record_senders_->Message(meta.sender);
    }
    server_->Response(meta);
    answered_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  auto records = std::make_shared<std::vector<CatchUpRecord>>();
  Status bad = DecodeCatchUp(data, optimizer_->StateWidth(), records.get());
  if (!bad.ok()) return fail(bad);
  {
    // A copy taken so far for one of these keys is replaced by its record (queued after
    // it on the key's shard): the record's sender alone says whether it holds it.
    const uint64_t taken_at = applied_copies_->Sequence();
    std::lock_guard<std::mutex> lock(catch_up_mu_);
    ++catch_up_taken_[meta.sender];
    for (const CatchUpRecord& r : *records) {
      record_senders_->Sent(meta.sender, r.record.key, r.record.chunk, taken_at);
    }
  }
  const int threads = static_cast<int>(shards_.size());
  auto by_shard = std::make_shared<std::vector<std::vector<uint32_t>>>(threads);
  for (size_t i = 0; i < records->size(); ++i) {
    const CheckpointRecord& r = (*records)[i].record;
    (*by_shard)[ShardOf(r.key, r.chunk, threads)].push_back(static_cast<uint32_t>(i));
  }
  // Queued like a push, before the copies that follow it on the same connection.
  for (int t = 0; t < threads; ++t) {
    if ((*by_shard)[t].empty()) continue;
    shards_[t]->Enqueue([this, records, by_shard, t](ShardStore& store) {
      for (uint32_t i : (*by_shard)[t]) {
        Status s = store.RestoreCatchUp((*records)[i]);
        if (s.ok()) continue;
        LOG(ERROR) << "cannot take a key over from a catch-up message: " << s
                   << "; this server will not take its keys over";
        std::lock_guard<std::mutex> lock(catch_up_mu_);
        catch_up_failed_ = true;
      }
    });
  }
  server_->Response(meta);
  answered_.fetch_add(1, std::memory_order_relaxed);
}

void OptimizerServer::CheckCaughtUpLocked(const MembershipView& view) {
  if (catch_up_ticket_ < 0 || catch_up_done_ || catch_up_failed_) return;
  // A live server reports for the leave its table names, once its round has begun.
  // A leave's round reports once the table names that leave too (its senders are known).
  if (round_epoch_ != 0 && leave_epoch_ != round_epoch_) return;
  Postoffice* po = Postoffice::Get();
  const Node* me = view.Find(po->my_id());
  // In a dead one's place: each live sender must have listed its keys without every
  // server failed over now, in this table or in another sender's listing (this table may
  // lag theirs): a server failed over since its listing served keys that sender may
  // serve now (it sends them again, TopUpCatchUps). (None comes back meanwhile: the
  // scheduler admits one new server in a dead one's place at a time.) With
  // PS_REPLICATION of 3 or more a sender that dies first is no loss while fewer than R
  // servers are down: the others send what it served.
  const bool joining = round_epoch_ == 0 && me && me->state == Node::kJoining &&
                       po->replication() >= 3;
  const std::vector<int> failed_here = view.ring.FailedOverRanks();
  std::set<int> failed(failed_here.begin(), failed_here.end());
  for (const auto& [id, listed] : catch_up_listed_) failed.insert(listed.begin(), listed.end());
  for (auto it = failed.begin(); it != failed.end();) {
    // Out of the table (retired, or left: in no ring any more), or live in it (none
    // comes back while this one catches up; waiting for it would be forever).
    const Node* n = view.Find(Postoffice::ServerRankToID(*it));
    const bool skip = *it == po->my_rank() || !n || n->state == Node::kLive;
    it = skip ? failed.erase(it) : std::next(it);
  }
  // This one is down too.
  const bool others_hold_its_keys =
      joining && failed.size() + 1 < static_cast<size_t>(po->replication());
  for (const auto& [id, identity] : catch_up_senders_) {
    const Node* n = view.Find(id);
    const bool live = n && n->alive() && n->identity == identity;
    if (catch_up_from_.count(id)) {
      if (!live || !joining) continue;
      if (catch_up_taken_[id] > 0) return;  // another round of it under way
      const std::vector<int>& listed = catch_up_listed_[id];
      for (int rank : failed) {
        if (!std::binary_search(listed.begin(), listed.end(), rank)) {
          return;  // its keys again, listed since that server was failed over
        }
      }
      continue;
    }
    if (live) return;  // still to come
    if (others_hold_its_keys) continue;
    // It died first: the keys only it held are lost (two servers down at once), and
    // this server must not serve them as if it had their history.
    catch_up_failed_ = true;
    LOG(ERROR) << "server " << Postoffice::IDtoRank(id) << " died before it sent this server "
               << "its keys: this server will not take its keys over, and the keys the two "
               << "held are lost ("
               << (Postoffice::Get()->replication() >= 2 ? "two servers down at once"
                                                         : "one copy of each key")
               << ")";
    return;
  }
  catch_up_done_ = true;
  DropRecordSendersLater();
  catch_up_from_.clear();  // the next round's ends are its own
  catch_up_listed_.clear();
  // With one copy of each key the keys' old servers erase them: nothing else holds them.
  if (Postoffice::Get()->replication() < 2) checkpoint_soon_.store(true);
  // A live server took the keys of one that leaves; a new one holds all of its own.
  if (round_epoch_ == 0) caught_up_ = true;
  Postoffice::Get()->CatchUpDone(catch_up_ticket_);
}

}  // namespace ps
