// OptimizerServer: replication (PS_REPLICATION >= 2, docs/fault-tolerance.md). A push
// a worker sends to a key's owner is forwarded to the key's other live replicas, each
// getting the keys it holds; the worker's answer waits until the owner applied it and
// every copy was answered, so an acknowledged update is on every live replica. With one
// copy of each key the same copies take a push to the keys' next server while keys move
// (CopiesPushes).
//
// Copies leave on the receive thread in the order requests are taken, over one
// connection per replica, so a replica applies each key's pushes in the owner's order:
// same updates, same order, same state, bit for bit (optimizer state and step counts
// too). A replica takes a copy as the owner takes a push (validation, shards, rounds
// of synchronous aggregation, the worker's push count) and forwards it no further.
#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ps/internal/kv_message.h"
#include "ps/internal/membership.h"
#include "ps/internal/postoffice.h"
#include "applied_copies.h"
#include "imported_copies.h"
#include "owner_pushes.h"
#include "record_senders.h"
#include "ps/optimizer_server.h"

namespace ps {

bool OptimizerServer::CopiesPushes() {
  Postoffice* po = Postoffice::Get();
  if (po->replication() >= 2) return true;
  const MembershipView* view = po->membership();
  if (settled_servers_.empty()) settled_servers_ = view->ring.servers();
  return view->ring_changing() || view->ring.servers() != settled_servers_;
}

bool OptimizerServer::TookAsOwner(const KVMeta& meta) {
  Postoffice* po = Postoffice::Get();
  // Where a worker keeps its parts to send again, a catch-up may carry a key this push
  // is in while the part goes again to the key's new server.
  if (po->PartsMayGoAgain()) {
    AppliedCopies::Id id;
    id.worker = meta.sender;
    id.customer = meta.customer_id;
    id.request = meta.request_id;
    id.chunk = meta.chunk;
    id.first_server = po->my_rank();
    id.first_part = static_cast<int64_t>(meta.part);
    owner_pushes_->Add(id);
  }
  const uint64_t lose = po->config().lose_push_answer;
  return lose > 0 && ++owner_pushes_taken_ == lose;
}

std::vector<Message> OptimizerServer::PlanReplicaCopies(const KVMeta& meta,
                                                       const KVPairs<float>& data) {
  Postoffice* po = Postoffice::Get();
  const MembershipView* view = po->membership();
  const ConsistentHashRing& ring = view->ring;
  const int me = po->my_rank();
  const int replication = po->replication();
  const size_t n = data.keys.size();
  // The replicas other than this server that live, by rank: the keys each holds. Only
  // the replicas of the whole ring hold a key's history: a key whose replica died runs
  // on fewer copies (until it is re-replicated, as a ring change), never on a copy
  // without its past.
  // While a server enters (added to the job) or leaves, the servers the next ring gives
  // a key that do not hold it yet get the copies too: they take the pushes after the
  // keys they are sent (catch-up).
  std::vector<std::vector<uint32_t>> by_replica;
  std::vector<int> replicas;
  std::vector<int> entering;
  for (size_t i = 0; i < n; ++i) {
    if (meta.chunk >= 0) {
      ring.ReplicasOfChunk(data.keys[i], static_cast<uint32_t>(meta.chunk), replication, &replicas);
    } else {
      ring.ReplicasOf(data.keys[i], replication, &replicas);
    }
    if (view->ring_changing()) {
      if (meta.chunk >= 0) {
        view->next_ring.ReplicasOfChunk(data.keys[i], static_cast<uint32_t>(meta.chunk),
                                        replication, &entering);
      } else {
        view->next_ring.ReplicasOf(data.keys[i], replication, &entering);
      }
      for (int rank : entering) {
        if (std::find(replicas.begin(), replicas.end(), rank) == replicas.end()) {
          replicas.push_back(rank);
        }
      }
    }
    for (int rank : replicas) {
      if (rank == me || !view->IsAlive(Postoffice::ServerRankToID(rank))) continue;
      if (static_cast<size_t>(rank) >= by_replica.size()) by_replica.resize(rank + 1);
      by_replica[rank].push_back(static_cast<uint32_t>(i));
    }
  }
  return CopiesFor(meta, data, by_replica);
}

std::vector<Message> OptimizerServer::CopiesFor(
    const KVMeta& meta, const KVPairs<float>& data,
    const std::vector<std::vector<uint32_t>>& by_replica) {
  std::vector<Message> copies;
  const size_t n = data.keys.size();
  const int me = Postoffice::Get()->my_rank();
  const bool sent_on = meta.replica_of >= 0;
  std::vector<size_t> offsets;
  const size_t width = data.lens.empty() && n ? data.vals.size() / n : 0;
  if (!data.lens.empty()) offsets = ValueOffsets(data.lens.data(), n);
  for (size_t rank = 0; rank < by_replica.size(); ++rank) {
    const std::vector<uint32_t>& pos = by_replica[rank];
    if (pos.empty()) continue;
    KVPairs<float> part;
    if (pos.size() == n) {
      part = data;  // every key: the request's own arrays, no copy
    } else {
      part.keys.resize(pos.size());
      size_t total = 0;
      for (size_t j = 0; j < pos.size(); ++j) {
        part.keys[j] = data.keys[pos[j]];
        total += offsets.empty() ? width : offsets[pos[j] + 1] - offsets[pos[j]];
      }
      part.vals.resize(total);
      if (!offsets.empty()) part.lens.resize(pos.size());
      size_t out = 0;
      for (size_t j = 0; j < pos.size(); ++j) {
        const size_t i = pos[j];
        const size_t begin = offsets.empty() ? i * width : offsets[i];
        const size_t len = offsets.empty() ? width : offsets[i + 1] - offsets[i];
        if (!offsets.empty()) part.lens[j] = data.lens[i];
        std::memcpy(part.vals.data() + out, data.vals.data() + begin, len * sizeof(float));
        out += len;
      }
    }
    Message copy;
    copy.meta.app_id = server_->app_id();
    copy.meta.customer_id = server_->app_id();
    copy.meta.request = true;
    copy.meta.push = true;
    copy.meta.head = meta.cmd;
    copy.meta.clock = meta.clock;
    copy.meta.chunk = meta.chunk;
    copy.meta.chunk_offset = meta.chunk_offset;
    copy.meta.value_len = meta.value_len;
    copy.meta.replica_of = sent_on ? meta.replica_of : meta.sender;
    copy.meta.origin_request = sent_on ? meta.origin_request : meta.request_id;
    copy.meta.origin_customer = sent_on ? meta.origin_customer : meta.customer_id;
    copy.meta.resent = meta.resent;
    copy.meta.first_server = meta.resent || sent_on ? meta.first_server : me;
    copy.meta.first_part =
        meta.resent || sent_on ? meta.first_part : static_cast<int64_t>(meta.part);
    copy.meta.recipient = Postoffice::ServerRankToID(static_cast<int>(rank));
    AppendKVPairs(part, &copy);
    copies.push_back(std::move(copy));
  }
  return copies;
}

namespace {

// The push a copy or a part sent again belongs to.
AppliedCopies::Id PushOf(const KVMeta& meta) {
  const bool copy = meta.replica_of >= 0;
  AppliedCopies::Id id;
  id.worker = copy ? meta.replica_of : meta.sender;
  id.customer = copy ? meta.origin_customer : meta.customer_id;
  id.request = copy ? meta.origin_request : meta.request_id;
  id.chunk = meta.chunk;
  id.first_server = meta.first_server;
  id.first_part = meta.first_part;
  return id;
}

}  // namespace

size_t OptimizerServer::HeldFromCatchUps(const KVMeta& meta, const KVPairs<float>& data,
                                         std::vector<uint8_t>* held) {
  const AppliedCopies::Id id = PushOf(meta);
  const size_t n = data.keys.size();
  held->clear();
  // Key by key, the ids of the server whose record of the key this one took last decide
  // (RecordSenders): that record holds the pushes it named, and no other (a replica may
  // have taken a push before its own cut while the key's owner took it after its own:
  // the owner's copy still applies). That holds for a copy from another server than the
  // key's sender too (a copy sent on, or a late one from a server routing by an older
  // ring): its sender may have named the push for keys it did not send. A part a worker
  // sent again may hold keys that came from several senders. A key no catch-up sent
  // (this server's own history): -1.
  // Most pushes are named by no sender (those taken since): no key is looked up.
  if (n == 0 || !imported_copies_->Knows(id)) return 0;
  std::vector<int> holders(n);
  {
    std::lock_guard<std::mutex> lock(catch_up_mu_);
    for (size_t i = 0; i < n; ++i) {
      holders[i] = record_senders_->SenderOf(data.keys[i], meta.chunk);
    }
  }
  size_t count = 0;
  std::vector<uint8_t> asked(n, 0);
  std::vector<uint64_t> keys;
  std::vector<size_t> positions;
  std::vector<uint8_t> by_holder;
  for (size_t i = 0; i < n; ++i) {
    if (asked[i] || holders[i] < 0) continue;
    keys.clear();
    positions.clear();
    for (size_t j = i; j < n; ++j) {
      if (asked[j] || holders[j] != holders[i]) continue;
      asked[j] = 1;
      keys.push_back(data.keys[j]);
      positions.push_back(j);
    }
    if (imported_copies_->Covered(holders[i], id, keys.data(), keys.size(), &by_holder) == 0) {
      continue;
    }
    if (held->empty()) held->assign(n, 0);
    for (size_t k = 0; k < positions.size(); ++k) {
      (*held)[positions[k]] = by_holder[k];
      count += by_holder[k];
    }
  }
  return count;
}

size_t OptimizerServer::ReplacedByRecords(const KVMeta& meta, const KVPairs<float>& data,
                                          const EarlierTakes& earlier,
                                          std::vector<uint8_t>* before) {
  const size_t n = data.keys.size();
  size_t replaced = 0;
  std::lock_guard<std::mutex> lock(catch_up_mu_);
  if (record_senders_->empty()) return 0;
  for (size_t i = 0; i < n; ++i) {
    if (!(*before)[i]) continue;
    uint64_t record_taken_at = 0;
    const int sender = record_senders_->SenderOf(data.keys[i], meta.chunk, &record_taken_at);
    // Every take of this push came before the key's record, which replaced the key, and
    // none from the record's sender (its record holds what it sent before it: its cut
    // came after): the update is in the record only if its sender named it
    // (HeldFromCatchUps, merged after). A late copy that reached this server from a
    // server routing by an older ring before the record is such a take.
    if (sender >= 0 && earlier.last <= record_taken_at && !earlier.CameFrom(sender)) {
      (*before)[i] = 0;
      ++replaced;
    }
  }
  if (replaced > 0) {
    const uint64_t count =
        replaced_by_records_.fetch_add(1, std::memory_order_relaxed) + 1;
    LOG_IF(INFO, pieces_log_.ShouldLog())
        << "a push of request " << PushOf(meta).request << " from node "
        << PushOf(meta).worker << " was taken here before a catch-up's record replaced "
        << replaced << " of its keys: it applies to those again unless the record's sender "
        << "held it (" << count << " so far)";
  }
  if (std::none_of(before->begin(), before->end(), [](uint8_t b) { return b != 0; })) {
    before->clear();
  }
  return replaced;
}

size_t OptimizerServer::TakenBefore(const KVMeta& meta, const KVPairs<float>& data,
                                    std::vector<uint8_t>* before) {
  const bool copy = meta.replica_of >= 0;
  const AppliedCopies::Id id = PushOf(meta);
  const size_t n = data.keys.size();
  std::vector<uint8_t> held;
  const size_t imported = HeldFromCatchUps(meta, data, &held);
  if (imported == n && n > 0) {
    *before = std::move(held);
    return n;
  }
  // A copy from the part's first server holds every key of the part this server holds;
  // a piece of a part split after a failover, or its copy, and a copy sent on by another
  // server (a catch-up's late copy, PlanCatchUpForwards), only its own.
  const bool whole =
      copy && !meta.resent && meta.sender == Postoffice::ServerRankToID(meta.first_server);
  bool forgot_young = false, known = false;
  EarlierTakes earlier;
  size_t taken = applied_copies_->Take(id, data.keys.data(), n, whole, before, &forgot_young,
                                       &known, meta.sender, &earlier);
  const size_t replaced = taken > 0 ? ReplacedByRecords(meta, data, earlier, before) : 0;
  taken -= replaced;
  if (known && taken + replaced < n) {
    // With PS_REPLICATION above 2: another piece of the part, or its copy, came first.
    const uint64_t met = pieces_met_.fetch_add(1, std::memory_order_relaxed) + 1;
    LOG_IF(INFO, pieces_log_.ShouldLog())
        << "a push of request " << id.request << " from node " << id.worker
        << " came again with keys it was not taken for here (pieces of a part split after a "
           "failover): those apply (" << met << " so far)";
  }
  LOG_IF(WARNING, forgot_young && replica_log_.ShouldLog())
      << "the pushes taken as copies come faster than " << AppliedCopies::kCapacity
      << " a minute: one was forgotten young (" << applied_copies_->evicted_young()
      << " so far), and a push sent again after a failover that long after may apply twice";
  if (imported > 0) {
    if (before->empty()) before->assign(n, 0);
    taken = 0;
    for (size_t i = 0; i < n; ++i) {
      (*before)[i] |= held[i];
      taken += (*before)[i];
    }
  }
  return taken;
}

void OptimizerServer::AnswerDuplicate(const KVMeta& meta, const KVPairs<float>& data) {
  const uint64_t n = duplicates_.fetch_add(1, std::memory_order_relaxed) + 1;
  LOG_IF(INFO, replica_log_.ShouldLog())
      << "a push of request " << (meta.replica_of >= 0 ? meta.origin_request : meta.request_id)
      << " from node " << (meta.replica_of >= 0 ? meta.replica_of : meta.sender)
      << " was taken here before (a copy, then the part sent again after a failover, or the "
         "other way round): answered without applying it again (" << n << " so far)";
  // A part sent again goes on to the replicas that live (they may not have it: they
  // tell for themselves); a copy goes no further.
  std::vector<Message> copies;
  if (meta.replica_of < 0) copies = PlanReplicaCopies(meta, data);
  if (copies.empty()) {
    server_->Response(meta);
    answered_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  SendReplicaCopies(NewRequest(meta, data, static_cast<int>(copies.size())), &copies);
}

void OptimizerServer::NoteDuplicatePushPull(const KVMeta& meta) {
  const uint64_t n = duplicate_push_pulls_.fetch_add(1, std::memory_order_relaxed) + 1;
  LOG_IF(INFO, push_pull_log_.ShouldLog())
      << "a push-pull of request " << meta.request_id << " from node " << meta.sender
      << " was taken here before: its pull is served and its copies sent on, its push not "
         "applied again (" << n << " so far)";
}

Message OptimizerServer::PushToServer(int to, int cmd, const KVPairs<float>& kvs) {
  Customer* customer = server_->get_customer();
  Message msg;
  msg.meta.app_id = server_->app_id();
  msg.meta.customer_id = server_->app_id();
  msg.meta.request = true;
  msg.meta.push = true;
  msg.meta.head = cmd;
  msg.meta.recipient = to;
  AppendKVPairs(kvs, &msg);
  uint64_t id = 0;
  msg.meta.timestamp = customer->NewRequest({to}, &id);
  msg.meta.request_id = id;
  msg.meta.incarnation = customer->incarnation();
  return msg;
}

void OptimizerServer::SendReplicaCopies(Request* request, std::vector<Message>* copies) {
  Customer* customer = server_->get_customer();
  for (Message& copy : *copies) {
    const int to = copy.meta.recipient;
    // The table is read before the copy is registered: a copy registered before a new
    // process in a dead one's place was known is ended with the old one (Postoffice),
    // and is then taken for the old process's (the records this server sends the new one
    // hold the update); one registered after it, for the new process's, goes on.
    const Node* replica = Postoffice::Get()->membership()->Find(to);
    bool before_catch_up = false;
    if (replica && replica->state == Node::kJoining) {
      std::lock_guard<std::mutex> lock(catch_up_mu_);
      before_catch_up = !catch_up_sent_.count({to, replica->identity});
    }
    uint64_t id = 0;
    const int timestamp = customer->NewRequest({to}, &id);
    copy.meta.timestamp = timestamp;
    copy.meta.request_id = id;
    copy.meta.incarnation = customer->incarnation();
    {
      std::lock_guard<std::mutex> lock(copies_mu_);
      copies_in_flight_[id] = CopyInFlight{request, timestamp, to,
                                           replica ? replica->identity : std::string(),
                                           before_catch_up, nullptr};
    }
    if (!replica || !replica->alive()) {
      // Out of the table since the copy was planned (it left, died, or was not added):
      // the requests waiting for it were ended when the table said so, maybe before this
      // one was registered, and a server that left keeps its connection, so a copy sent
      // there would wait for an answer that never comes.
      EndCopy(id,
              Status::Unavailable("server " + std::to_string(Postoffice::IDtoRank(to)) +
                                  " is out of the job's table"),
              /*answered=*/false);
      continue;
    }
    Status sent = Postoffice::Get()->Send(copy);
    if (!sent.ok()) EndCopy(id, sent, /*answered=*/false);
  }
}

void OptimizerServer::OnCopyAnswered(Message& answer) {
  if (answer.meta.incarnation != server_->get_customer()->incarnation()) return;  // an earlier app's
  {
    std::lock_guard<std::mutex> lock(copies_mu_);
    auto it = copies_in_flight_.find(answer.meta.request_id);
    if (it == copies_in_flight_.end() || it->second.replica != answer.meta.sender) return;
  }
  EndCopy(answer.meta.request_id,
          Status::FromWire(answer.meta.status_code, answer.meta.status_message),
          /*answered=*/true);
}

void OptimizerServer::EndCopy(uint64_t id, const Status& status, bool answered) {
  CopyInFlight copy;
  {
    std::lock_guard<std::mutex> lock(copies_mu_);
    auto it = copies_in_flight_.find(id);
    if (it == copies_in_flight_.end()) return;  // ended already
    copy = it->second;
    copies_in_flight_.erase(it);
  }
  server_->get_customer()->FinishRequest(copy.timestamp, status);
  const int rank = Postoffice::IDtoRank(copy.replica);
  if (copy.round) return EndRoundCopy(copy.round, rank, status, answered);
  if (!copy.request) {
    // A catch-up message (optimizer_server_catch_up.cc): no worker waits for it.
    LOG_IF(WARNING, !status.ok()) << "a catch-up message to server " << rank << " ended: "
                                  << status << " (it does not take its keys over)";
    return;
  }
  if (answered && !status.ok()) {
    // The replica refused what the owner took: their states may part. The worker hears
    // of it; the owner's state has the update.
    EndPart(copy.request, Status(status.code(), "replica server " + std::to_string(rank) +
                                                    " refused the copy: " + status.message()));
    return;
  }
  const Node* replica = Postoffice::Get()->membership()->Find(copy.replica);
  if (!answered && copy.before_catch_up) {
    // To a new process in a dead one's place, planned before this server listed the
    // keys it sends it: those records hold the update.
    LOG_IF(INFO, replica_log_.ShouldLog())
        << "a push's copy for server " << rank << ", a new process catching up, ended ("
        << status << "); the keys this server sends it hold the update";
    EndPart(copy.request, Status::OK());
    return;
  }
  if (!answered && replica && replica->alive() && replica->identity == copy.process) {
    // The replica lives but did not take the copy (a send that failed or timed out, or
    // PS_REQUEST_TIMEOUT): not every live replica has the update, so the worker must not
    // take it for acknowledged. (A new process in its place gets the update with the
    // keys it is sent when it catches up: this server applied it before.)
    EndPart(copy.request, Status::Unavailable("replica server " + std::to_string(rank) +
                                              " did not take the push's copy: " +
                                              status.message() +
                                              " (this server applied it)"));
    return;
  }
  if (!answered) {
    // The replica died: the update is on the replicas that live.
    replica_losses_.fetch_add(1, std::memory_order_relaxed);
    LOG_IF(WARNING, replica_log_.ShouldLog())
        << "a push's copy for replica server " << rank << " did not arrive (" << status
        << "); the keys it holds run on fewer copies (" << replica_losses_.load()
        << " copies lost so far)";
  }
  EndPart(copy.request, Status::OK());
}

void OptimizerServer::OnCopyAborted(int timestamp, uint64_t id, const Status& status) {
  (void)timestamp;
  // On the control thread, which must not block: answering the worker may, so it
  // happens on the customer's own thread.
  server_->get_customer()->RunOnOwnThread([this, id, status] { EndCopy(id, status, false); });
}

}  // namespace ps
