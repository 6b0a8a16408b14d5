#include "shard_store.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace ps {
namespace {
constexpr size_t kChunkFloats = size_t{1} << 20;  // 4 MiB
}  // namespace

float* ShardStore::Allocate(size_t floats) {
  if (floats > kChunkFloats / 4) {  // big values get an allocation of their own
    big_chunks_.emplace_back(new float[floats]);
    return big_chunks_.back().get();
  }
  if (chunk_size_ == 0 || chunk_used_ + floats > chunk_size_) {
    chunks_.emplace_back(new float[kChunkFloats]);
    chunk_size_ = kChunkFloats;
    chunk_used_ = 0;
  }
  float* p = chunks_.back().get() + chunk_used_;
  chunk_used_ += floats;
  return p;
}

Status ShardStore::Find(Key key, uint32_t want_len, uint32_t create_len, Slot** slot) {
  auto it = slots_.find(key);
  if (it != slots_.end()) {
    if (want_len && it->second.len != want_len) {
      return Status::InvalidArgument("key " + std::to_string(key) + " holds " +
                                     std::to_string(it->second.len) + " values, not " +
                                     std::to_string(want_len));
    }
    *slot = &it->second;
    return Status::OK();
  }
  uint32_t len = create_len;
  if (len == 0) return Status::InvalidArgument("cannot create a key of length 0");
  size_t width = optimizer_->StateWidth();
  float* mem = Allocate(len * (1 + width));
  Slot s;
  s.values = mem;
  s.state = mem + len;
  s.len = len;
  init_.Fill(key, s.values, len);
  std::memset(s.state, 0, sizeof(float) * len * width);
  payload_bytes_ += sizeof(float) * len * (1 + width);
  *slot = &(slots_[key] = s);
  return Status::OK();
}

Status ShardStore::Push(Key key, const float* g, uint32_t len) {
  Slot* slot = nullptr;
  Status s = Find(key, len, len, &slot);
  if (!s.ok()) return s;
  optimizer_->Update(slot->values, slot->state, g, len, ++slot->steps);
  return Status::OK();
}

void ShardStore::Snapshot(std::vector<CheckpointRecord>* out) const {
  size_t width = optimizer_->StateWidth();
  for (const auto& kv : slots_) {
    CheckpointRecord r;
    r.key = kv.first;
    r.steps = kv.second.steps;
    r.values.assign(kv.second.values, kv.second.values + kv.second.len);
    r.state.assign(kv.second.state, kv.second.state + kv.second.len * width);
    out->push_back(std::move(r));
  }
}

Status ShardStore::Restore(const CheckpointRecord& record) {
  uint32_t len = static_cast<uint32_t>(record.values.size());
  if (len == 0 || record.state.size() != len * optimizer_->StateWidth()) {
    return Status::DataLoss("checkpoint record of key " + std::to_string(record.key) +
                            " does not fit this optimizer");
  }
  Slot* slot = nullptr;
  Status s = Find(record.key, 0, len, &slot);
  if (!s.ok()) return s;
  if (slot->len != len) {
    return Status::InvalidArgument("key " + std::to_string(record.key) + " already holds " +
                                   std::to_string(slot->len) + " values");
  }
  std::memcpy(slot->values, record.values.data(), sizeof(float) * len);
  std::memcpy(slot->state, record.state.data(), sizeof(float) * record.state.size());
  slot->steps = record.steps;
  return Status::OK();
}

}  // namespace ps
