// ShardStore: the keys one shard thread owns, each with its values and optimizer
// state side by side in one arena allocation.
//
// Thread safety: none; owned and used by exactly one shard thread.
#ifndef HERDPS_SERVER_SHARD_STORE_H_
#define HERDPS_SERVER_SHARD_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "checkpoint.h"
#include "key_table.h"
#include "ps/base.h"
#include "ps/internal/hash.h"
#include "ps/optimizer.h"
#include "ps/status.h"
#include "ps/value_init.h"

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

class ShardStore {
 public:
  using Slot = ps::Slot;

  ShardStore(const Optimizer* optimizer, const ValueInit& init)
      : optimizer_(optimizer), init_(init) {}

  // The slot of `key`. A present key must hold `want_len` values (0: any length),
  // else InvalidArgument; an absent one is created with `create_len` initialised values.
  // A whole key and the chunks of the same key never mix: asking for one where the
  // other is stored is InvalidArgument naming both (chunk 0 lives on the key's shard,
  // so this shard can tell).
  Status Find(const StoreKey& key, uint32_t want_len, uint32_t create_len, Slot** slot);
  Status Find(Key key, uint32_t want_len, uint32_t create_len, Slot** slot) {
    return Find(StoreKey{key}, want_len, create_len, slot);
  }

  // Synchronous aggregation (BSP): adds a gradient pushed in worker clock `clock` to
  // the key's round of that clock. Nothing is applied until the round closes.
  // InvalidArgument if the clock's rounds are already closed (a push from a worker
  // that no longer counts) or the length differs from the key's.
  Status Aggregate(const StoreKey& key, const float* g, uint32_t len, int64_t clock);
  // Every counted worker has ended the clocks below `minimum`: applies the rounds of
  // those clocks, in clock order, one optimizer step per key and clock with the mean of
  // the round's pushes; then runs the parked tasks that were waiting for them.
  void CloseRounds(int64_t minimum);
  // Rounds of every clock below this have been applied.
  int64_t closed_below() const { return closed_below_; }
  // Runs `task` once the rounds of every clock below `need` are applied (at once if
  // they are). Tasks waiting for the same rounds run in the order they were parked.
  void Park(int64_t need, std::function<void(ShardStore&)> task);
  // Pushes held in open rounds, and tasks parked (for statistics and tests).
  size_t open_round_entries() const;
  size_t parked() const { return parked_.size(); }

  // Appends every key's record (for checkpoints).
  void Snapshot(std::vector<CheckpointRecord>* out) const;
  // Sets a key to exactly the record's values, state and step count.
  Status Restore(const CheckpointRecord& record);

  // Keys and chunks stored.
  size_t num_keys() const { return slots_.size() + chunks_.size(); }
  // Bytes of values and optimizer state held (not counting the key table).
  size_t payload_bytes() const { return payload_bytes_; }

 private:
  float* Allocate(size_t floats);
  Status Create(const StoreKey& key, uint32_t len, Slot** slot);
  Slot* FindExisting(const StoreKey& key);

  // A chunk's slot with the layout it was created with.
  struct ChunkSlot {
    Slot slot;
    uint64_t chunk_offset = 0;
    uint64_t value_len = 0;
  };

  // The pushes of one key in one clock, summed. Under BSP a worker is at most one
  // clock ahead of the slowest, so at most two clocks' rounds are open at a time.
  struct Round {
    std::vector<float> sum;
    uint32_t count = 0;
  };

  const Optimizer* optimizer_;
  ValueInit init_;
  std::map<int64_t, std::unordered_map<StoreKey, Round, StoreKeyHash>> rounds_;  // by clock
  int64_t closed_below_ = 0;
  std::multimap<int64_t, std::function<void(ShardStore&)>> parked_;  // by clock needed
  KeyTable slots_;
  // Chunks of large values: few, each big, so a node-based map costs nothing.
  std::unordered_map<StoreKey, ChunkSlot, StoreKeyHash> chunks_;
  // Arena: slots are carved from large blocks, so a small key costs no malloc.
  std::vector<std::unique_ptr<float[]>> blocks_;
  std::vector<std::unique_ptr<float[]>> big_blocks_;
  size_t block_used_ = 0;
  size_t block_size_ = 0;
  size_t payload_bytes_ = 0;
};

}  // namespace ps

#endif  // HERDPS_SERVER_SHARD_STORE_H_
