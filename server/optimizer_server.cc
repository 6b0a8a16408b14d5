#include "ps/optimizer_server.h"

#include <glog/logging.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "applied_copies.h"
#include "catch_up_records.h"
#include "checkpoint.h"
#include "imported_copies.h"
#include "owner_pushes.h"
#include "record_senders.h"
#include "ps/internal/job_services.h"
#include "ps/internal/hash.h"
#include "ps/internal/kv_message.h"
#include "ps/internal/node_activity.h"
#include "request_bounds.h"
#include "round_copies.h"
#include "shard_thread.h"

namespace ps {
namespace {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A part prefetches the key-table buckets of the key this many positions ahead of the
// one it works on.
constexpr size_t kPrefetchAhead = 8;

int DefaultThreads() {
  int configured = Postoffice::Get()->config().server_threads;
  if (configured > 0) return configured;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

// One request in progress. Parts run on different shard threads; each writes only its
// own part_vals entry and the lens of its own key positions, so they share no data
// but `remaining` and `status`.
struct OptimizerServer::Request {
  KVMeta meta;
  KVPairs<float> data;
  std::vector<size_t> offsets;  // value offsets of a push with lens; empty when uniform
  size_t width = 0;             // values per key of a push without lens
  std::vector<std::vector<uint32_t>> positions;  // per part; empty: one part, all keys
  std::vector<SArray<float>> part_vals;          // pulled values, per part
  std::vector<int> lens;                         // pulled length per key
  // A push some of whose keys took it before (TakenBefore): 1 for those, not applied
  // again; empty when none did.
  std::vector<uint8_t> taken_before;
  // A push-pull part whose push went into its rounds before the part waited for held
  // rounds (RunPart), by part; empty unless a push-pull under synchronous aggregation.
  std::vector<uint8_t> pushed_early;
  bool lose_answer = false;  // PS_LOSE_PUSH_ANSWER: applied, not answered
  StoreKey chunk;    // a chunk request: the chunk (its key is data.keys[0])
  uint32_t chunk_len = 0;
  std::atomic<int> remaining{0};
  std::mutex status_mu;
  Status status;  // first failure, under status_mu
};

int OptimizerServer::ShardOf(Key key, int threads) {
  // Salted, so that the shard is independent of the ring's placement and the keys of
  // one server spread evenly over its shards.
  return static_cast<int>(Mix64(key ^ 0x6a09e667f3bcc909ULL) % static_cast<uint64_t>(threads));
}

int OptimizerServer::ShardOf(Key key, int32_t chunk, int threads) {
  if (chunk <= 0) return ShardOf(key, threads);
  return ShardOf(Mix64(key ^ Mix64(static_cast<uint64_t>(chunk))), threads);
}

Status OptimizerServer::CheckChunk(const KVMeta& meta, const KVPairs<float>& data,
                                   uint32_t* len) {
  return CheckChunkLayout(meta, data, Postoffice::Get()->chunk_bytes() / sizeof(float), len);
}

OptimizerServer::OptimizerServer(int app_id, const OptimizerServerOptions& options)
    : options_(options) {
  Status s = options_.optimizer.Validate();
  if (!s.ok()) throw Error("OptimizerServer: " + s.message());
  if (options_.default_length == 0 || options_.default_length > kMaxValueLength) {
    throw Error("OptimizerServer: default_length must be 1 to " + std::to_string(kMaxValueLength) +
                " (a pull's answer gives each key's length as an int32); it is " +
                std::to_string(options_.default_length));
  }
  if (options_.rule) {
    const std::string& name = options_.rule_name;
    if (name.empty() || std::any_of(name.begin(), name.end(), [](unsigned char c) {
          return std::isspace(c) != 0;
        })) {
      throw Error("OptimizerServer: an update rule needs a rule_name without whitespace (it "
                  "is recorded in checkpoints); it is '" + name + "'");
    }
    optimizer_ = options_.rule;
  } else if (!options_.rule_name.empty()) {
    throw Error("OptimizerServer: rule_name '" + options_.rule_name + "' without a rule");
  } else {
    optimizer_ = Optimizer::Create(options_.optimizer);
  }
  worker_ranks_ = static_cast<size_t>(std::max(Postoffice::Get()->num_workers(), 0));
  pushes_by_worker_.reset(new std::atomic<uint64_t>[worker_ranks_]);
  for (size_t r = 0; r < worker_ranks_; ++r) pushes_by_worker_[r].store(0);
  ApplyCheckpointSettings();
  if (options_.sync_aggregation) {
    const ConsistencyModel& model = Postoffice::Get()->consistency();
    if (model.kind != ConsistencyModel::kBsp) {
      throw Error("OptimizerServer: synchronous aggregation needs the job to run with "
                  "PS_CONSISTENCY=bsp (set on the scheduler); this job runs " +
                  model.ToString());
    }
  }
  int threads = options_.threads > 0 ? options_.threads : DefaultThreads();
  for (int t = 0; t < threads; ++t) {
    shards_.push_back(std::make_unique<ShardThread>(
        std::make_unique<ShardStore>(optimizer_.get(), options_.init),
        std::max<size_t>(options_.queue_capacity, 1)));
  }
  round_closes_.resize(shards_.size());
  rounds_copied_below_.assign(shards_.size(), 0);
  // A new server in a replicated job catches up from the live servers instead: a
  // checkpoint of the dead one would bring back keys erased since.
  const bool catches_up =
      (Postoffice::Get()->replication() >= 2 && Postoffice::Get()->is_recovery()) ||
      Postoffice::Get()->catching_up();
  if (!options_.checkpoint_dir.empty() && options_.resume && !catches_up) {
    Status loaded = LoadCheckpoint(CheckpointPath());
    if (loaded.ok()) {
      LOG(INFO) << "resumed from " << CheckpointPath() << " after " << pushes_taken_.load() << " pushes";
    } else if (loaded.code() != Status::Code::kNotFound) {
      throw Error("OptimizerServer cannot resume: " + loaded.message());
    }
  }
  last_checkpoint_pushes_ = pushes_taken_.load();
  last_checkpoint_time_ = NowSeconds();
  if (options_.sync_aggregation) {
    // Each new minimum clock closes the rounds below it, on every shard, in queue
    // order after the pushes taken before it. Once that is queued on every shard,
    // Handle checks clocks against it: each part it queues then runs after it.
    clock_listener_ = JobServices::Get()->clocks()->AddListener([this](int64_t minimum) {
      for (size_t t = 0; t < shards_.size(); ++t) {
        shards_[t]->Enqueue([this, t, minimum](ShardStore& store) {
          CloseShardRounds(static_cast<int>(t), minimum, store);
        });
      }
      closing_below_.store(minimum, std::memory_order_release);
    });
  }
  {
    // Made while the server serves keys: the ring it holds them by (CopiesPushes), read
    // before the handle that reads it is set.
    const MembershipView* view = Postoffice::Get()->membership();
    const Node* me = view->Find(Postoffice::Get()->my_id());
    if (me && (me->state == Node::kLive || me->state == Node::kLeaving)) {
      settled_servers_ = view->ring.servers();
      placed_servers_ = view->ring.servers();  // a change in the first table counts as one
    }
  }
  // The handle only splits requests onto the shards' bounded queues: it runs on the
  // data receive thread, so a request crosses one hand-off (to its shard).
  server_ = std::make_unique<KVServer<float>>(app_id, Customer::Delivery::kReceiveThread);
  server_->AcceptChunks();
  server_->KeepsReplicas();
  applied_copies_ = std::make_unique<AppliedCopies>();
  imported_copies_ = std::make_unique<ImportedCopies>();
  owner_pushes_ = std::make_unique<OwnerPushes>();
  record_senders_ = std::make_unique<RecordSenders>();
  server_->set_own_request_handles(
      [this](Message& answer) { OnCopyAnswered(answer); },
      [this](int ts, uint64_t id, const Status& s) { OnCopyAborted(ts, id, s); });
  server_->set_rounds_resent_handle(
      [this](int worker, int dead_rank) { OnRoundsResent(worker, dead_rank); });
  server_->set_request_handle(
      [this](const KVMeta& meta, const KVPairs<float>& data, KVServer<float>*) {
        Handle(meta, data);
      });
  server_->SimpleApp::set_request_handle(
      [this](const SimpleData& request, SimpleApp* app) { AnswerSimpleRequest(request, app); });
  membership_listener_ = Postoffice::Get()->AddMembershipListener(
      [this](const MembershipView& view) { OnMembership(view); });
  {
    // A node that joined before this app was made: its first table is in already.
    std::lock_guard<std::mutex> lock(catch_up_mu_);
    BeginCatchUpLocked(*Postoffice::Get()->membership());
    CheckCaughtUpLocked(*Postoffice::Get()->membership());
  }
  // Last: a constructor that throws runs no destructor to take it back.
  queue_depths_id_ = NodeActivity::Get()->AddQueueDepths([this] {
    std::vector<uint64_t> depths;
    for (const auto& shard : shards_) depths.push_back(shard->queued());
    return depths;
  });
}

OptimizerServer::~OptimizerServer() {
  {
    std::lock_guard<std::mutex> lock(copies_mu_);  // see SendRoundCopies
    stopping_.store(true, std::memory_order_release);
  }
  LOG_IF(INFO, round_copies_sent_.load() + round_copies_taken_.load() > 0)
      << "round copies: sent " << round_copies_sent_.load() << " closed rounds to replicas, "
      << "took " << round_copies_taken_.load() << " from owners";
  Postoffice::Get()->RemoveMembershipListener(membership_listener_);
  {
    std::lock_guard<std::mutex> lock(lifeline_->mu);  // a catch-up being sent ends first
    lifeline_->alive = false;
  }
  NodeActivity::Get()->RemoveQueueDepths(queue_depths_id_);
  if (clock_listener_ >= 0) {
    if (ClockClient* clocks = JobServices::Get()->clocks()) clocks->RemoveListener(clock_listener_);
  }
  server_->Close();  // no new requests; the shards finish and answer the taken ones
  // Copies to replicas get no answer any more: their requests end with what the
  // shards applied here.
  std::vector<uint64_t> copies;
  {
    std::lock_guard<std::mutex> lock(copies_mu_);
    for (const auto& kv : copies_in_flight_) copies.push_back(kv.first);
  }
  for (uint64_t id : copies) {
    EndCopy(id, Status::Unavailable("the server is shutting down"), /*answered=*/false);
  }
  // Rounds no longer close: the requests parked for them are answered, after the
  // parts queued before (which may park), and the open rounds are dropped.
  for (auto& shard : shards_) {
    shard->Enqueue([](ShardStore& store) {
      store.Shutdown(Status::Unavailable("the server is shutting down"));
    });
  }
  if (writer_.joinable()) writer_.join();
  shards_.clear();
  server_.reset();
}

void OptimizerServer::Refuse(const KVMeta& meta, const Status& why) {
  server_->ResponseError(meta, why);
  answered_.fetch_add(1, std::memory_order_relaxed);
}

OptimizerServer::Request* OptimizerServer::NewRequest(const KVMeta& meta,
                                                     const KVPairs<float>& data, int remaining) {
  auto* req = new Request;
  req->meta = meta;
  req->data = data;
  req->remaining.store(remaining);
  return req;
}

void OptimizerServer::Handle(const KVMeta& meta, const KVPairs<float>& data) {
  if ((meta.cmd == kCatchUpCmd || meta.cmd == kCatchUpIdsCmd || meta.cmd == kCatchUpEndCmd) &&
      meta.push) {
    return TakeCatchUp(meta, data);
  }
  if (meta.cmd == kRoundCopyCmd && meta.push) return TakeRoundCopy(meta, data);
  // Before anything is noted of the request: it may wait for this server's table.
  if (options_.sync_aggregation && meta.replica_of < 0 && IsWorkerId(meta.sender) &&
      CopiesRounds() && !PlacedByMyTable(meta, data)) {
    return;
  }
  if (meta.replica_of < 0 && Postoffice::Get()->catching_up() && !caught_up_.load()) {
    // A key whose every other holder is dead still names this server: it has not its
    // history yet (copies of later pushes are taken, as replica_of says). Once it holds
    // its keys it serves, although its own table may say it is joining a little longer
    // than a worker's that says it is live.
    return Refuse(meta, Status::Unavailable(
                            "server " + std::to_string(Postoffice::Get()->my_rank()) +
                            " is a new process catching up from its replicas: it serves no "
                            "request before it holds its keys"));
  }
  size_t n = data.keys.size();
  std::vector<uint8_t> taken_before;
  bool taken_already = false;  // every key: a push-pull goes on for its pull and copies
  if (meta.push && (meta.replica_of >= 0 || meta.resent) &&
      TakenBefore(meta, data, &taken_before) == n && n > 0) {
    if (!meta.pull) return AnswerDuplicate(meta, data);
    NoteDuplicatePushPull(meta);
    taken_already = true;
  }
  if (options_.sync_aggregation) {
    if (meta.push && !IsWorkerId(meta.replica_of >= 0 ? meta.replica_of : meta.sender)) {
      return Refuse(
          meta, Status::InvalidArgument("synchronous aggregation takes pushes from workers only"));
    }
    const bool rounds = CopiesRounds();
    if (rounds && !rounds_stamped_) {
      rounds_stamped_ = true;  // answers say below which clock rounds are copied from now on
      PublishRoundsCopied();
    }
    // A push-pull taken before is only its pull now: checked as one (its round may
    // have closed). A push sent again may be of a held round of a clock closed here:
    // the shard tells, key by key.
    KVMeta checked = meta;
    if (taken_already || (rounds && meta.resent)) checked.push = false;
    Status clock = CheckClock(checked, closing_below_.load(std::memory_order_acquire),
                              ShardStore::kMaxClocksAhead);
    if (!clock.ok()) return Refuse(meta, clock);
  }
  if (n == 0) {
    server_->Response(meta, KVPairs<float>());
    answered_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (n > UINT32_MAX) {  // parts hold key positions in 32 bits
    return Refuse(meta, Status::InvalidArgument("a request of " + std::to_string(n) +
                                                " keys: split it; the server takes at most " +
                                                std::to_string(UINT32_MAX) + " per request"));
  }
  if (meta.cmd == kEraseKeysCmd && meta.pull) {
    return Refuse(meta, Status::InvalidArgument("kEraseKeysCmd is a push command; a pull or "
                                                "push-pull cannot carry it"));
  }
  if (meta.cmd == kEraseKeysCmd && CopiesRounds()) {
    // Replicas take closed rounds only: an erase would reach none of them.
    return Refuse(meta, Status::Unimplemented("kEraseKeysCmd: keys are not erased in a job "
                                              "with PS_REPLICATE_ROUNDS=1"));
  }
  // Lengths the store and the answer can hold (a key pushed without values would open
  // an empty round or count a step that moved nothing), before any part is applied.
  size_t width = 0;
  Status lengths = CheckValueLengths(meta, data, &width);
  if (!lengths.ok()) return Refuse(meta, lengths);
  uint32_t chunk_len = 0;
  if (meta.chunk >= 0) {
    Status bad = CheckChunk(meta, data, &chunk_len);
    if (!bad.ok()) return Refuse(meta, bad);
  }
  Request* req = NewRequest(meta, data, 0);
  if (!taken_before.empty()) req->taken_before = std::move(taken_before);
  if (meta.chunk >= 0) {
    req->chunk = StoreKey{data.keys[0], meta.chunk, meta.chunk_offset, meta.value_len};
    req->chunk_len = chunk_len;
  }
  if (meta.push) {
    if (data.lens.empty()) {
      req->width = width;
    } else {
      req->offsets = ValueOffsets(data.lens.data(), n);
    }
  }
  if (meta.pull) req->lens.assign(n, 0);
  if (meta.push && !taken_already) {
    pushes_taken_.fetch_add(1, std::memory_order_relaxed);
    CountPush(meta.replica_of >= 0 ? meta.replica_of : meta.sender);
    if (meta.replica_of < 0 && !meta.resent) req->lose_answer = TookAsOwner(meta);
  }
  // Copies for the keys' other replicas: planned before any part runs, sent after the
  // parts are queued (the copies of this node's earlier requests left before).
  std::vector<Message> copies;
  // Read here, not at construction: an OptimizerServer may be made before ps::Start.
  if (meta.push && meta.replica_of < 0 && !CopiesRounds() && CopiesPushes()) {
    copies = PlanReplicaCopies(meta, data);
  } else if (meta.push && !catch_up_sending_.empty()) {
    copies = PlanCatchUpForwards(meta, data);  // a late copy of a push on keys sent in slices
  }
  int threads = static_cast<int>(shards_.size());
  std::vector<int> targets;
  if (threads == 1) {
    targets.push_back(0);
  } else if (meta.chunk >= 0) {
    targets.push_back(ShardOf(data.keys[0], meta.chunk, threads));
  } else {
    std::vector<std::vector<uint32_t>> by_shard(threads);
    for (size_t i = 0; i < n; ++i) {
      by_shard[ShardOf(data.keys[i], threads)].push_back(static_cast<uint32_t>(i));
    }
    for (int t = 0; t < threads; ++t) {
      if (by_shard[t].empty()) continue;
      targets.push_back(t);
      req->positions.push_back(std::move(by_shard[t]));
    }
    if (targets.size() == 1) req->positions.clear();  // one shard has every key
  }
  req->part_vals.resize(targets.size());
  if (meta.push && meta.pull && options_.sync_aggregation) {
    req->pushed_early.assign(targets.size(), 0);
  }
  req->remaining.store(static_cast<int>(targets.size() + copies.size()));
  for (size_t part = 0; part < targets.size(); ++part) {
    const std::vector<uint32_t>* positions =
        req->positions.empty() ? nullptr : &req->positions[part];
    shards_[targets[part]]->Enqueue([this, req, positions, part](ShardStore& store) {
      RunPart(req, positions, static_cast<int>(part), store);
    });
  }
  if (!copies.empty()) SendReplicaCopies(req, &copies);
  if (meta.push) MaybeCheckpoint();
}

void OptimizerServer::RunPart(Request* req, const std::vector<uint32_t>* positions, int part,
                              ShardStore& store) {
  // A dead owner's key whose rounds are rebuilt here: its pull waits until they are
  // applied (ReleaseHolds runs it again). A push-pull's push goes into its round first:
  // once the round is applied, its clock's push would be refused.
  if (options_.sync_aggregation && req->meta.pull && store.holding() &&
      HoldsAnyKey(req, positions, store)) {
    if (req->meta.push && !req->pushed_early[part]) {
      Status pushed = AggregatePart(req, positions, store);
      if (!pushed.ok()) return EndPart(req, pushed);
      req->pushed_early[part] = 1;
    }
    store.ParkHeld([this, req, positions, part](ShardStore& s, const Status& ready) {
      if (ready.ok()) {
        RunPart(req, positions, part, s);
      } else {
        EndPart(req, ready);
      }
    });
    return;
  }
  // BSP: a pull in clock c sees every push of the clocks below c, so it waits (parked
  // on its shard, the shard goes on) until those rounds are applied, or the server stops.
  if (options_.sync_aggregation && req->meta.pull && req->meta.clock > store.closed_below()) {
    ShardStore::KeyList keys{req->data.keys.data(), positions ? positions->data() : nullptr,
                             positions ? positions->size() : req->data.keys.size()};
    Status parked = store.Park(req->meta.clock, keys,
                               [this, req, positions, part](ShardStore& s, const Status& ready) {
                                 if (ready.ok()) {
                                   RunPart(req, positions, part, s);
                                 } else {
                                   EndPart(req, ready);
                                 }
                               });
    if (!parked.ok()) EndPart(req, parked);
    return;
  }
  Status failed;
  try {
    size_t count = positions ? positions->size() : req->data.keys.size();
    const bool push = req->meta.push, pull = req->meta.pull;
    const bool whole = req->chunk.chunk < 0;
    const bool erase = req->meta.cmd == kEraseKeysCmd;  // a push (Handle refuses pulls)
    SArray<float>& out = req->part_vals[part];
    // The key table is much bigger than the caches: ask for the buckets of a key a few
    // positions ahead, so that its misses overlap the work on this one.
    auto prefetch_ahead = [&](size_t i) {
      if (whole && i + kPrefetchAhead < count) {
        size_t ahead = positions ? (*positions)[i + kPrefetchAhead] : i + kPrefetchAhead;
        store.Prefetch(req->data.keys[ahead]);
      }
    };
    const std::vector<uint8_t>& taken_before = req->taken_before;
    const bool pushed_early = !req->pushed_early.empty() && req->pushed_early[part];
    for (size_t i = 0; i < count && failed.ok() && erase; ++i) {
      size_t p = positions ? (*positions)[i] : i;
      prefetch_ahead(i);
      if (!taken_before.empty() && taken_before[p]) continue;
      failed = store.Erase(whole ? StoreKey{req->data.keys[p]} : req->chunk);
    }
    for (size_t i = 0; i < count && failed.ok() && !erase; ++i) {
      size_t p = positions ? (*positions)[i] : i;
      prefetch_ahead(i);
      StoreKey key = whole ? StoreKey{req->data.keys[p]} : req->chunk;
      ShardStore::Slot slot;
      if (push && ((!taken_before.empty() && taken_before[p]) || pushed_early)) {
        if (pull && whole) failed = store.Find(key, 0, options_.default_length, &slot);
        if (pull && !whole) failed = store.Find(key, req->chunk_len, req->chunk_len, &slot);
      } else if (push) {
        size_t begin = req->offsets.empty() ? p * req->width : req->offsets[p];
        size_t len = req->offsets.empty() ? req->width : req->offsets[p + 1] - begin;
        const float* g = req->data.vals.data() + begin;
        if (options_.sync_aggregation) {
          if (TakesRoundPush(req->meta, key, store)) {
            failed = store.Aggregate(key, g, static_cast<uint32_t>(len), req->meta.clock);
          }
          if (failed.ok() && pull) failed = store.Find(key, 0, 0, &slot);
        } else {
          failed = store.Find(key, static_cast<uint32_t>(len), static_cast<uint32_t>(len), &slot);
          if (failed.ok()) optimizer_->Update(slot.values, slot.state(), g, len, slot.NextStep());
        }
      } else if (req->chunk.chunk >= 0) {
        failed = store.Find(key, req->chunk_len, req->chunk_len, &slot);
      } else {
        failed = store.Find(key, 0, options_.default_length, &slot);
      }
      if (failed.ok() && pull) {
        size_t at = out.size();
        out.resize(at + slot.len);
        std::memcpy(out.data() + at, slot.values, sizeof(float) * slot.len);
        req->lens[p] = static_cast<int>(slot.len);  // at most kMaxValueLength: fits
      }
    }
  } catch (const std::exception& e) {
    failed = Status::Internal(std::string("server failed: ") + e.what());
  } catch (...) {
    failed = Status::Internal("server failed: an exception that is not a std::exception");
  }
  EndPart(req, failed);
}

bool OptimizerServer::TakesRoundPush(const KVMeta& meta, const StoreKey& key,
                                     const ShardStore& store) {
  // Sent again after its server died, of a round that server had copied here.
  return !meta.resent || meta.clock >= store.CopiedFrom(key);
}

Status OptimizerServer::AggregatePart(Request* req, const std::vector<uint32_t>* positions,
                                      ShardStore& store) {
  const size_t count = positions ? positions->size() : req->data.keys.size();
  for (size_t i = 0; i < count; ++i) {
    const size_t p = positions ? (*positions)[i] : i;
    if (!req->taken_before.empty() && req->taken_before[p]) continue;
    const StoreKey key = req->chunk.chunk < 0 ? StoreKey{req->data.keys[p]} : req->chunk;
    if (!TakesRoundPush(req->meta, key, store)) continue;
    const size_t begin = req->offsets.empty() ? p * req->width : req->offsets[p];
    const size_t len = req->offsets.empty() ? req->width : req->offsets[p + 1] - begin;
    Status s = store.Aggregate(key, req->data.vals.data() + begin, static_cast<uint32_t>(len),
                               req->meta.clock);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

bool OptimizerServer::HoldsAnyKey(const Request* req, const std::vector<uint32_t>* positions,
                                  const ShardStore& store) {
  if (req->chunk.chunk >= 0) return store.HeldFrom(req->chunk) >= 0;
  const size_t count = positions ? positions->size() : req->data.keys.size();
  for (size_t i = 0; i < count; ++i) {
    if (store.HeldFrom(StoreKey{req->data.keys[positions ? (*positions)[i] : i]}) >= 0) return true;
  }
  return false;
}

void OptimizerServer::EndPart(Request* req, const Status& status) {
  if (!status.ok()) {
    std::lock_guard<std::mutex> lock(req->status_mu);
    if (req->status.ok()) req->status = status;
  }
  // The part that brings the count to zero answers; acq_rel makes every other part's
  // writes visible to it.
  if (req->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish(req);
}

void OptimizerServer::Finish(Request* req) {
  std::unique_ptr<Request> owned(req);
  if (req->lose_answer) {
    LOG(WARNING) << "PS_LOSE_PUSH_ANSWER: the answer to push "
                 << Postoffice::Get()->config().lose_push_answer
                 << " (request " << req->meta.request_id << " from node " << req->meta.sender
                 << "), applied here, is not sent, as if lost";
    answered_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!req->status.ok()) {
    server_->ResponseError(req->meta, req->status);
  } else if (!req->meta.pull) {
    server_->Response(req->meta);
  } else {
    KVPairs<float> res;
    res.keys = req->data.keys;
    res.lens = SArray<int>(req->lens);
    if (req->positions.empty()) {
      res.vals = req->part_vals[0];
    } else {
      // Parts hold their keys' values in their own order; lay them out in request order.
      size_t n = req->data.keys.size();
      std::vector<size_t> offsets = ValueOffsets(req->lens.data(), n);
      res.vals.resize(offsets[n]);
      for (size_t part = 0; part < req->positions.size(); ++part) {
        const float* from = req->part_vals[part].data();
        for (uint32_t p : req->positions[part]) {
          size_t len = offsets[p + 1] - offsets[p];
          std::memcpy(res.vals.data() + offsets[p], from, sizeof(float) * len);
          from += len;
        }
      }
    }
    server_->Response(req->meta, res);
  }
  answered_.fetch_add(1, std::memory_order_relaxed);
}

size_t OptimizerServer::NumKeys() {
  size_t total = 0;
  for (auto& shard : shards_) shard->RunAndWait([&](ShardStore& s) { total += s.num_keys(); });
  return total;
}

size_t OptimizerServer::PayloadBytes() {
  size_t total = 0;
  for (auto& shard : shards_) {
    shard->RunAndWait([&](ShardStore& s) { total += s.payload_bytes(); });
  }
  return total;
}

}  // namespace ps
