#include "shard_store.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace ps {

std::string StoreKey::Name() const {
  if (chunk < 0) return "key " + std::to_string(key);
  return "chunk " + std::to_string(chunk) + " of key " + std::to_string(key);
}

ShardStore::ShardStore(const Optimizer* optimizer, const ValueInit& init)
    : optimizer_(optimizer),
      init_(init),
      width_(optimizer->StateWidth()),
      keys_(sizeof(uint32_t) + sizeof(float) * (1 + optimizer->StateWidth())) {}

bool ShardStore::FindExisting(const StoreKey& key, Slot* slot) {
  if (key.chunk < 0) {
    const uint8_t* record = keys_.Find(key.key);
    if (record) *slot = View(record);
    return record != nullptr;
  }
  auto it = chunks_.find(key);
  if (it == chunks_.end()) return false;
  ChunkSlot& c = it->second;
  slot->values = c.values;
  slot->len = c.len;
  slot->steps = &c.steps;
  return true;
}

Status ShardStore::FindOrCreate(const StoreKey& key, uint32_t want_len, uint32_t create_len,
                                Slot* slot) {
  if (key.chunk < 0) {
    if (const uint8_t* record = keys_.Find(key.key)) {
      Slot found = View(record);
      if (want_len && found.len != want_len) {
        return Status::InvalidArgument("key " + std::to_string(key.key) + " holds " +
                                       std::to_string(found.len) + " values, not " +
                                       std::to_string(want_len));
      }
      *slot = found;
      return Status::OK();
    }
    if (uint64_t chunked_len = ChunkedLength(key.key)) {
      return Status::InvalidArgument(
          "key " + std::to_string(key.key) + " is stored in chunks (" +
          std::to_string(chunked_len) +
          " values): this worker does not know its length; push it first, or pull it "
          "alone into an output array of that size");
    }
    return Create(key, create_len, slot);
  }
  auto it = chunks_.find(key);
  if (it != chunks_.end()) {
    ChunkSlot& c = it->second;
    if (c.chunk_offset != key.chunk_offset || c.value_len != key.value_len ||
        (want_len && c.len != want_len)) {
      return Status::InvalidArgument(
          key.Name() + " holds values " + std::to_string(c.chunk_offset) + ".." +
          std::to_string(c.chunk_offset + c.len) + " of " + std::to_string(c.value_len) +
          "; the request has " + std::to_string(key.chunk_offset) + ".." +
          std::to_string(key.chunk_offset + (want_len ? want_len : create_len)) + " of " +
          std::to_string(key.value_len) + " (the key's length changed, or PS_CHUNK_BYTES did)");
    }
    slot->values = c.values;
    slot->len = c.len;
    slot->steps = &c.steps;
    return Status::OK();
  }
  if (key.chunk == 0) {
    if (const uint8_t* whole = keys_.Find(key.key)) {
      return Status::InvalidArgument("key " + std::to_string(key.key) + " holds a whole value of " +
                                     std::to_string(View(whole).len) +
                                     "; the request has it in chunks (" +
                                     std::to_string(key.value_len) + " values)");
    }
  }
  return Create(key, create_len, slot);
}

Status ShardStore::Create(const StoreKey& key, uint32_t len, Slot* slot) {
  if (len == 0) return Status::InvalidArgument("cannot create a key of length 0");
  if (len > kMaxValueLength) {
    return Status::InvalidArgument("cannot create " + key.Name() + " with " + std::to_string(len) +
                                   " values: the limit is " + std::to_string(kMaxValueLength));
  }
  Slot s;
  s.len = len;
  if (key.chunk < 0 && len == 1) {
    uint8_t* record = keys_.Insert(key.key);  // zeroed: no steps, zero state
    s = View(record);
  } else {
    float* values = arena_.Allocate(static_cast<size_t>(len) * (1 + width_));
    std::memset(values + len, 0, sizeof(float) * len * width_);
    if (key.chunk < 0) {
      uint32_t index;
      if (free_wide_.empty()) {
        index = static_cast<uint32_t>(wide_.size());
        wide_.emplace_back();
      } else {
        index = free_wide_.back();
        free_wide_.pop_back();
      }
      WideSlot& w = wide_[index];
      w.values = values;
      w.len = len;
      w.steps = 0;
      uint8_t* record = keys_.Insert(key.key);
      std::memcpy(record, &kWideMark, sizeof(kWideMark));
      std::memcpy(record + sizeof(uint32_t), &index, sizeof(index));
      s.steps = &w.steps;
    } else {
      ChunkSlot& c = chunks_[key];
      c.values = values;
      c.len = len;
      c.steps = 0;
      c.chunk_offset = key.chunk_offset;
      c.value_len = key.value_len;
      s.steps = &c.steps;
    }
    s.values = values;
  }
  init_.Fill(key.key, s.values, len, key.chunk < 0 ? 0 : key.chunk_offset);
  payload_bytes_ += PayloadBytes(len);
  *slot = s;
  return Status::OK();
}

uint64_t ShardStore::ChunkedLength(Key key) const {
  if (chunks_.empty()) return 0;
  auto first = chunks_.find(StoreKey{key, 0});  // chunk 0 lives on the key's own shard
  return first == chunks_.end() ? 0 : first->second.value_len;
}

Status ShardStore::Erase(const StoreKey& key) {
  if (key.chunk < 0) {
    const uint8_t* record = keys_.Find(key.key);
    if (!record) {
      if (uint64_t chunked_len = ChunkedLength(key.key)) {
        return Status::InvalidArgument(
            "key " + std::to_string(key.key) + " is stored in chunks (" +
            std::to_string(chunked_len) +
            " values): erase it with all its values, so that every chunk's server gets "
            "the erase");
      }
      return Status::OK();
    }
    uint32_t steps;
    std::memcpy(&steps, record, sizeof(steps));
    if (steps == kWideMark) {
      uint32_t index;
      std::memcpy(&index, record + sizeof(uint32_t), sizeof(index));
      WideSlot& w = wide_[index];
      arena_.Release(w.values, static_cast<size_t>(w.len) * (1 + width_));
      payload_bytes_ -= PayloadBytes(w.len);
      w = WideSlot();
      free_wide_.push_back(index);
    } else {
      payload_bytes_ -= PayloadBytes(1);
    }
    keys_.Erase(key.key);
  } else {
    auto it = chunks_.find(key);
    if (it == chunks_.end()) {
      const uint8_t* whole = key.chunk == 0 ? keys_.Find(key.key) : nullptr;
      if (whole) {
        return Status::InvalidArgument(
            "key " + std::to_string(key.key) + " holds a whole value of " +
            std::to_string(View(whole).len) + "; the erase has it in chunks (" +
            std::to_string(key.value_len) + " values)");
      }
      return Status::OK();
    }
    ChunkSlot& c = it->second;
    arena_.Release(c.values, static_cast<size_t>(c.len) * (1 + width_));
    payload_bytes_ -= PayloadBytes(c.len);
    chunks_.erase(it);
  }
  for (auto& clock : rounds_) clock.second.erase(key);
  for (auto& clock : held_rounds_) clock.second.erase(key);
  return Status::OK();
}

Status ShardStore::Aggregate(const StoreKey& key, const float* g, uint32_t len, int64_t clock) {
  const int64_t held_from = clock < closed_below_ ? HeldFrom(key) : -1;
  if (clock < closed_below_ && (held_from < 0 || clock < held_from)) {
    return Status::InvalidArgument("push of clock " + std::to_string(clock) + " to " +
                                   key.Name() + " after its round was applied (every " +
                                   "counted worker has ended clock " +
                                   std::to_string(closed_below_ - 1) + ")");
  }
  if (clock - closed_below_ > kMaxClocksAhead) {
    return Status::InvalidArgument("push of clock " + std::to_string(clock) + " to " + key.Name() +
                                   " is more than " + std::to_string(kMaxClocksAhead) +
                                   " clocks ahead of the rounds applied (below clock " +
                                   std::to_string(closed_below_) + ")");
  }
  Slot slot;
  Status s = Find(key, len, len, &slot);  // creates the key and checks the length
  if (!s.ok()) return s;
  // A held key's round of a clock closed here waits apart for ReleaseHolds.
  Round& round = (clock < closed_below_ ? held_rounds_ : rounds_)[clock][key];
  if (round.count == 0) round.sum.assign(len, 0.0f);
  for (uint32_t i = 0; i < len; ++i) round.sum[i] += g[i];
  ++round.count;
  return Status::OK();
}

void ShardStore::CloseRounds(int64_t minimum, std::vector<ClosedRound>* closed) {
  if (minimum <= closed_below_) return;
  std::vector<float> mean;
  while (!rounds_.empty() && rounds_.begin()->first < minimum) {
    const int64_t clock = rounds_.begin()->first;
    for (auto& [key, round] : rounds_.begin()->second) {
      if (holds_ && holds_(key) >= 0) {
        held_rounds_[clock][key] = std::move(round);  // rebuilt: applied at ReleaseHolds
        continue;
      }
      ApplyClosed(key, clock, round, &mean, closed);
    }
    rounds_.erase(rounds_.begin());
  }
  closed_below_ = minimum;
  while (!parked_.empty() && parked_.begin()->first <= closed_below_) Unpark()(*this, Status::OK());
}

void ShardStore::ApplyClosed(const StoreKey& key, int64_t clock, Round& round,
                             std::vector<float>* mean, std::vector<ClosedRound>* closed) {
  // Created by Aggregate; an erase removes the key's rounds with it.
  Slot slot;
  if (!FindExisting(key, &slot)) return;
  ApplyMean(slot, round.sum.data(), round.sum.size(), round.count, mean);
  if (!closed) return;
  ClosedRound c;
  c.key = key;
  if (key.chunk >= 0) {
    const ChunkSlot& chunk = chunks_.at(key);
    c.key.chunk_offset = chunk.chunk_offset;
    c.key.value_len = chunk.value_len;
  }
  c.clock = clock;
  c.count = round.count;
  c.sum = std::move(round.sum);
  closed->push_back(std::move(c));
}

Status ShardStore::ApplyRound(const StoreKey& key, const float* sum, uint32_t len,
                              uint32_t count) {
  if (count == 0) return Status::InvalidArgument(key.Name() + ": a round of no pushes");
  Slot slot;
  Status s = Find(key, len, len, &slot);  // creates the key and checks the length
  if (!s.ok()) return s;
  std::vector<float> mean;
  ApplyMean(slot, sum, len, count, &mean);
  return Status::OK();
}

void ShardStore::ParkHeld(ParkedTask task) {
  if (!shut_down_.ok()) return task(*this, shut_down_);
  parked_on_holds_.push_back(std::move(task));
}

void ShardStore::ReleaseHolds(HoldFunction next, std::vector<ClosedRound>* closed) {
  std::vector<float> mean;
  for (auto it = held_rounds_.begin(); it != held_rounds_.end();) {
    RoundsByKey& by_key = it->second;
    for (auto r = by_key.begin(); r != by_key.end();) {
      if (next && next(r->first) >= 0) {
        ++r;
        continue;
      }
      ApplyClosed(r->first, it->first, r->second, &mean, closed);
      r = by_key.erase(r);
    }
    it = by_key.empty() ? held_rounds_.erase(it) : std::next(it);
  }
  holds_ = std::move(next);
  std::vector<ParkedTask> tasks;
  tasks.swap(parked_on_holds_);
  for (ParkedTask& task : tasks) task(*this, Status::OK());
}

void ShardStore::ApplyMean(const Slot& slot, const float* sum, size_t len, uint32_t count,
                           std::vector<float>* mean) {
  mean->resize(len);
  const float n = static_cast<float>(count);
  for (size_t i = 0; i < len; ++i) (*mean)[i] = sum[i] / n;
  optimizer_->Update(slot.values, slot.state(), mean->data(), slot.len, slot.NextStep());
}

Status ShardStore::Park(int64_t need, KeyList keys, ParkedTask task) {
  if (!shut_down_.ok()) return shut_down_;
  if (need <= closed_below_) {
    task(*this, Status::OK());
    return Status::OK();
  }
  if (need - closed_below_ > kMaxClocksAhead) {
    return Status::InvalidArgument(
        "a request of clock " + std::to_string(need) + " would wait for rounds more than " +
        std::to_string(kMaxClocksAhead) + " clocks ahead of those applied (below clock " +
        std::to_string(closed_below_) + ")");
  }
  for (size_t i = 0; i < keys.count; ++i) {
    auto it = parked_per_key_.find(keys[i]);
    if (it != parked_per_key_.end() && it->second >= kMaxParkedPerKey) {
      return Status::Unavailable(
          std::to_string(kMaxParkedPerKey) + " requests already wait for the rounds of key " +
          std::to_string(keys[i]) + " to be applied; retry once its clock has moved on");
    }
  }
  for (size_t i = 0; i < keys.count; ++i) ++parked_per_key_[keys[i]];
  parked_.emplace(need, Parked{keys, std::move(task)});
  return Status::OK();
}

ShardStore::ParkedTask ShardStore::Unpark() {
  Parked parked = std::move(parked_.begin()->second);
  parked_.erase(parked_.begin());
  for (size_t i = 0; i < parked.keys.count; ++i) {
    auto it = parked_per_key_.find(parked.keys[i]);
    if (--it->second == 0) parked_per_key_.erase(it);
  }
  return std::move(parked.task);
}

void ShardStore::Shutdown(const Status& why) {
  shut_down_ = why.ok() ? Status::Unavailable("the shard store has shut down") : why;
  while (!parked_.empty()) Unpark()(*this, shut_down_);
  std::vector<ParkedTask> tasks;
  tasks.swap(parked_on_holds_);
  for (ParkedTask& task : tasks) task(*this, shut_down_);
  rounds_.clear();
  held_rounds_.clear();
}

size_t ShardStore::open_round_entries() const {
  size_t n = 0;
  for (const auto& kv : rounds_) n += kv.second.size();
  for (const auto& kv : held_rounds_) n += kv.second.size();
  return n;
}

void ShardStore::ForEachStored(
    const std::function<void(const StoreKey&, const float*, uint32_t, uint32_t)>& fn) const {
  keys_.ForEach([&](Key key, const uint8_t* r) {
    Slot s = View(r);
    fn(StoreKey{key}, s.values, s.len, *s.steps);
  });
  for (const auto& kv : chunks_) {
    StoreKey key = kv.first;
    key.chunk_offset = kv.second.chunk_offset;
    key.value_len = kv.second.value_len;
    fn(key, kv.second.values, kv.second.len, kv.second.steps);
  }
}

CheckpointRecord ShardStore::RecordOf(const StoreKey& key, const float* values, uint32_t len,
                                      uint32_t steps) const {
  CheckpointRecord r;
  r.key = key.key;
  r.chunk = key.chunk;
  r.chunk_offset = key.chunk_offset;
  r.value_len = key.value_len;
  r.steps = steps;
  r.values.assign(values, values + len);
  r.state.assign(values + len, values + len + len * width_);
  return r;
}

void ShardStore::KeysWhere(const std::function<bool(const StoreKey&)>& keep,
                           std::vector<StoreKey>* out) const {
  ForEachStored([&](const StoreKey& key, const float*, uint32_t, uint32_t) {
    if (keep(key)) out->push_back(key);
  });
}

void ShardStore::CatchUpRecordsOf(const StoreKey* keys, size_t n,
                                  std::vector<CatchUpRecord>* out) {
  for (size_t i = 0; i < n; ++i) {
    StoreKey key = keys[i];
    Slot slot;
    if (!FindExisting(key, &slot)) continue;
    if (key.chunk >= 0) {
      // Its layout now: erased and pushed again since the list was made, it may be
      // another.
      const ChunkSlot& c = chunks_.at(key);
      key.chunk_offset = c.chunk_offset;
      key.value_len = c.value_len;
    }
    CatchUpRecord r;
    r.record = RecordOf(key, slot.values, slot.len, *slot.steps);
    for (const auto& [clock, by_key] : rounds_) {
      auto it = by_key.find(key);
      if (it == by_key.end() || it->second.count == 0) continue;
      r.rounds.push_back(OpenRound{clock, it->second.count, it->second.sum});
    }
    out->push_back(std::move(r));
  }
}

Status ShardStore::RestoreCatchUp(const CatchUpRecord& r) {
  Status s = Restore(r.record);
  if (!s.ok()) return s;
  StoreKey key{r.record.key, r.record.chunk, r.record.chunk_offset, r.record.value_len};
  for (auto& clock : rounds_) clock.second.erase(key);
  Slot slot;
  std::vector<float> mean;
  for (const OpenRound& round : r.rounds) {
    if (round.sum.size() != r.record.values.size() || round.pushes == 0) {
      return Status::InvalidArgument(key.Name() + ": an open round of another length");
    }
    if (round.clock < closed_below_) {
      // Closed here already: applied now, as CloseRounds did for the others.
      if (FindExisting(key, &slot)) {
        ApplyMean(slot, round.sum.data(), round.sum.size(), round.pushes, &mean);
      }
      continue;
    }
    Round& mine = rounds_[round.clock][key];
    mine.sum = round.sum;
    mine.count = round.pushes;
  }
  return Status::OK();
}

size_t ShardStore::DropKeys(const std::function<bool(const StoreKey&)>& drop) {
  std::vector<StoreKey> gone;
  ForEachStored([&](const StoreKey& key, const float*, uint32_t, uint32_t) {
    if (drop(key)) gone.push_back(key);
  });
  for (const StoreKey& key : gone) {
    Status erased = Erase(key);
    if (!erased.ok()) continue;  // each stored key or chunk erases as itself
    for (auto& clock : rounds_) clock.second.erase(key);
  }
  return gone.size();
}

void ShardStore::Snapshot(std::vector<CheckpointRecord>* out) const {
  ForEachStored([&](const StoreKey& key, const float* values, uint32_t len, uint32_t steps) {
    out->push_back(RecordOf(key, values, len, steps));
  });
}

Status ShardStore::Restore(const CheckpointRecord& record) {
  if (record.values.size() > kMaxValueLength) {
    return Status::DataLoss("checkpoint record of key " + std::to_string(record.key) + " holds " +
                            std::to_string(record.values.size()) + " values; the limit is " +
                            std::to_string(kMaxValueLength));
  }
  uint32_t len = static_cast<uint32_t>(record.values.size());
  if (len == 0 || record.state.size() != size_t{len} * width_) {
    return Status::DataLoss("checkpoint record of key " + std::to_string(record.key) +
                            " does not fit this optimizer");
  }
  Slot slot;
  StoreKey key{record.key, record.chunk, record.chunk_offset, record.value_len};
  Status s = Find(key, 0, len, &slot);
  if (!s.ok()) return s;
  if (slot.len != len) {
    return Status::InvalidArgument(key.Name() + " already holds " + std::to_string(slot.len) +
                                   " values");
  }
  std::memcpy(slot.values, record.values.data(), sizeof(float) * len);
  // sgd keeps no state: an empty vector's data() is null, undefined for memcpy.
  if (!record.state.empty()) {
    std::memcpy(slot.state(), record.state.data(), sizeof(float) * record.state.size());
  }
  // Steps are kept in 32 bits (see Slot::NextStep); a count beyond is as good as the
  // maximum, and a negative one (not written by HerdPS) counts as none.
  *slot.steps =
      static_cast<uint32_t>(std::clamp<int64_t>(record.steps, 0, static_cast<int64_t>(kMaxSteps)));
  return Status::OK();
}

}  // namespace ps
