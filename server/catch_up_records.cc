#include "catch_up_records.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "float_words.h"
#include "shard_store.h"

namespace ps {
namespace {

constexpr size_t kIdWords = 8;  // an applied id's entry

// Floats of one record's entry (the layout in the header).
size_t EntryFloats(const CatchUpRecord& r, size_t width) {
  const size_t len = r.record.values.size();
  size_t n = 3 + (r.record.chunk >= 0 ? 4 : 0) + len * (1 + width) + 1;
  for (const OpenRound& round : r.rounds) n += 3 + round.sum.size();
  return n;
}

void Append(const CatchUpRecord& r, float* out) {
  const CheckpointRecord& c = r.record;
  const size_t len = c.values.size();
  *out++ = Word(static_cast<uint32_t>(c.steps));
  *out++ = Word(static_cast<uint32_t>(c.chunk + 1));
  *out++ = Word(static_cast<uint32_t>(len));
  if (c.chunk >= 0) {
    *out++ = Word(static_cast<uint32_t>(c.chunk_offset));
    *out++ = Word(static_cast<uint32_t>(c.chunk_offset >> 32));
    *out++ = Word(static_cast<uint32_t>(c.value_len));
    *out++ = Word(static_cast<uint32_t>(c.value_len >> 32));
  }
  std::memcpy(out, c.values.data(), sizeof(float) * len);
  out += len;
  if (!c.state.empty()) std::memcpy(out, c.state.data(), sizeof(float) * c.state.size());
  out += c.state.size();
  *out++ = Word(static_cast<uint32_t>(r.rounds.size()));
  for (const OpenRound& round : r.rounds) {
    *out++ = Word(static_cast<uint32_t>(round.clock));
    *out++ = Word(static_cast<uint32_t>(static_cast<uint64_t>(round.clock) >> 32));
    *out++ = Word(round.pushes);
    std::memcpy(out, round.sum.data(), sizeof(float) * round.sum.size());
    out += round.sum.size();
  }
}

}  // namespace

Status NextCatchUpMessage(const std::vector<CatchUpRecord>& records, size_t* begin,
                          size_t state_width, size_t max_floats, KVPairs<float>* out) {
  // One message: keys ascending strictly, about max_floats values.
  const size_t first = *begin;
  size_t end = first, floats = 0;
  while (end < records.size() &&
         (end == first || (records[end].record.key > records[end - 1].record.key &&
                           floats + EntryFloats(records[end], state_width) <= max_floats))) {
    const size_t n = EntryFloats(records[end], state_width);
    if (n > static_cast<size_t>(INT32_MAX)) {
      return Status::InvalidArgument(
          "the catch-up entry of key " + std::to_string(records[end].record.key) + " takes " +
          std::to_string(n) + " floats, more than a length can say (2^31 - 1)");
    }
    floats += n;
    ++end;
  }
  KVPairs<float> m;
  m.keys.resize(end - first);
  m.lens.resize(end - first);
  m.vals.resize(floats);
  float* at = m.vals.data();
  for (size_t i = first; i < end; ++i) {
    m.keys[i - first] = records[i].record.key;
    const size_t n = EntryFloats(records[i], state_width);
    m.lens[i - first] = static_cast<int>(n);
    Append(records[i], at);
    at += n;
  }
  *out = std::move(m);
  *begin = end;
  return Status::OK();
}

KVPairs<float> EncodeCatchUpEnd(uint64_t messages_before, const std::vector<int>& failed_over) {
  KVPairs<float> m;
  m.keys.resize(1, 0);
  m.lens.resize(1, static_cast<int>(2 + failed_over.size()));
  m.vals.resize(2 + failed_over.size());
  m.vals[0] = Word(static_cast<uint32_t>(messages_before));
  m.vals[1] = Word(static_cast<uint32_t>(messages_before >> 32));
  for (size_t i = 0; i < failed_over.size(); ++i) {
    m.vals[2 + i] = Word(static_cast<uint32_t>(failed_over[i]));
  }
  return m;
}

Status DecodeCatchUpEnd(const KVPairs<float>& data, uint64_t* messages_before,
                        std::vector<int>* failed_over) {
  if (data.keys.size() != 1 || data.vals.size() < 2 || data.vals.size() > 2 + (1u << 16) ||
      (!data.lens.empty() && (data.lens.size() != 1 ||
                              static_cast<size_t>(data.lens[0]) != data.vals.size()))) {
    return Status::InvalidArgument("a catch-up end holds one entry of 2 words and the ranks "
                                   "its keys were listed without (at most 65536)");
  }
  *messages_before = WordOf(data.vals[0]) | static_cast<uint64_t>(WordOf(data.vals[1])) << 32;
  failed_over->clear();
  for (size_t i = 2; i < data.vals.size(); ++i) {
    const uint32_t rank = WordOf(data.vals[i]);
    if (rank > static_cast<uint32_t>(INT32_MAX)) {
      return Status::InvalidArgument("a catch-up end names rank " + std::to_string(rank));
    }
    failed_over->push_back(static_cast<int>(rank));
  }
  std::sort(failed_over->begin(), failed_over->end());
  return Status::OK();
}

Status DecodeCatchUp(const KVPairs<float>& data, size_t state_width,
                     std::vector<CatchUpRecord>* out) {
  const size_t n = data.keys.size();
  if (data.lens.size() != n) {
    return Status::InvalidArgument("a catch-up message needs one length per key");
  }
  const float* at = data.vals.data();
  const float* const end = at + data.vals.size();
  for (size_t i = 0; i < n; ++i) {
    auto which = [&] { return "catch-up entry of key " + std::to_string(data.keys[i]); };
    if (data.lens[i] < 4 || static_cast<size_t>(end - at) < static_cast<size_t>(data.lens[i])) {
      return Status::InvalidArgument(which() + ": length " + std::to_string(data.lens[i]) +
                                     " does not fit the message");
    }
    const float* const stop = at + data.lens[i];
    auto left = [&] { return static_cast<size_t>(stop - at); };
    CatchUpRecord r;
    CheckpointRecord& c = r.record;
    c.key = data.keys[i];
    c.steps = WordOf(*at++);
    const uint32_t chunk_word = WordOf(*at++);
    if (chunk_word > 0x80000000u) {
      return Status::InvalidArgument(which() + ": chunk " + std::to_string(chunk_word - 1));
    }
    c.chunk = static_cast<int32_t>(static_cast<int64_t>(chunk_word) - 1);
    const uint32_t len = WordOf(*at++);
    if (len == 0 || len > kMaxValueLength) {
      return Status::InvalidArgument(which() + ": " + std::to_string(len) + " values");
    }
    if (c.chunk >= 0) {
      if (left() < 4) return Status::InvalidArgument(which() + ": its chunk layout is cut short");
      c.chunk_offset = WordOf(at[0]) | static_cast<uint64_t>(WordOf(at[1])) << 32;
      c.value_len = WordOf(at[2]) | static_cast<uint64_t>(WordOf(at[3])) << 32;
      at += 4;
      if (c.chunk_offset >= c.value_len || len > c.value_len - c.chunk_offset) {
        return Status::InvalidArgument(which() + ": a chunk of " + std::to_string(len) +
                                       " values at " + std::to_string(c.chunk_offset) +
                                       " of a value of " + std::to_string(c.value_len));
      }
    }
    const size_t payload = size_t{len} * (1 + state_width);
    if (left() < payload + 1) {
      return Status::InvalidArgument(which() + ": its values are cut short");
    }
    c.values.assign(at, at + len);
    c.state.assign(at + len, at + payload);
    at += payload;
    const uint32_t rounds = WordOf(*at++);
    for (uint32_t k = 0; k < rounds; ++k) {
      if (left() < 3 + size_t{len}) {
        return Status::InvalidArgument(which() + ": its open rounds are cut short");
      }
      OpenRound round;
      round.clock =
          static_cast<int64_t>(WordOf(at[0]) | static_cast<uint64_t>(WordOf(at[1])) << 32);
      round.pushes = WordOf(at[2]);
      round.sum.assign(at + 3, at + 3 + len);
      at += 3 + len;
      if (round.pushes == 0 || (!r.rounds.empty() && round.clock <= r.rounds.back().clock)) {
        return Status::InvalidArgument(which() + ": an open round without pushes or out of order");
      }
      r.rounds.push_back(std::move(round));
    }
    if (left() != 0) return Status::InvalidArgument(which() + ": " + std::to_string(left()) +
                                                    " floats more than its layout");
    out->push_back(std::move(r));
  }
  if (at != end) return Status::InvalidArgument("a catch-up message has values past its keys");
  return Status::OK();
}

std::vector<KVPairs<float>> EncodeAppliedIds(const std::vector<AppliedCopies::Record>& ids,
                                             size_t max_floats) {
  std::vector<KVPairs<float>> messages;
  for (size_t begin = 0; begin < ids.size();) {
    size_t n = 0, floats = 0;
    while (begin + n < ids.size()) {
      const size_t words = kIdWords + 2 * ids[begin + n].keys.size();
      if (n > 0 && floats + words > max_floats) break;
      floats += words;
      ++n;
    }
    KVPairs<float> m;
    m.keys.resize(n);
    m.lens.resize(n);
    m.vals.resize(floats);
    float* out = m.vals.data();
    for (size_t i = 0; i < n; ++i) {
      const AppliedCopies::Id& id = ids[begin + i].id;
      const std::vector<uint64_t>& keys = ids[begin + i].keys;
      m.keys[i] = i;
      m.lens[i] = static_cast<int>(kIdWords + 2 * keys.size());
      *out++ = Word(static_cast<uint32_t>(id.worker));
      *out++ = Word(static_cast<uint32_t>(id.customer));
      *out++ = Word(static_cast<uint32_t>(id.request));
      *out++ = Word(static_cast<uint32_t>(id.request >> 32));
      *out++ = Word(static_cast<uint32_t>(id.chunk));
      *out++ = Word(static_cast<uint32_t>(id.first_server));
      *out++ = Word(static_cast<uint32_t>(id.first_part));
      *out++ = Word(static_cast<uint32_t>(static_cast<uint64_t>(id.first_part) >> 32));
      for (uint64_t key : keys) {
        *out++ = Word(static_cast<uint32_t>(key));
        *out++ = Word(static_cast<uint32_t>(key >> 32));
      }
    }
    messages.push_back(std::move(m));
    begin += n;
  }
  return messages;
}

Status DecodeAppliedIds(const KVPairs<float>& data, std::vector<AppliedCopies::Record>* out) {
  const size_t n = data.keys.size();
  if (data.lens.size() != n) {
    return Status::InvalidArgument("a catch-up message of applied pushes has " +
                                   std::to_string(data.lens.size()) + " lengths for " +
                                   std::to_string(n) + " ids");
  }
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const int len = data.lens[i];
    if (len < static_cast<int>(kIdWords) || (len - static_cast<int>(kIdWords)) % 2 != 0) {
      return Status::InvalidArgument("a catch-up message of applied pushes has an entry of " +
                                     std::to_string(len) + " words: " +
                                     std::to_string(kIdWords) + " and 2 per key are needed");
    }
    total += static_cast<size_t>(len);
  }
  if (data.vals.size() != total) {
    return Status::InvalidArgument("a catch-up message of applied pushes holds " +
                                   std::to_string(data.vals.size()) + " words where its " +
                                   std::to_string(n) + " entries say " + std::to_string(total));
  }
  const float* at = data.vals.data();
  for (size_t i = 0; i < n; ++i) {
    AppliedCopies::Record record;
    AppliedCopies::Id& id = record.id;
    id.worker = static_cast<int>(WordOf(at[0]));
    id.customer = static_cast<int>(WordOf(at[1]));
    id.request = WordOf(at[2]) | static_cast<uint64_t>(WordOf(at[3])) << 32;
    id.chunk = static_cast<int32_t>(WordOf(at[4]));
    id.first_server = static_cast<int>(WordOf(at[5]));
    id.first_part =
        static_cast<int64_t>(WordOf(at[6]) | static_cast<uint64_t>(WordOf(at[7])) << 32);
    const size_t keys = (static_cast<size_t>(data.lens[i]) - kIdWords) / 2;
    at += kIdWords;
    record.keys.resize(keys);
    for (size_t k = 0; k < keys; ++k, at += 2) {
      record.keys[k] = WordOf(at[0]) | static_cast<uint64_t>(WordOf(at[1])) << 32;
      if (k > 0 && record.keys[k] <= record.keys[k - 1]) {
        return Status::InvalidArgument("a catch-up message of applied pushes lists the keys "
                                       "of an id out of order");
      }
    }
    out->push_back(std::move(record));
  }
  return Status::OK();
}

}  // namespace ps
