// KVPairs and KVMeta: the data and the header of one KV request, as apps see them.
#ifndef PS_KV_PAIRS_H_
#define PS_KV_PAIRS_H_

#include <cstdint>

#include "ps/base.h"
#include "ps/sarray.h"

namespace ps {

// A list of keys with their values. Keys are sorted ascending and unique. If lens is
// empty every key has vals.size() / keys.size() values; otherwise key i has lens[i]
// values and they follow each other in vals in key order.
template <typename Val>
struct KVPairs {
  SArray<Key> keys;
  SArray<Val> vals;
  SArray<int> lens;
  int priority = 0;
};

// The header of a request, as a server's request handle sees it. Pass it back to
// KVServer::Response to answer that request.
struct KVMeta {
  int cmd = 0;          // the cmd argument of the worker's Push/Pull
  bool push = false;    // the request carries values to apply
  bool pull = false;    // the requester wants values back
  int sender = 0;       // node id of the requester
  int timestamp = 0;    // the requester's request timestamp
  int customer_id = 0;  // the requester's customer id
  int app_id = 0;
  // The worker's clock when it sent the request (KVWorker::CurrentClock); -1 from a
  // sender that does not keep clocks.
  int64_t clock = -1;
  // A request of a value longer than the job's chunk size carries one chunk of it
  // (docs/pipeline.md): its index (-1: whole values), the position of its first value
  // within the key's value, and the key's whole length. Only server apps that take
  // chunks (KVServer::AcceptChunks) see chunk >= 0.
  int chunk = -1;
  uint64_t chunk_offset = 0;
  uint64_t value_len = 0;
  // The request's identity, echoed in the answer; not for apps to change.
  uint64_t request_id = 0;
  uint64_t incarnation = 0;
  uint32_t part = 0;
  int pull_compression = 0;  // a pull may be answered with fp16 values (Response does it)
  // The requester takes an answer's keys as a key frame (Response encodes them).
  bool keys_encoded = false;
  // The request's keys as the handle got them (a shared view). An answer whose keys are
  // this very array travels without them (Response sees the same buffer): the worker
  // knows what it asked for.
  SArray<Key> request_keys;
  // A push another server forwarded as a replica of its keys (PS_REPLICATION >= 2): the
  // node id of the worker that pushed it; -1 for a request from its requester itself.
  int replica_of = -1;
  // A part the worker sent again after its server died (failover), and a copy's
  // worker request id and customer id: what tells a replica a push it already has.
  bool resent = false;
  uint64_t origin_request = 0;
  int origin_customer = 0;
  int first_server = -1;    // the rank the worker first sent the part to
  int64_t first_part = -1;  // and the part's index in the worker's request
};

}  // namespace ps

#endif  // PS_KV_PAIRS_H_
