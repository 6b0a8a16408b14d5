// DecodeRoundCopy (server/round_copies.h): one round copy, as a replica receives it
// from a key's owner under PS_REPLICATE_ROUNDS (the KV push of cmd kRoundCopyCmd).
//
// Input (fuzz_input.h's layout): a key count n (uint8, at most kMaxEntries), n keys
// (uint64), n lengths (int32), then the values frame as the rest of the input, read as
// floats (a trailing part of a float is dropped).
//
// Properties: the decoder never crashes, reads outside the frames or allocates past
// them; a message it accepts gives one round per key, with the header in range, a push
// count above 0, a sum that is not empty, and a chunk that lies inside its key's length.
// Encoding those rounds again under that header gives messages that decode to the same
// rounds, bit for bit, with only the last one marked last when the header is.
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_input.h"
#include "ps/kv_pairs.h"
#include "round_copies.h"

namespace {

// More keys than this is more of the same to the decoder.
constexpr size_t kMaxEntries = 64;

bool SameRound(const ps::ClosedRound& a, const ps::ClosedRound& b) {
  return a.key.key == b.key.key && a.key.chunk == b.key.chunk &&
         (a.key.chunk < 0 || (a.key.chunk_offset == b.key.chunk_offset &&
                              a.key.value_len == b.key.value_len)) &&
         a.clock == b.clock && a.count == b.count && a.sum.size() == b.sum.size() &&
         std::memcmp(a.sum.data(), b.sum.data(), sizeof(float) * a.sum.size()) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ps::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ps::fuzz::InputReader in(data, size);
  const size_t n = in.Take<uint8_t>() % (kMaxEntries + 1);
  // Each list allocated to its size, so that AddressSanitizer sees a read past its end.
  ps::KVPairs<float> message;
  message.keys.resize(n);
  message.lens.resize(n);
  for (size_t i = 0; i < n; ++i) message.keys[i] = in.Take<uint64_t>();
  for (size_t i = 0; i < n; ++i) message.lens[i] = in.Take<int32_t>();
  const std::string rest = in.TakeRest();
  message.vals.resize(rest.size() / sizeof(float));
  if (!message.vals.empty()) {
    std::memcpy(message.vals.data(), rest.data(), message.vals.size() * sizeof(float));
  }

  ps::RoundCopyHeader header;
  std::vector<ps::ClosedRound> rounds;
  if (!ps::DecodeRoundCopy(message, &header, &rounds).ok()) return 0;
  FUZZ_EXPECT(rounds.size() == n);
  FUZZ_EXPECT(header.shards >= 1 && header.shards <= ps::kMaxRoundCopyShards);
  FUZZ_EXPECT(header.shard < header.shards && header.below >= 0);
  size_t floats = 0;
  for (size_t i = 0; i < rounds.size(); ++i) {
    const ps::ClosedRound& r = rounds[i];
    FUZZ_EXPECT(r.key.key == message.keys[i]);
    FUZZ_EXPECT(r.count > 0 && !r.sum.empty() && r.clock >= 0);
    if (r.key.chunk >= 0) {
      FUZZ_EXPECT(r.key.chunk_offset <= r.key.value_len);
      FUZZ_EXPECT(r.sum.size() <= r.key.value_len - r.key.chunk_offset);
    }
    floats += r.sum.size();
  }
  FUZZ_EXPECT(floats <= message.vals.size());

  std::vector<const ps::ClosedRound*> pointers;
  for (const ps::ClosedRound& r : rounds) pointers.push_back(&r);
  std::vector<ps::KVPairs<float>> again;
  FUZZ_EXPECT(ps::EncodeRoundCopies(header, pointers, size_t{1} << 16, &again).ok());
  std::vector<ps::ClosedRound> back;
  for (size_t m = 0; m < again.size(); ++m) {
    ps::RoundCopyHeader h;
    FUZZ_EXPECT(ps::DecodeRoundCopy(again[m], &h, &back).ok());
    FUZZ_EXPECT(h.shard == header.shard && h.shards == header.shards && h.below == header.below);
    FUZZ_EXPECT(h.last == (header.last && m + 1 == again.size()));
  }
  FUZZ_EXPECT(back.size() == rounds.size());
  for (size_t i = 0; i < rounds.size() && back.size() == rounds.size(); ++i) {
    FUZZ_EXPECT(SameRound(rounds[i], back[i]));
  }
  return 0;
}
