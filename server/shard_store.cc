#include "shard_store.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace ps {
namespace {
constexpr size_t kBlockFloats = size_t{1} << 20;  // 4 MiB
}  // namespace

std::string StoreKey::Name() const {
  if (chunk < 0) return "key " + std::to_string(key);
  return "chunk " + std::to_string(chunk) + " of key " + std::to_string(key);
}

float* ShardStore::Allocate(size_t floats) {
  if (floats > kBlockFloats / 4) {  // big values get an allocation of their own
    big_blocks_.emplace_back(new float[floats]);
    return big_blocks_.back().get();
  }
  if (block_size_ == 0 || block_used_ + floats > block_size_) {
    blocks_.emplace_back(new float[kBlockFloats]);
    block_size_ = kBlockFloats;
    block_used_ = 0;
  }
  float* p = blocks_.back().get() + block_used_;
  block_used_ += floats;
  return p;
}

ShardStore::Slot* ShardStore::FindExisting(const StoreKey& key) {
  if (key.chunk < 0) return slots_.Find(key.key);
  auto it = chunks_.find(key);
  return it == chunks_.end() ? nullptr : &it->second.slot;
}

Status ShardStore::Find(const StoreKey& key, uint32_t want_len, uint32_t create_len,
                        Slot** slot) {
  if (key.chunk < 0) {
    if (Slot* found = slots_.Find(key.key)) {
      if (want_len && found->len != want_len) {
        return Status::InvalidArgument("key " + std::to_string(key.key) + " holds " +
                                       std::to_string(found->len) + " values, not " +
                                       std::to_string(want_len));
      }
      *slot = found;
      return Status::OK();
    }
    if (!chunks_.empty()) {
      auto first = chunks_.find(StoreKey{key.key, 0});
      if (first != chunks_.end()) {
        return Status::InvalidArgument(
            "key " + std::to_string(key.key) + " is stored in chunks (" +
            std::to_string(first->second.value_len) +
            " values): this worker does not know its length; push it first, or pull it "
            "alone into an output array of that size");
      }
    }
    return Create(key, create_len, slot);
  }
  auto it = chunks_.find(key);
  if (it != chunks_.end()) {
    const ChunkSlot& c = it->second;
    if (c.chunk_offset != key.chunk_offset || c.value_len != key.value_len ||
        (want_len && c.slot.len != want_len)) {
      return Status::InvalidArgument(
          key.Name() + " holds values " + std::to_string(c.chunk_offset) + ".." +
          std::to_string(c.chunk_offset + c.slot.len) + " of " + std::to_string(c.value_len) +
          "; the request has " + std::to_string(key.chunk_offset) + ".." +
          std::to_string(key.chunk_offset + (want_len ? want_len : create_len)) + " of " +
          std::to_string(key.value_len) + " (the key's length changed, or PS_CHUNK_BYTES did)");
    }
    *slot = &it->second.slot;
    return Status::OK();
  }
  if (key.chunk == 0) {
    if (Slot* whole = slots_.Find(key.key)) {
      return Status::InvalidArgument("key " + std::to_string(key.key) + " holds a whole value of " +
                                     std::to_string(whole->len) + "; the request has it in chunks (" +
                                     std::to_string(key.value_len) + " values)");
    }
  }
  return Create(key, create_len, slot);
}

Status ShardStore::Create(const StoreKey& key, uint32_t len, Slot** slot) {
  if (len == 0) return Status::InvalidArgument("cannot create a key of length 0");
  size_t width = optimizer_->StateWidth();
  float* mem = Allocate(static_cast<size_t>(len) * (1 + width));
  Slot s;
  s.values = mem;
  s.len = len;
  init_.Fill(key.key, s.values, len, key.chunk < 0 ? 0 : key.chunk_offset);
  std::memset(s.state(), 0, sizeof(float) * len * width);
  payload_bytes_ += sizeof(float) * len * (1 + width);
  if (key.chunk < 0) {
    *slot = slots_.Insert(key.key, s);
  } else {
    ChunkSlot& c = chunks_[key];
    c.slot = s;
    c.chunk_offset = key.chunk_offset;
    c.value_len = key.value_len;
    *slot = &c.slot;
  }
  return Status::OK();
}

Status ShardStore::Aggregate(const StoreKey& key, const float* g, uint32_t len, int64_t clock) {
  if (clock < closed_below_) {
    return Status::InvalidArgument("push of clock " + std::to_string(clock) + " to " +
                                   key.Name() + " after its round was applied (every " +
                                   "counted worker has ended clock " +
                                   std::to_string(closed_below_ - 1) + ")");
  }
  Slot* slot = nullptr;
  Status s = Find(key, len, len, &slot);  // creates the key and checks the length
  if (!s.ok()) return s;
  Round& round = rounds_[clock][key];
  if (round.count == 0) round.sum.assign(len, 0.0f);
  for (uint32_t i = 0; i < len; ++i) round.sum[i] += g[i];
  ++round.count;
  return Status::OK();
}

void ShardStore::CloseRounds(int64_t minimum) {
  if (minimum <= closed_below_) return;
  std::vector<float> mean;
  while (!rounds_.empty() && rounds_.begin()->first < minimum) {
    for (auto& [key, round] : rounds_.begin()->second) {
      Slot* slot = FindExisting(key);  // created by Aggregate; never removed
      mean.resize(round.sum.size());
      float n = static_cast<float>(round.count);
      for (size_t i = 0; i < mean.size(); ++i) mean[i] = round.sum[i] / n;
      optimizer_->Update(slot->values, slot->state(), mean.data(), slot->len, ++slot->steps);
    }
    rounds_.erase(rounds_.begin());
  }
  closed_below_ = minimum;
  while (!parked_.empty() && parked_.begin()->first <= closed_below_) {
    auto task = std::move(parked_.begin()->second);
    parked_.erase(parked_.begin());
    task(*this);
  }
}

void ShardStore::Park(int64_t need, std::function<void(ShardStore&)> task) {
  if (need <= closed_below_) {
    task(*this);
    return;
  }
  parked_.emplace(need, std::move(task));
}

size_t ShardStore::open_round_entries() const {
  size_t n = 0;
  for (const auto& kv : rounds_) n += kv.second.size();
  return n;
}

void ShardStore::Snapshot(std::vector<CheckpointRecord>* out) const {
  size_t width = optimizer_->StateWidth();
  auto record = [&](const StoreKey& key, const Slot& slot) {
    CheckpointRecord r;
    r.key = key.key;
    r.chunk = key.chunk;
    r.chunk_offset = key.chunk_offset;
    r.value_len = key.value_len;
    r.steps = slot.steps;
    r.values.assign(slot.values, slot.values + slot.len);
    r.state.assign(slot.state(), slot.state() + slot.len * width);
    out->push_back(std::move(r));
  };
  slots_.ForEach([&](Key key, const Slot& slot) { record(StoreKey{key}, slot); });
  for (const auto& kv : chunks_) {
    StoreKey key = kv.first;
    key.chunk_offset = kv.second.chunk_offset;
    key.value_len = kv.second.value_len;
    record(key, kv.second.slot);
  }
}

Status ShardStore::Restore(const CheckpointRecord& record) {
  uint32_t len = static_cast<uint32_t>(record.values.size());
  if (len == 0 || record.state.size() != len * optimizer_->StateWidth()) {
    return Status::DataLoss("checkpoint record of key " + std::to_string(record.key) +
                            " does not fit this optimizer");
  }
  Slot* slot = nullptr;
  StoreKey key{record.key, record.chunk, record.chunk_offset, record.value_len};
  Status s = Find(key, 0, len, &slot);
  if (!s.ok()) return s;
  if (slot->len != len) {
    return Status::InvalidArgument(key.Name() + " already holds " +
                                   std::to_string(slot->len) + " values");
  }
  std::memcpy(slot->values, record.values.data(), sizeof(float) * len);
  // sgd keeps no state: an empty vector's data() is null, undefined for memcpy.
  if (!record.state.empty()) {
    std::memcpy(slot->state(), record.state.data(), sizeof(float) * record.state.size());
  }
  slot->steps = record.steps;
  return Status::OK();
}

}  // namespace ps
