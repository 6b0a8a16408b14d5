// ShardStore: the keys one shard thread owns, each with its values and optimizer
// state side by side in one arena allocation.
//
// Thread safety: none; owned and used by exactly one shard thread.
#ifndef HERDPS_SERVER_SHARD_STORE_H_
#define HERDPS_SERVER_SHARD_STORE_H_

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "checkpoint.h"
#include "ps/base.h"
#include "ps/optimizer.h"
#include "ps/status.h"
#include "ps/value_init.h"

namespace ps {

class ShardStore {
 public:
  struct Slot {
    float* values = nullptr;  // len floats
    float* state = nullptr;   // StateWidth() * len floats, zero at creation
    uint32_t len = 0;
    int64_t steps = 0;        // optimizer steps applied to this key
  };

  ShardStore(const Optimizer* optimizer, const ValueInit& init)
      : optimizer_(optimizer), init_(init) {}

  // The slot of `key`. A present key must hold `want_len` values (0: any length),
  // else InvalidArgument; an absent one is created with `create_len` initialised values.
  Status Find(Key key, uint32_t want_len, uint32_t create_len, Slot** slot);

  // Applies one optimizer step with gradient g[0..len) to the key.
  Status Push(Key key, const float* g, uint32_t len);

  // Appends every key's record (for checkpoints).
  void Snapshot(std::vector<CheckpointRecord>* out) const;
  // Sets a key to exactly the record's values, state and step count.
  Status Restore(const CheckpointRecord& record);

  size_t num_keys() const { return slots_.size(); }
  // Bytes of values and optimizer state held (not counting the key table).
  size_t payload_bytes() const { return payload_bytes_; }
  const std::unordered_map<Key, Slot>& slots() const { return slots_; }

 private:
  float* Allocate(size_t floats);

  const Optimizer* optimizer_;
  ValueInit init_;
  std::unordered_map<Key, Slot> slots_;
  // Arena: slots are carved from large chunks, so a small key costs no malloc.
  std::vector<std::unique_ptr<float[]>> chunks_;
  std::vector<std::unique_ptr<float[]>> big_chunks_;
  size_t chunk_used_ = 0;
  size_t chunk_size_ = 0;
  size_t payload_bytes_ = 0;
};

}  // namespace ps

#endif  // HERDPS_SERVER_SHARD_STORE_H_
