// RequestPipeline: failover of request parts (PS_REPLICATION >= 2, or a server leaving
// a job with one copy of each key and PS_CHUNK_BYTES=0: Postoffice::PartsMayGoAgain;
// docs/fault-tolerance.md). When a server dies or
// leaves, the parts of requests in flight that were sent to it go again, with the same
// request id and marked resent, to the servers that took its keys over (each key's
// first live replica); a part whose keys went to several servers is split. A server
// that already took the push (a copy from the one that died or left) answers without
// applying it again, so each push applies once. The request ends early, as without
// replication, when a key has no live replica, when the part's values are encoded (a
// codec's frame cannot be split by key), or when the part was not kept (planned before
// replication was known).
#include <glog/logging.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ps/internal/membership.h"
#include "ps/internal/postoffice.h"
#include "ps/internal/request_pipeline.h"
#include "kept_round_pushes.h"
#include "request_parts.h"

namespace ps {
namespace {

// The values of keys `picks` (indices into the part's keys) of a push part, in order.
struct Subset {
  SArray<Key> keys;
  SArray<char> vals;
  SArray<int> lens;
};

Subset Pick(const Message& sent, const std::vector<uint32_t>& picks, size_t elem_size, bool push) {
  Subset out;
  const SArray<Key> keys(sent.data[0]);
  out.keys.resize(picks.size());
  for (size_t j = 0; j < picks.size(); ++j) out.keys[j] = keys[picks[j]];
  if (!push) return out;
  const SArray<char>& vals = sent.data[1];
  const bool with_lens = sent.data.size() > 2;
  const SArray<int> lens = with_lens ? SArray<int>(sent.data[2]) : SArray<int>();
  std::vector<size_t> offsets;
  const size_t width = with_lens ? 0 : vals.size() / elem_size / keys.size();
  if (with_lens) offsets = ValueOffsets(lens.data(), lens.size());
  size_t total = 0;
  for (uint32_t k : picks) total += with_lens ? offsets[k + 1] - offsets[k] : width;
  out.vals = RawBuffer(total * elem_size);
  if (with_lens) out.lens.resize(picks.size());
  size_t at = 0;
  for (size_t j = 0; j < picks.size(); ++j) {
    const uint32_t k = picks[j];
    const size_t begin = with_lens ? offsets[k] : k * width;
    const size_t len = with_lens ? offsets[k + 1] - offsets[k] : width;
    if (with_lens) out.lens[j] = lens[k];
    std::memcpy(out.vals.data() + at * elem_size, vals.data() + begin * elem_size, len * elem_size);
    at += len;
  }
  return out;
}

}  // namespace

void RequestPipeline::KeepSentParts(Pending* p, const std::vector<Message>& messages) {
  for (size_t i = 0; i < messages.size() && i < p->parts.size(); ++i) {
    const Message& m = messages[i];
    // A lent part is the server's once sent.
    if (p->parts[i].lent ||
        !KeepsSentPart(m.data.empty() ? 0 : m.data[0].size())) {
      continue;  // never sent again
    }
    p->parts[i].sent = std::make_unique<Message>(messages[i]);
    p->parts[i].first_server = p->parts[i].server;
    p->parts[i].first_part = static_cast<int64_t>(i);
    if (Postoffice::Get()->replication() >= 2) {
      const Node* server = Postoffice::Get()->membership()->Find(
          Postoffice::ServerRankToID(p->parts[i].server));
      if (server) p->parts[i].process = server->identity;
    }
  }
}

bool RequestPipeline::SendsPartsAgain() { return Postoffice::Get()->PartsMayGoAgain(); }

bool RequestPipeline::FailsWithoutCopies(const MembershipView& view, const Pending& p) {
  if (Postoffice::Get()->replication() >= 2) return false;
  bool left = false;
  for (const Part& part : p.parts) {
    // A server that left is out of the table; one that died stays in it, dead (or is
    // in it again, a new process in its place).
    const Node* server = view.Find(Postoffice::ServerRankToID(part.server));
    if (!server) {
      left = true;
    } else if (!server->alive()) {
      return true;
    }
  }
  return !left;
}

bool RequestPipeline::PartServerGone(const MembershipView& view, const Part& part) {
  const Node* server = view.Find(Postoffice::ServerRankToID(part.server));
  return !server || !server->alive() ||
         (!part.process.empty() && server->identity != part.process);
}

bool RequestPipeline::FailOverLater(uint64_t id, const Status& status) {
  if (status.code() != Status::Code::kUnavailable) return false;
  Postoffice* po = Postoffice::Get();
  const MembershipView* view = po->membership();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end() || it->second->question) return false;
    if (FailsWithoutCopies(*view, *it->second)) return false;
    bool dead_part = false;
    for (const Part& part : it->second->parts) {
      if (!part.answered && PartServerGone(*view, part)) dead_part = true;
    }
    // A peer of the request died after its part there was answered (the customer keeps
    // a request's peers to its end): the request goes on, unless the node itself gives
    // up (its scheduler is gone), which ends every request (GiveUp marks it first).
    if (!dead_part) return !po->gave_up();
  }
  // On the control thread now, which sends nothing of the app's.
  customer_->RunOnOwnThread([this, id] { Reroute(id); });
  return true;
}

bool RequestPipeline::RerouteUnsent(const Message& unsent) {
  Postoffice* po = Postoffice::Get();
  if (!unsent.meta.request) return false;
  const MembershipView* view = po->membership();
  const uint64_t id = unsent.meta.request_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end() || it->second->question) return false;
    if (FailsWithoutCopies(*view, *it->second)) return false;
    const std::vector<Part>& parts = it->second->parts;
    if (unsent.meta.part >= parts.size()) return false;
    const Part& part = parts[unsent.meta.part];
    // Another reroute may have moved the part on already: a part resent elsewhere, or
    // replaced by its pieces, is left alone (its answers end the request).
    if (part.answered || part.server != Postoffice::IDtoRank(unsent.meta.recipient)) return true;
    if (!PartServerGone(*view, part)) return false;
  }
  customer_->RunOnOwnThread([this, id] { Reroute(id); });
  return true;
}

void RequestPipeline::Reroute(uint64_t id) {
  const MembershipView* view = Postoffice::Get()->membership();
  const ConsistentHashRing& ring = view->ring;
  auto live = [view](int rank) { return view->IsAlive(Postoffice::ServerRankToID(rank)); };
  std::vector<Message> out;
  std::vector<int> peers;
  std::unique_ptr<Pending> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;  // ended meanwhile
    Pending& p = *it->second;
    Status failed;
    const size_t count = p.parts.size();
    for (size_t i = 0; i < count && failed.ok(); ++i) {
      if (p.parts[i].answered || !PartServerGone(*view, p.parts[i])) continue;
      const int dead = p.parts[i].server;
      // Lent arrays (the server's once sent) or encoded keys (a part kept for key caching
      // only) cannot go again.
      if (!p.parts[i].sent || p.parts[i].lent || p.parts[i].sent->meta.keys_encoded) {
        failed = Status::Unavailable("server " + std::to_string(dead) +
                                     " died or left, and this part was not kept to send "
                                     "again");
        break;
      }
      const Message sent = *p.parts[i].sent;
      if (sent.data.empty()) {
        failed = Status::Unavailable("server " + std::to_string(dead) +
                                     " died or left, and this part was not kept to send "
                                     "again");
        break;
      }
      const SArray<Key> keys(sent.data[0]);
      // The part's keys by the server that holds them now.
      std::vector<std::pair<int, std::vector<uint32_t>>> groups;
      for (uint32_t k = 0; k < keys.size(); ++k) {
        const int to = p.parts[i].chunk >= 0
                           ? ring.ServerOfChunk(keys[k], static_cast<uint32_t>(p.parts[i].chunk))
                           : ring.ServerOf(keys[k]);
        if (!live(to)) {
          failed = Status::Unavailable("key " + std::to_string(keys[k]) + " has no live replica "
                                       "left (its server " + std::to_string(dead) + " died)");
          break;
        }
        auto g = groups.begin();
        while (g != groups.end() && g->first != to) ++g;
        if (g == groups.end()) g = groups.insert(groups.end(), {to, {}});
        g->second.push_back(k);
      }
      if (!failed.ok()) break;
      if (groups.size() > 1 && sent.meta.compression != 0) {
        failed = Status::Unavailable("server " + std::to_string(dead) + " died and its part's "
                                     "encoded values cannot be split between the replicas");
        break;
      }
      for (size_t g = 0; g < groups.size(); ++g) {
        Message again = sent;
        again.meta.recipient = Postoffice::ServerRankToID(groups[g].first);
        again.meta.resent = true;
        again.meta.first_server = p.parts[i].first_server;
        again.meta.first_part = p.parts[i].first_part;
        again.meta.sender_incarnation = 0;
        again.meta.sequence = 0;
        const Node* target = view->Find(again.meta.recipient);
        const std::string process = target ? target->identity : std::string();
        if (groups.size() == 1) {
          // Every key went to one server: the same part, sent there.
          p.parts[i].server = groups[g].first;
          p.parts[i].process = process;
          p.parts[i].sent = std::make_unique<Message>(again);
          peers.push_back(again.meta.recipient);
          out.push_back(std::move(again));
          continue;
        }
        Subset subset = Pick(sent, groups[g].second, elem_size_, p.push);
        again.data.clear();
        again.meta.data_type.clear();
        again.AddData(subset.keys);
        if (p.push) {
          again.meta.data_type.push_back(type_);
          again.data.push_back(subset.vals);
          if (!subset.lens.empty()) again.AddData(subset.lens);
        }
        Part piece;
        piece.server = groups[g].first;
        piece.process = process;
        piece.first_server = p.parts[i].first_server;
        piece.first_part = p.parts[i].first_part;
        if (p.pull) piece.asked = subset.keys;
        for (uint32_t k : groups[g].second) {
          piece.positions.push_back(p.parts[i].positions.empty() ? k : p.parts[i].positions[k]);
        }
        again.meta.part = static_cast<uint32_t>(p.parts.size());
        piece.sent = std::make_unique<Message>(again);
        peers.push_back(again.meta.recipient);
        out.push_back(std::move(again));
        p.parts.push_back(std::move(piece));
      }
      if (groups.size() > 1) {
        p.parts[i].answered = true;  // replaced by its pieces
        p.parts[i].replaced = true;
        p.remaining += static_cast<int>(groups.size()) - 1;
      }
    }
    if (!failed.ok()) {
      if (p.status.ok()) p.status = failed;
      done = std::move(it->second);
      pending_.erase(it);
      out.clear();
    }
  }
  if (done) {
    Finish(*done, /*run_callback_here=*/true);
    return;
  }
  customer_->AddPeers(id, peers);
  LOG_IF(WARNING, !out.empty() && failover_log_.ShouldLog())
      << "request " << out.front().meta.timestamp << ": " << out.size() << " part(s) whose "
      << "server died or left sent again to the servers that took its keys over ("
      << failover_log_.count() << " requests so far)";
  // A new server that died before it was added to the request's peers: its death did
  // not end the request, so its parts go again from here.
  const MembershipView* now = Postoffice::Get()->membership();
  bool died_meanwhile = false;
  for (Message& msg : out) {
    if (now->IsAlive(msg.meta.recipient)) {
      SendPart(msg);
    } else {
      died_meanwhile = true;
    }
  }
  if (died_meanwhile) customer_->RunOnOwnThread([this, id] { Reroute(id); });
}

}  // namespace ps

namespace ps {
namespace {

// `sent`, a push part kept for dead server `dead` (rank), as the messages that take its
// keys to the servers that serve them now, marked resent; Unavailable when a key has no
// live replica, or when its encoded values would have to be split.
Status SplitForNewServers(const Message& sent, int dead, const MembershipView& view,
                          size_t elem_size, DataType type, std::vector<Message>* out) {
  if (sent.data.size() < 2) return Status::Unavailable("the part holds no values");
  const SArray<Key> keys(sent.data[0]);
  std::vector<std::pair<int, std::vector<uint32_t>>> groups;
  for (uint32_t k = 0; k < keys.size(); ++k) {
    const int to = sent.meta.chunk >= 0
                       ? view.ring.ServerOfChunk(keys[k], static_cast<uint32_t>(sent.meta.chunk))
                       : view.ring.ServerOf(keys[k]);
    if (!view.IsAlive(Postoffice::ServerRankToID(to))) {
      return Status::Unavailable("key " + std::to_string(keys[k]) + " has no live replica left");
    }
    auto g = groups.begin();
    while (g != groups.end() && g->first != to) ++g;
    if (g == groups.end()) g = groups.insert(groups.end(), {to, {}});
    g->second.push_back(k);
  }
  if (groups.size() > 1 && sent.meta.compression != 0) {
    return Status::Unavailable("its encoded values cannot be split between the replicas");
  }
  for (const auto& [to, picks] : groups) {
    Message again = sent;
    again.meta.recipient = Postoffice::ServerRankToID(to);
    again.meta.resent = true;
    again.meta.pull = false;  // a push-pull's pull was answered when it was kept
    if (again.meta.first_server < 0) {
      again.meta.first_server = dead;
      again.meta.first_part = static_cast<int64_t>(sent.meta.part);
    }
    again.meta.sender_incarnation = 0;
    again.meta.sequence = 0;
    if (groups.size() > 1) {
      Subset subset = Pick(sent, picks, elem_size, /*push=*/true);
      again.data.clear();
      again.meta.data_type.clear();
      again.AddData(subset.keys);
      again.meta.data_type.push_back(type);
      again.data.push_back(subset.vals);
      if (!subset.lens.empty()) again.AddData(subset.lens);
    }
    out->push_back(std::move(again));
  }
  return Status::OK();
}

}  // namespace

void RequestPipeline::OnMembership(const MembershipView& view) {
  Postoffice* po = Postoffice::Get();
  if (!po->is_worker() || !po->replicate_rounds()) return;
  std::vector<int> dead;
  for (const Node& n : view.nodes) {
    if (n.role != Node::kServerRole || n.state != Node::kDead) continue;
    if (dead_seen_.insert({n.rank, n.identity}).second) dead.push_back(n.rank);
  }
  if (!dead.empty()) customer_->RunOnOwnThread([this, dead] { SendKeptAgain(dead); });
}

void RequestPipeline::SendKeptAgain(const std::vector<int>& dead) {
  Postoffice* po = Postoffice::Get();
  const MembershipView* view = po->membership();
  // First the parts in flight to them, as their requests' ends would send them: each
  // server gets this worker's word only after every push that may be in a round held
  // there.
  std::vector<uint64_t> in_flight;
  std::vector<KeptRoundPushes::Kept> kept;
  size_t resends_lost = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, p] : pending_) {
      if (p->question) continue;
      for (const Part& part : p->parts) {
        if (!part.answered && PartServerGone(*view, part)) {
          in_flight.push_back(id);
          break;
        }
      }
    }
    // Kept pushes sent again to a server that died too: gone with it.
    for (auto it = kept_resends_.begin(); it != kept_resends_.end();) {
      if (view->IsAlive(std::get<2>(it->first))) {
        ++it;
      } else {
        ++resends_lost;
        it = kept_resends_.erase(it);
      }
    }
    kept_resends_size_.store(kept_resends_.size(), std::memory_order_release);
    // Under mu_, with the scan above: an answer (Process keeps under mu_) came before,
    // its part kept and taken here, or after, when the table already says so.
    kept = kept_rounds_->TakeGone([view](int rank, const std::string& process) {
      const Node* n = view->Find(Postoffice::ServerRankToID(rank));
      return !n || !n->alive() || n->identity != process;
    });
  }
  for (uint64_t id : in_flight) Reroute(id);
  size_t sent = 0, lost = resends_lost;
  for (KeptRoundPushes::Kept& k : kept) {
    std::vector<Message> pieces;
    Status split = SplitForNewServers(k.sent, k.server, *view, elem_size_, type_, &pieces);
    if (!split.ok()) {
      ++lost;
      LOG_IF(ERROR, kept_log_.ShouldLog())
          << "a push kept for dead server " << k.server << " (request " << k.sent.meta.timestamp
          << ", clock " << k.clock << ") cannot go again: " << split
          << "; its update is lost (" << kept_log_.count() << " so far)";
      continue;
    }
    for (Message& piece : pieces) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        kept_resends_[std::make_tuple(piece.meta.request_id, piece.meta.part,
                                      piece.meta.recipient)] = KeptResend{k.clock, piece};
        kept_resends_size_.store(kept_resends_.size(), std::memory_order_release);
      }
      Status s = po->Send(piece);
      if (s.ok()) {
        ++sent;
        continue;
      }
      ++lost;
      LOG(ERROR) << "a push kept for dead server " << k.server << " cannot go to server "
                 << Postoffice::IDtoRank(piece.meta.recipient) << ": " << s
                 << "; its update is lost";
      std::lock_guard<std::mutex> lock(mu_);
      kept_resends_.erase(
          std::make_tuple(piece.meta.request_id, piece.meta.part, piece.meta.recipient));
      kept_resends_size_.store(kept_resends_.size(), std::memory_order_release);
    }
  }
  // The word, after everything above on each connection.
  for (int rank : dead) {
    for (const Node& n : view->nodes) {
      if (n.role != Node::kServerRole || !n.alive()) continue;
      Message word;
      word.meta.app_id = customer_->app_id();
      word.meta.customer_id = customer_->customer_id();
      word.meta.request = true;
      word.meta.rounds_resent = true;
      word.meta.first_server = rank;
      word.meta.recipient = n.id;
      Status s = po->Send(word);
      LOG_IF(WARNING, !s.ok()) << "cannot tell server " << n.rank << " that this worker sent "
                               << "again what it kept for dead server " << rank << ": " << s;
    }
  }
  LOG(WARNING) << "server(s) died: this worker sent again " << sent << " push part(s) it kept "
               << "for rounds not copied yet (" << kept.size() << " kept" << (lost ? ", " : "")
               << (lost ? std::to_string(lost) + " lost" : std::string()) << ") and "
               << in_flight.size() << " request(s) in flight, and told the live servers";
}

std::unique_ptr<RequestPipeline::KeptResend> RequestPipeline::TakeKeptAnswer(
    const Message& msg) {
  auto it = kept_resends_.find(
      std::make_tuple(msg.meta.request_id, msg.meta.part, msg.meta.sender));
  if (it == kept_resends_.end()) return nullptr;
  auto resend = std::make_unique<KeptResend>(std::move(it->second));
  kept_resends_.erase(it);
  kept_resends_size_.store(kept_resends_.size(), std::memory_order_release);
  return resend;
}

void RequestPipeline::EndKeptResend(const Message& msg, KeptResend& resend) {
  const int rank = Postoffice::IDtoRank(msg.meta.sender);
  Status s = Status::FromWire(msg.meta.status_code, msg.meta.status_message);
  if (!s.ok()) {
    LOG_IF(ERROR, kept_log_.ShouldLog())
        << "server " << rank << " refused a push this worker kept for a dead server (request "
        << msg.meta.timestamp << ", clock " << resend.clock << "): " << s
        << "; its update may be lost (" << kept_log_.count() << " so far)";
    return;
  }
  if (msg.meta.rounds_copied_below >= 0) {
    const Node* server = Postoffice::Get()->membership()->Find(msg.meta.sender);
    const std::string process = server ? server->identity : msg.peer_identity;
    kept_rounds_->Copied(rank, process, msg.meta.rounds_copied_below);
    kept_rounds_->Keep(rank, process, resend.clock, resend.sent);
  }
}

}  // namespace ps
