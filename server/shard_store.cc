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

Status ShardStore::AddToRound(Key key, Round* round, const float* g, uint32_t len, int worker,
                              int num_workers, bool* complete) {
  *complete = false;
  if (round->contributed.empty()) {
    round->sum.assign(len, 0.0f);
    round->contributed.assign(num_workers, false);
  }
  if (round->contributed[worker]) {
    if (round->ahead.size() >= kMaxAheadPerKey) {
      return Status::Unavailable("worker " + std::to_string(worker) + " is " +
                                 std::to_string(kMaxAheadPerKey) +
                                 " rounds ahead of the others on key " + std::to_string(key) +
                                 "; synchronous aggregation waits for every worker");
    }
    round->ahead.emplace_back(worker, std::vector<float>(g, g + len));
    return Status::OK();
  }
  for (uint32_t i = 0; i < len; ++i) round->sum[i] += g[i];
  round->contributed[worker] = true;
  *complete = ++round->count == num_workers;
  return Status::OK();
}

Status ShardStore::Aggregate(Key key, const float* g, uint32_t len, int worker,
                             int num_workers) {
  if (worker < 0 || worker >= num_workers) {
    return Status::InvalidArgument("push from worker rank " + std::to_string(worker) +
                                   " outside the job's " + std::to_string(num_workers));
  }
  Slot* slot = nullptr;
  Status s = Find(key, len, len, &slot);  // creates the key and checks the length
  if (!s.ok()) return s;
  Round& round = rounds_[key];
  bool complete = false;
  s = AddToRound(key, &round, g, len, worker, num_workers, &complete);
  if (!s.ok()) return s;
  while (complete) {
    std::vector<float> mean(len);
    for (uint32_t i = 0; i < len; ++i) mean[i] = round.sum[i] / static_cast<float>(num_workers);
    optimizer_->Update(slot->values, slot->state(), mean.data(), len, ++slot->steps);
    // The next round starts with the pushes that were waiting for it, in order.
    std::vector<std::pair<int, std::vector<float>>> ahead;
    ahead.swap(round.ahead);
    round.sum.assign(len, 0.0f);
    round.contributed.assign(num_workers, false);
    round.count = 0;
    complete = false;
    for (auto& [w, grad] : ahead) {
      bool done = false;
      AddToRound(key, &round, grad.data(), len, w, num_workers, &done);  // cannot overflow
      complete = complete || done;
    }
  }
  if (round.count == 0 && round.ahead.empty()) rounds_.erase(key);
  return Status::OK();
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
