#include "round_copies.h"

#include <cstring>
#include <string>

#include "float_words.h"

namespace ps {
namespace {

constexpr size_t kHeaderWords = 5;

size_t EntryFloats(const ClosedRound& r) {
  return 4 + (r.key.chunk >= 0 ? 4 : 0) + r.sum.size();
}

}  // namespace

Status EncodeRoundCopies(const RoundCopyHeader& header,
                         const std::vector<const ClosedRound*>& rounds,
                         size_t max_floats, std::vector<KVPairs<float>>* out) {
  size_t begin = 0;
  while (begin < rounds.size()) {
    size_t end = begin, floats = kHeaderWords;
    while (end < rounds.size()) {
      const ClosedRound& r = *rounds[end];
      const size_t n = EntryFloats(r) + (end == begin ? kHeaderWords : 0);
      if (n > static_cast<size_t>(INT32_MAX)) {
        return Status::InvalidArgument("the round copy of " + r.key.Name() + " takes " +
                                       std::to_string(n) +
                                       " floats, more than a length can say (2^31 - 1)");
      }
      if (end > begin) {
        const ClosedRound& before = *rounds[end - 1];
        if (r.key.key <= before.key.key || r.key.chunk >= 0 || before.key.chunk >= 0 ||
            floats + n > max_floats) {
          break;
        }
      }
      floats += end == begin ? n - kHeaderWords : n;
      ++end;
    }
    KVPairs<float> m;
    m.keys.resize(end - begin);
    m.lens.resize(end - begin);
    m.vals.resize(floats);
    float* at = m.vals.data();
    *at++ = Word(header.shard);
    *at++ = Word(header.shards);
    at = AppendWide(static_cast<uint64_t>(header.below), at);
    *at++ = Word(header.last && end == rounds.size() ? 1 : 0);
    for (size_t i = begin; i < end; ++i) {
      const ClosedRound& r = *rounds[i];
      m.keys[i - begin] = r.key.key;
      m.lens[i - begin] = static_cast<int>(EntryFloats(r) + (i == begin ? kHeaderWords : 0));
      at = AppendWide(static_cast<uint64_t>(r.clock), at);
      *at++ = Word(r.count);
      *at++ = Word(static_cast<uint32_t>(r.key.chunk + 1));
      if (r.key.chunk >= 0) {
        at = AppendWide(r.key.chunk_offset, at);
        at = AppendWide(r.key.value_len, at);
      }
      std::memcpy(at, r.sum.data(), sizeof(float) * r.sum.size());
      at += r.sum.size();
    }
    out->push_back(std::move(m));
    begin = end;
  }
  return Status::OK();
}

Status DecodeRoundCopy(const KVPairs<float>& data, RoundCopyHeader* header,
                       std::vector<ClosedRound>* out) {
  const size_t n = data.keys.size();
  if (n == 0 || data.lens.size() != n) {
    return Status::InvalidArgument("a round copy needs keys, each with a length");
  }
  const float* at = data.vals.data();
  const float* const end = at + data.vals.size();
  for (size_t i = 0; i < n; ++i) {
    if (data.lens[i] < 0 || data.lens[i] > end - at) {
      return Status::InvalidArgument("a round copy's entries overrun its values");
    }
    const float* entry_end = at + data.lens[i];
    if (i == 0) {
      if (entry_end - at < static_cast<ptrdiff_t>(kHeaderWords)) {
        return Status::InvalidArgument("a round copy without its header");
      }
      header->shard = WordOf(at[0]);
      header->shards = WordOf(at[1]);
      const uint64_t below = WideAt(at + 2);
      const uint32_t last = WordOf(at[4]);
      if (header->shards == 0 || header->shards > kMaxRoundCopyShards ||
          header->shard >= header->shards ||
          below > static_cast<uint64_t>(INT64_MAX) || last > 1) {
        return Status::InvalidArgument("a round copy's header is out of range");
      }
      header->below = static_cast<int64_t>(below);
      header->last = last == 1;
      at += kHeaderWords;
    }
    if (entry_end - at < 4) return Status::InvalidArgument("a round copy's entry is too short");
    ClosedRound r;
    const uint64_t clock = WideAt(at);
    r.count = WordOf(at[2]);
    const uint32_t chunk = WordOf(at[3]);
    at += 4;
    if (clock > static_cast<uint64_t>(INT64_MAX) || r.count == 0 ||
        chunk > static_cast<uint32_t>(INT32_MAX)) {
      return Status::InvalidArgument("a round copy's entry is out of range");
    }
    r.clock = static_cast<int64_t>(clock);
    r.key.key = data.keys[i];
    r.key.chunk = static_cast<int32_t>(chunk) - 1;
    if (r.key.chunk >= 0) {
      if (entry_end - at < 4) {
        return Status::InvalidArgument("a round copy's chunk entry is too short");
      }
      r.key.chunk_offset = WideAt(at);
      r.key.value_len = WideAt(at + 2);
      at += 4;
    }
    if (at == entry_end) return Status::InvalidArgument("a round copy's entry without values");
    const uint64_t len = static_cast<uint64_t>(entry_end - at);
    if (r.key.chunk >= 0 && (r.key.chunk_offset > r.key.value_len ||
                             len > r.key.value_len - r.key.chunk_offset)) {
      return Status::InvalidArgument("a round copy's chunk runs past its key's length");
    }
    r.sum.assign(at, entry_end);
    at = entry_end;
    out->push_back(std::move(r));
  }
  if (at != end) {
    return Status::InvalidArgument("a round copy's values do not add up to its entries");
  }
  return Status::OK();
}

}  // namespace ps
