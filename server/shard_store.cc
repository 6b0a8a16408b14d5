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
  if (Slot* found = slots_.Find(key)) {
    if (want_len && found->len != want_len) {
      return Status::InvalidArgument("key " + std::to_string(key) + " holds " +
                                     std::to_string(found->len) + " values, not " +
                                     std::to_string(want_len));
    }
    *slot = found;
    return Status::OK();
  }
  uint32_t len = create_len;
  if (len == 0) return Status::InvalidArgument("cannot create a key of length 0");
  size_t width = optimizer_->StateWidth();
  float* mem = Allocate(len * (1 + width));
  Slot s;
  s.values = mem;
  s.len = len;
  init_.Fill(key, s.values, len);
  std::memset(s.state(), 0, sizeof(float) * len * width);
  payload_bytes_ += sizeof(float) * len * (1 + width);
  *slot = slots_.Insert(key, s);
  return Status::OK();
}

Status ShardStore::Aggregate(Key key, const float* g, uint32_t len, int64_t clock) {
  if (clock < closed_below_) {
    return Status::InvalidArgument("push of clock " + std::to_string(clock) + " to key " +
                                   std::to_string(key) + " after its round was applied (every " +
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
      Slot* slot = slots_.Find(key);  // created by Aggregate; never removed
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
  slots_.ForEach([&](Key key, const Slot& slot) {
    CheckpointRecord r;
    r.key = key;
    r.steps = slot.steps;
    r.values.assign(slot.values, slot.values + slot.len);
    r.state.assign(slot.state(), slot.state() + slot.len * width);
    out->push_back(std::move(r));
  });
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
  std::memcpy(slot->state(), record.state.data(), sizeof(float) * record.state.size());
  slot->steps = record.steps;
  return Status::OK();
}

}  // namespace ps
