// Catch-up records: what a live server sends a new server in a dead one's place so that
// it holds its keys again (replication, docs/fault-tolerance.md): each key's values,
// optimizer state, step count and the pushes held for it in open rounds of synchronous
// aggregation, as a KV push of cmd kCatchUpCmd between servers.
//
// Wire layout (docs/pipeline.md, "Catch-up"): keys ascend strictly within a message (a
// key stored in chunks sends each chunk in a message of its own); key i's entry in the
// values frame is lens[i] floats, read as 32-bit words where they are counts:
//   steps, chunk + 1 (0: the whole value), len,
//   [if a chunk: offset low, offset high, whole length low, whole length high]
//   values[len], state[len * state width], open rounds R,
//   R x (clock low, clock high, pushes, sum[len])
// Messages of cmd kCatchUpIdsCmd carry the pushes the sender took as copies or as parts
// sent again (AppliedCopies), so that the new server answers those once too: key i is i
// (keys ascend), and its entry is 8 words: worker, customer, request low, request high,
// chunk, first server, first part low, first part high; then, for an id taken for some
// keys of its part only, those keys, 2 words each (low, high). A message of cmd
// kCatchUpEndCmd ends what one server sends: one key, 0, whose entry is 2 words, the
// number of record and id messages before it (low, high), which the new server checks
// against those it took, then the ranks the sender's ring had failed over when it listed
// the keys, one word each (a new server in a dead one's place waits until each live
// sender listed its keys without every server failed over now: a server that died
// since served keys the others then send, docs/fault-tolerance.md).
#ifndef HERDPS_SERVER_CATCH_UP_RECORDS_H_
#define HERDPS_SERVER_CATCH_UP_RECORDS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "applied_copies.h"
#include "checkpoint.h"
#include "ps/kv_pairs.h"
#include "ps/status.h"

namespace ps {

// The cmd of a catch-up push; "CTCH" in ASCII, clear of the small cmds apps use.
constexpr int kCatchUpCmd = 0x43544348;
// "CTCI": the pushes taken once, for the new server's AppliedCopies.
constexpr int kCatchUpIdsCmd = 0x43544349;
// "CTCE": the end of one server's catch-up.
constexpr int kCatchUpEndCmd = 0x43544345;

struct OpenRound {
  int64_t clock = 0;
  uint32_t pushes = 0;
  std::vector<float> sum;  // the pushed gradients summed, one per value
};

struct CatchUpRecord {
  CheckpointRecord record;   // state_width * len floats of state
  std::vector<OpenRound> rounds;  // by clock, ascending
};

// The next message of `records` (sorted by key, then chunk) from *begin on, of about
// `max_floats` values at most (one record may exceed it alone); advances *begin past
// the records it holds. InvalidArgument when a record's entry does not fit a lens
// entry (over 2^31 - 1 floats: store such values in chunks, PS_CHUNK_BYTES).
Status NextCatchUpMessage(const std::vector<CatchUpRecord>& records, size_t* begin,
                          size_t state_width, size_t max_floats, KVPairs<float>* out);

// The same for applied ids, about `max_floats` values per message (one id at least).
std::vector<KVPairs<float>> EncodeAppliedIds(const std::vector<AppliedCopies::Record>& ids,
                                             size_t max_floats);
Status DecodeAppliedIds(const KVPairs<float>& data, std::vector<AppliedCopies::Record>* out);

// The end message, and what it says: how many messages came before it, and the ranks
// failed over in the ring the keys were listed by (ascending).
KVPairs<float> EncodeCatchUpEnd(uint64_t messages_before, const std::vector<int>& failed_over);
Status DecodeCatchUpEnd(const KVPairs<float>& data, uint64_t* messages_before,
                        std::vector<int>* failed_over);

// Reads one message's records. InvalidArgument saying what is wrong (a length that does
// not add up, a count out of range); *out is then incomplete and must not be used.
Status DecodeCatchUp(const KVPairs<float>& data, size_t state_width,
                     std::vector<CatchUpRecord>* out);

}  // namespace ps

#endif  // HERDPS_SERVER_CATCH_UP_RECORDS_H_
