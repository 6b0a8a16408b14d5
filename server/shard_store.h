// ShardStore: the keys one shard thread owns, with their values, optimizer state and
// step counts.
//
// A key of one value lives entirely in its KeyTable record: the step count (32 bits)
// and the value followed by its StateWidth() floats of state, so one-float keys cost
// the table's slot and nothing else. A longer key's record holds the index of a
// WideSlot, whose values and state are one ValueArena array; chunks of large values
// are kept apart in a map of their own. Keys and chunks can be erased; their memory
// is reused by later keys.
//
// Thread safety: none; owned and used by exactly one shard thread.
#ifndef HERDPS_SERVER_SHARD_STORE_H_
#define HERDPS_SERVER_SHARD_STORE_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "catch_up_records.h"
#include "checkpoint.h"
#include "key_table.h"
#include "ps/base.h"
#include "ps/internal/hash.h"
#include "ps/optimizer.h"
#include "ps/status.h"
#include "ps/value_init.h"
#include "value_arena.h"

namespace ps {

// What a shard stores under: a whole key, or one chunk of a key whose value is stored
// in chunks (docs/pipeline.md).
struct StoreKey {
  Key key = 0;
  int32_t chunk = -1;         // -1: the whole value
  uint64_t chunk_offset = 0;  // a chunk: its first value within the key
  uint64_t value_len = 0;     // a chunk: the key's whole length
  bool operator==(const StoreKey& o) const { return key == o.key && chunk == o.chunk; }
  std::string Name() const;   // "key 7" or "chunk 2 of key 7"
};

struct StoreKeyHash {
  size_t operator()(const StoreKey& k) const {
    return static_cast<size_t>(Mix64(k.key ^ (static_cast<uint64_t>(k.chunk) << 40)));
  }
};

// A round of synchronous aggregation a key's owner closed (ShardStore::CloseRounds), as
// its replica takes it (PS_REPLICATE_ROUNDS).
struct ClosedRound {
  StoreKey key;  // with its chunk layout
  int64_t clock = 0;
  uint32_t count = 0;  // pushes summed
  std::vector<float> sum;
};

// Which keys a server rebuilds the rounds of (ShardStore::SetHolds): for a held key, the
// clock its rounds are rebuilt from; -1 for a key that is not held.
using HoldFunction = std::function<int64_t(const StoreKey&)>;

// Step counts are 32 bits and stop at this (see Slot::NextStep).
constexpr uint32_t kMaxSteps = 0xfffffffe;

// The most values one key or chunk holds. A length is 32-bit unsigned here (Slot::len),
// and a pull's answer carries it in its lens frame as int32: the smaller bound holds, so
// that every stored length can be answered. Requests are checked against it before any
// key is touched (server/request_bounds.h).
constexpr uint32_t kMaxValueLength = 0x7fffffff;

// A view of one stored key or chunk. It stays valid until the next insert or erase on
// its store: either may move the record it points into.
struct Slot {
  float* values = nullptr;  // len values, then StateWidth() * len floats of state
  uint32_t len = 0;
  uint32_t* steps = nullptr;  // optimizer steps applied
  float* state() const { return values + len; }
  // Counts one more optimizer step and returns the count including it. The count stops
  // at kMaxSteps (4.29e9): by then b^t is below 1e-18 for any beta <= 1 - 1e-8, so
  // Adam's bias corrections are exactly 1 in double whether t goes on or not.
  int64_t NextStep() const {
    if (*steps < kMaxSteps) ++*steps;
    return *steps;
  }
};

class ShardStore {
 public:
  using Slot = ps::Slot;

  ShardStore(const Optimizer* optimizer, const ValueInit& init);

  // The slot of `key`. A present key must hold `want_len` values (0: any length),
  // else InvalidArgument; an absent one is created with `create_len` initialised values
  // (1 to kMaxValueLength, else InvalidArgument).
  // A whole key and the chunks of the same key never mix: asking for one where the
  // other is stored is InvalidArgument naming both (chunk 0 lives on the key's shard,
  // so this shard can tell).
  Status Find(const StoreKey& key, uint32_t want_len, uint32_t create_len, Slot* slot) {
    // The common case inline (a whole key that is there, of the right length): this runs
    // once per key of every request.
    if (key.chunk < 0) {
      if (const uint8_t* record = keys_.Find(key.key)) {
        Slot found = View(record);
        if (!want_len || found.len == want_len) {
          *slot = found;
          return Status::OK();
        }
      }
    }
    return FindOrCreate(key, want_len, create_len, slot);
  }
  Status Find(Key key, uint32_t want_len, uint32_t create_len, Slot* slot) {
    return Find(StoreKey{key}, want_len, create_len, slot);
  }
  // Hints the caches to load the record of whole key `key` (a Find soon after is faster).
  void Prefetch(Key key) const { keys_.Prefetch(key); }

  // Removes a whole key or one chunk, with its values, optimizer state, step count and
  // the pushes held for it in open rounds; a later Find creates it afresh. An absent
  // key is not an error. A whole key stored in chunks, or chunk 0 of a key stored
  // whole, is InvalidArgument, and nothing is removed.
  Status Erase(const StoreKey& key);

  // Synchronous aggregation (BSP). Rounds are keyed by worker clock; closed_below() is
  // the minimum this shard has applied: every counted worker had ended the clocks below.
  //
  // How far ahead of closed_below() a push or a parked request may be. Under BSP a
  // worker's requests carry at most the coordinator's minimum + 1 (its clock, counted
  // up while Clock() waits); the server hears of each minimum a little later than the
  // workers (another connection), so 7 more clocks are allowed for minimums still on
  // their way. A key therefore has at most kMaxClocksAhead + 1 rounds open.
  static constexpr int64_t kMaxClocksAhead = 8;
  // Tasks parked at once per key (a parked task counts against each key it holds): a
  // task beyond it is refused with Unavailable.
  static constexpr uint32_t kMaxParkedPerKey = 4096;

  // Adds a gradient pushed in worker clock `clock` to the key's round of that clock.
  // Nothing is applied until the round closes. InvalidArgument if the clock's rounds
  // are already closed (a push from a worker that no longer counts), if it is more than
  // kMaxClocksAhead ahead of closed_below(), or if the length differs from the key's.
  Status Aggregate(const StoreKey& key, const float* g, uint32_t len, int64_t clock);
  // Every counted worker has ended the clocks below `minimum`: applies the rounds of
  // those clocks, in clock order, one optimizer step per key and clock with the mean of
  // the round's pushes; then runs the parked tasks that were waiting for them. Rounds
  // of held keys (SetHolds) stay open. Each round applied is appended to *closed, when
  // given, in the order applied.
  void CloseRounds(int64_t minimum, std::vector<ClosedRound>* closed = nullptr);
  // A replica takes a round its key's owner closed (PS_REPLICATE_ROUNDS): one optimizer
  // step with the mean sum / count, exactly as CloseRounds applies it on the owner, the
  // key created as a push would create it. InvalidArgument, and nothing changed, for a
  // count of 0 or a length other than the key's.
  Status ApplyRound(const StoreKey& key, const float* sum, uint32_t len, uint32_t count);

  // Rounds of every clock below this have been applied.
  int64_t closed_below() const { return closed_below_; }

  // The keys a parked task holds, viewed in the caller's arrays, which must stay valid
  // until the task has run: keys[positions[i]] for i < count, or keys[i] without
  // positions.
  struct KeyList {
    const Key* keys = nullptr;
    const uint32_t* positions = nullptr;
    size_t count = 0;
    Key operator[](size_t i) const { return keys[positions ? positions[i] : i]; }
  };
  // Runs with OK once the rounds it waits for are applied, or with the reason it never
  // will (Shutdown).
  using ParkedTask = std::function<void(ShardStore&, const Status& ready)>;
  // Runs `task` once the rounds of every clock below `need` are applied (at once, and
  // OK, if they are). Tasks waiting for the same rounds run in the order they were
  // parked. Refused, without running or keeping the task: InvalidArgument when `need`
  // is more than kMaxClocksAhead ahead of closed_below(); Unavailable when one of `keys`
  // already has kMaxParkedPerKey tasks parked, or after Shutdown.
  Status Park(int64_t need, KeyList keys, ParkedTask task);
  // The store stops: runs every parked task, in order, with `why`, drops the open
  // rounds, and refuses later parks with `why`. So no parked request outlives the store.
  void Shutdown(const Status& why);
  // Held keys: a dead owner's keys this server serves now, whose latest rounds it
  // rebuilds from the pushes the workers send again (PS_REPLICATE_ROUNDS). `held(key)`
  // is the clock from which the key's rounds are rebuilt here (the rounds below are in
  // its state), or -1 for a key that is not held. While holds are set, Aggregate takes
  // a held key's pushes of that clock and later even below closed_below(), and no held
  // round is applied until ReleaseHolds. Replaces the holds set before (null: none).
  void SetHolds(HoldFunction held) { holds_ = std::move(held); }
  bool holding() const { return static_cast<bool>(holds_); }
  // The clock from which `key`'s rounds are rebuilt here; -1 when it is not held.
  int64_t HeldFrom(const StoreKey& key) const { return holds_ ? holds_(key) : -1; }
  // A dead owner's keys, held or released: `copied(key)` is the clock below which the
  // owner's copies brought the key's rounds here (-1: none of a dead owner's keys). A
  // push sent again of such a clock is in the key's state already. Replaces the one
  // set before (null: none).
  void SetCopied(HoldFunction copied) { copied_ = std::move(copied); }
  int64_t CopiedFrom(const StoreKey& key) const { return copied_ ? copied_(key) : -1; }
  // Runs `task` at the next ReleaseHolds (or Shutdown), in the order parked: a request
  // that reads a held key waits for its rounds.
  void ParkHeld(ParkedTask task);
  // The holds become `next` (null: none): the rounds of the keys no longer held, of
  // clocks below closed_below(), are applied in clock order (appended to *closed when
  // given), then the tasks ParkHeld kept run, in order.
  void ReleaseHolds(HoldFunction next, std::vector<ClosedRound>* closed = nullptr);
  // Pushes held in open rounds (held keys' included), tasks parked (ParkHeld's
  // included), and tasks parked that hold `key` (for statistics and tests).
  size_t open_round_entries() const;
  size_t parked() const { return parked_.size() + parked_on_holds_.size(); }
  uint32_t parked_on(Key key) const {
    auto it = parked_per_key_.find(key);
    return it == parked_per_key_.end() ? 0 : it->second;
  }

  // Appends every key's record (for checkpoints).
  void Snapshot(std::vector<CheckpointRecord>* out) const;
  // Sets a key to exactly the record's values and state, and its step count to the
  // record's clamped to [0, kMaxSteps].
  Status Restore(const CheckpointRecord& record);
  // Catch-up (replication): appends every stored key or chunk for which `keep` is true
  // (a chunk with its layout).
  void KeysWhere(const std::function<bool(const StoreKey&)>& keep,
                 std::vector<StoreKey>* out) const;
  // Appends the record of each of `keys` that is still stored, in their order, with the
  // pushes held for it in open rounds. A key erased since it was listed is skipped.
  void CatchUpRecordsOf(const StoreKey* keys, size_t n, std::vector<CatchUpRecord>* out);
  // Sets a key as Restore does, and its open rounds to the record's (its own dropped:
  // the sender's state holds what they held). A round of a clock this store has closed
  // already is applied at once, as CloseRounds would have.
  Status RestoreCatchUp(const CatchUpRecord& record);
  // Erases every stored key and chunk for which `drop` is true, with its open rounds (a
  // ring change: the keys and chunks this server no longer holds). Returns how many.
  size_t DropKeys(const std::function<bool(const StoreKey&)>& drop);

  // Keys and chunks stored.
  size_t num_keys() const { return keys_.size() + chunks_.size(); }
  // Bytes of values and optimizer state held, wherever they are (one-value keys hold
  // theirs in the key table).
  size_t payload_bytes() const { return payload_bytes_; }
  // Bytes of the key table (its slots and directory) and of the value arena.
  size_t table_bytes() const { return keys_.bytes(); }
  size_t arena_bytes() const { return arena_.bytes(); }

 private:
  // The whole length of `key` if it is stored in chunks here, else 0.
  uint64_t ChunkedLength(Key key) const;
  // A key of more than one value: its arrays live in the arena.
  struct WideSlot {
    float* values = nullptr;  // null while the slot is free
    uint32_t len = 0;
    uint32_t steps = 0;
  };
  // A chunk's arrays and step count, with the layout it was created with.
  struct ChunkSlot {
    float* values = nullptr;
    uint32_t len = 0;
    uint32_t steps = 0;
    uint64_t chunk_offset = 0;
    uint64_t value_len = 0;
  };

  // The pushes of one key in one clock, summed.
  struct Round {
    std::vector<float> sum;
    uint32_t count = 0;
  };

  // A key table record: the step count, then the value and its state. A wide key's
  // record has kWideMark for its step count and its WideSlot index in place of the
  // value.
  static constexpr uint32_t kWideMark = 0xffffffff;
  Slot View(const uint8_t* record) const {
    uint8_t* r = const_cast<uint8_t*>(record);
    uint32_t steps;
    std::memcpy(&steps, r, sizeof(steps));
    if (steps != kWideMark) {
      return Slot{reinterpret_cast<float*>(r + sizeof(uint32_t)), 1,
                  reinterpret_cast<uint32_t*>(r)};
    }
    uint32_t index;
    std::memcpy(&index, r + sizeof(uint32_t), sizeof(index));
    const WideSlot& w = wide_[index];
    return Slot{w.values, w.len, const_cast<uint32_t*>(&w.steps)};
  }
  // Find's general case: a chunk, an absent key, or a length to complain about.
  Status FindOrCreate(const StoreKey& key, uint32_t want_len, uint32_t create_len, Slot* slot);

  Status Create(const StoreKey& key, uint32_t len, Slot* slot);
  // Calls fn(key with its chunk layout, values, len, steps) for every whole key and chunk
  // stored; `values` runs on into the key's state.
  void ForEachStored(
      const std::function<void(const StoreKey&, const float*, uint32_t, uint32_t)>& fn) const;
  CheckpointRecord RecordOf(const StoreKey& key, const float* values, uint32_t len,
                            uint32_t steps) const;
  // One optimizer step on `slot` with the mean of a round's `count` pushes (`mean`:
  // scratch).
  void ApplyMean(const Slot& slot, const float* sum, size_t len, uint32_t count,
                 std::vector<float>* mean);
  // A stored key's or chunk's slot; false if absent.
  bool FindExisting(const StoreKey& key, Slot* slot);
  size_t PayloadBytes(uint32_t len) const { return sizeof(float) * len * (1 + width_); }

  const Optimizer* optimizer_;
  ValueInit init_;
  const size_t width_;  // optimizer_->StateWidth()
  using RoundsByKey = std::unordered_map<StoreKey, Round, StoreKeyHash>;
  std::map<int64_t, RoundsByKey> rounds_;  // by clock
  int64_t closed_below_ = 0;
  // Applies `round` to `key` (when still stored) and appends it to *closed when given.
  void ApplyClosed(const StoreKey& key, int64_t clock, Round& round, std::vector<float>* mean,
                   std::vector<ClosedRound>* closed);
  HoldFunction holds_;   // null: no key is held
  HoldFunction copied_;  // null: no dead owner's key here
  // Rounds of held keys of clocks below closed_below_, by clock (ReleaseHolds).
  std::map<int64_t, RoundsByKey> held_rounds_;
  std::vector<ParkedTask> parked_on_holds_;
  struct Parked {
    KeyList keys;
    ParkedTask task;
  };
  // Takes the first parked task out, releasing its keys' counts.
  ParkedTask Unpark();
  std::multimap<int64_t, Parked> parked_;             // by clock needed
  std::unordered_map<Key, uint32_t> parked_per_key_;  // keys with parked tasks only
  Status shut_down_;                                  // not OK once Shutdown ran
  KeyTable keys_;
  std::vector<WideSlot> wide_;
  std::vector<uint32_t> free_wide_;  // indexes of free WideSlots
  // Chunks of large values: few, each big, so a node-based map costs nothing.
  std::unordered_map<StoreKey, ChunkSlot, StoreKeyHash> chunks_;
  ValueArena arena_;
  size_t payload_bytes_ = 0;
};

}  // namespace ps

#endif  // HERDPS_SERVER_SHARD_STORE_H_
