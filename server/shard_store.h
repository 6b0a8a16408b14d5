// ShardStore: the keys one shard thread owns, each with its values and optimizer
// state side by side in one arena allocation.
//
// Thread safety: none; owned and used by exactly one shard thread.
#ifndef HERDPS_SERVER_SHARD_STORE_H_
#define HERDPS_SERVER_SHARD_STORE_H_

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "checkpoint.h"
#include "key_table.h"
#include "ps/base.h"
#include "ps/optimizer.h"
#include "ps/status.h"
#include "ps/value_init.h"

namespace ps {

class ShardStore {
 public:
  using Slot = ps::Slot;

  ShardStore(const Optimizer* optimizer, const ValueInit& init)
      : optimizer_(optimizer), init_(init) {}

  // The slot of `key`. A present key must hold `want_len` values (0: any length),
  // else InvalidArgument; an absent one is created with `create_len` initialised values.
  Status Find(Key key, uint32_t want_len, uint32_t create_len, Slot** slot);

  // Synchronous aggregation: adds worker `worker`'s gradient to the key's current
  // round; once all `num_workers` have contributed, applies one optimizer step with
  // their mean and starts the next round. A worker that pushes again before the round
  // is complete is ahead: its gradient waits for the next round (in order).
  Status Aggregate(Key key, const float* g, uint32_t len, int worker, int num_workers);

  // Appends every key's record (for checkpoints).
  void Snapshot(std::vector<CheckpointRecord>* out) const;
  // Sets a key to exactly the record's values, state and step count.
  Status Restore(const CheckpointRecord& record);

  size_t num_keys() const { return slots_.size(); }
  // Bytes of values and optimizer state held (not counting the key table).
  size_t payload_bytes() const { return payload_bytes_; }

 private:
  float* Allocate(size_t floats);

  // A key's aggregation round in progress.
  struct Round {
    std::vector<float> sum;
    std::vector<bool> contributed;  // by worker rank
    int count = 0;
    std::vector<std::pair<int, std::vector<float>>> ahead;  // pushes for later rounds
  };
  // Pushes waiting for later rounds, per key, before a push is refused: bounds the
  // memory a worker that runs far ahead (or a dead one holding a round open) can cost.
  static constexpr size_t kMaxAheadPerKey = 256;
  static Status AddToRound(Key key, Round* round, const float* g, uint32_t len, int worker,
                           int num_workers, bool* complete);

  const Optimizer* optimizer_;
  ValueInit init_;
  std::unordered_map<Key, Round> rounds_;
  KeyTable slots_;
  // Arena: slots are carved from large chunks, so a small key costs no malloc.
  std::vector<std::unique_ptr<float[]>> chunks_;
  std::vector<std::unique_ptr<float[]>> big_chunks_;
  size_t chunk_used_ = 0;
  size_t chunk_size_ = 0;
  size_t payload_bytes_ = 0;
};

}  // namespace ps

#endif  // HERDPS_SERVER_SHARD_STORE_H_
