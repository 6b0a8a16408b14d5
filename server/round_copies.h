// Round copies: the rounds of synchronous aggregation a key's owner closed, as its
// replica takes them (PS_REPLICATE_ROUNDS, docs/fault-tolerance.md), in KV pushes of cmd
// kRoundCopyCmd between servers. One close of one owner shard (ShardStore::CloseRounds
// below one minimum clock) goes to a replica as one or more messages, the last one
// marked, so that the replica knows which of the owner's rounds it holds whole.
//
// Wire layout (docs/pipeline.md, "Round copies"): keys ascend strictly within a message
// (a chunk, and a key closed in two clocks at once, start a new one); key i's entry in
// the values frame is lens[i] floats, read as 32-bit words where they are counts. Key
// 0's entry starts with the header: the owner shard, the owner's shard count, the
// close's minimum clock (low, high), 1 for the close's last message (else 0). Every
// entry then holds:
//   clock low, clock high, pushes, chunk + 1 (0: the whole value),
//   [if a chunk: offset low, offset high, whole length low, whole length high],
//   sum[len]
#ifndef HERDPS_SERVER_ROUND_COPIES_H_
#define HERDPS_SERVER_ROUND_COPIES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ps/kv_pairs.h"
#include "ps/status.h"
#include "shard_store.h"

namespace ps {

// The cmd of a round copy; "RNDC" in ASCII, clear of the small cmds apps use.
constexpr int kRoundCopyCmd = 0x524e4443;
// The most shards a copy's header may name (an owner's shard threads).
constexpr uint32_t kMaxRoundCopyShards = 4096;

struct RoundCopyHeader {
  uint32_t shard = 0;   // the owner's shard that closed the rounds
  uint32_t shards = 1;  // the owner's shard count (OptimizerServer::ShardOf)
  int64_t below = 0;    // the close's minimum: rounds of clocks below it are closed
  bool last = true;     // the close's last message to this replica
};

// The messages of one close's `rounds` (in the order CloseRounds appended them: by
// clock, then as stored), about `max_floats` values each (one entry at least); none
// for an empty `rounds`.
// InvalidArgument when an entry does not fit a lens entry (over 2^31 - 1 floats).
Status EncodeRoundCopies(const RoundCopyHeader& header,
                         const std::vector<const ClosedRound*>& rounds,
                         size_t max_floats, std::vector<KVPairs<float>>* out);

// Reads one message. InvalidArgument saying what is wrong (a length that does not add
// up, a count out of range); *out is then incomplete and must not be used.
Status DecodeRoundCopy(const KVPairs<float>& data, RoundCopyHeader* header,
                       std::vector<ClosedRound>* out);

}  // namespace ps

#endif  // HERDPS_SERVER_ROUND_COPIES_H_
