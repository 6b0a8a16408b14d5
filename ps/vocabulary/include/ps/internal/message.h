// Message: the unit the transport moves. A header (Meta) plus zero or more data
// frames of raw bytes. The van knows nothing about keys: data frames are bytes with
// an element type attached so that the receiver can validate them.
#ifndef PS_INTERNAL_MESSAGE_H_
#define PS_INTERNAL_MESSAGE_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ps/sarray.h"

namespace ps {

// "No node" / "not set" for ids, timestamps and groups.
static const int kEmpty = std::numeric_limits<int>::max();

// Element type of a data frame (values match proto DataType).
enum class DataType : int {
  kChar = 0, kInt8, kInt16, kInt32, kInt64, kUInt8, kUInt16, kUInt32, kUInt64, kFloat,
  kDouble, kOther
};

template <typename V> constexpr DataType DataTypeOf() { return DataType::kOther; }
template <> constexpr DataType DataTypeOf<char>() { return DataType::kChar; }
template <> constexpr DataType DataTypeOf<int8_t>() { return DataType::kInt8; }
template <> constexpr DataType DataTypeOf<int16_t>() { return DataType::kInt16; }
template <> constexpr DataType DataTypeOf<int32_t>() { return DataType::kInt32; }
template <> constexpr DataType DataTypeOf<int64_t>() { return DataType::kInt64; }
template <> constexpr DataType DataTypeOf<uint8_t>() { return DataType::kUInt8; }
template <> constexpr DataType DataTypeOf<uint16_t>() { return DataType::kUInt16; }
template <> constexpr DataType DataTypeOf<uint32_t>() { return DataType::kUInt32; }
template <> constexpr DataType DataTypeOf<uint64_t>() { return DataType::kUInt64; }
template <> constexpr DataType DataTypeOf<float>() { return DataType::kFloat; }
template <> constexpr DataType DataTypeOf<double>() { return DataType::kDouble; }

// Size in bytes of one element, 1 for kChar/kOther (opaque bytes).
size_t DataTypeSize(DataType type);
const char* DataTypeName(DataType type);

// A node of the job as the node table lists it.
struct Node {
  enum Role { kSchedulerRole = 1, kServerRole = 2, kWorkerRole = 3 };
  // Values match proto NodeState. kDead and kLeft are final. kJoining: a new server in
  // a dead one's place, catching up (its rank is on the ring, failed over); kEntering: a
  // server added to a running job, catching up (the ring places no key on it yet);
  // kLeaving: a server leaving the running job, serving its keys while the others take
  // them over (the ring that follows has no key on it).
  enum State { kJoining = 0, kLive = 1, kDead = 2, kLeft = 3, kEntering = 4, kLeaving = 5 };
  int id = kEmpty;
  Role role = kWorkerRole;
  std::string host;
  int port = 0;
  std::string endpoint;  // data channel: what peers connect to, tcp://host:port or ipc://path
  std::string control_endpoint;  // control channel (see Van)
  int rank_hint = -1;    // the launcher's label for this node, -1 if none
  int rank = -1;
  // Routing identity of the node's outgoing connections (see Van); random per process.
  std::string identity;
  State state = kJoining;
  // Which worker of its process this is: a process that calls Start for several
  // customers while the job forms runs one worker per customer (as in ps-lite), all
  // sharing the process's endpoints and identity. 0 for every other node.
  int instance = 0;
  static constexpr int kMaxInstances = 1024;
  bool alive() const {
    return state == kJoining || state == kLive || state == kEntering || state == kLeaving;
  }
  std::string DebugString() const;
};

const char* RoleName(Node::Role role);
const char* StateName(Node::State state);

// Runtime control carried by a message; cmd == kData for app data.
struct Control {
  enum Command {
    kData = 0, kAddNode = 1, kBarrier = 2, kHeartbeat = 3, kAck = 4, kTerminate = 5,
    kMembership = 6, kLeave = 7, kCaughtUp = 8, kWithdraw = 9, kSkip = 10
  };
  static constexpr int kLastCommand = kSkip;
  Command cmd = kData;
  std::vector<Node> nodes;
  int barrier_group = 0;
  uint64_t msg_sig = 0;  // kAck: the sequence number acknowledged
  int consistency = 0;
  int staleness = 0;
  int key_placement = 0;  // ConsistentHashRing::Placement
  uint64_t chunk_bytes = 0;  // the job's chunk size (PS_CHUNK_BYTES)
  // kAddNode answer: the node takes a dead node's place (its id and rank) in a job that
  // is running, whose start barrier the others passed long ago.
  bool replaces_dead_node = false;
  int replication = 1;  // the job's PS_REPLICATION (servers per key)
  bool replicate_rounds = false;  // the job's PS_REPLICATE_ROUNDS
  std::string token;     // kAddNode request: the job token
  uint64_t membership_version = 0;
  // With a node table: the version at which the server now leaving was marked leaving
  // (0: none leaves); kCaughtUp: the leave a live server holds the keys of (0: none).
  uint64_t leave_version = 0;
  // With a node table: the dead server whose keys the live servers take over
  // (re-replication; its node id), 0: none.
  int retiring = 0;
  bool empty() const { return cmd == kData; }
};

// The header of a message. Field meanings match proto/meta.proto.
struct Meta {
  int head = 0;  // app-defined command
  int app_id = kEmpty;
  int customer_id = kEmpty;
  int timestamp = kEmpty;
  int sender = kEmpty;
  int recipient = kEmpty;
  bool request = false;
  bool push = false;
  bool pull = false;
  bool simple_app = false;
  std::string body;
  std::vector<DataType> data_type;  // one per data frame
  Control control;
  int status_code = 0;
  std::string status_message;
  int priority = 0;
  int64_t clock = -1;
  int compression = 0;              // codec of the values frame; 0 = raw
  int pull_compression = 0;         // pull request: codec the answer may use
  uint32_t part = 0;                // the part of its request (echoed in answers)
  int32_t chunk = -1;               // the chunk carried, -1 for whole values
  uint64_t chunk_offset = 0;        // its first value's position within the key
  uint64_t value_len = 0;           // a chunk's key: its whole value length
  bool chunk_query = false;         // request: does the server app take chunks?
  bool takes_chunks = false;        // the answer to a chunk_query
  // A push a server forwards to a replica of its keys: the node id of the worker that
  // pushed it; -1 when the message is not a replica's copy.
  int replica_of = -1;
  // A request part a worker sends again, after its server died, to the replica that
  // took over its keys (docs/fault-tolerance.md).
  bool resent = false;
  // A replica's copy: the worker's request id and customer id.
  uint64_t origin_request = 0;
  int origin_customer = 0;
  // A resent part, or a copy: the rank of the server the worker first sent it to.
  int first_server = -1;
  // ... and that part's index in the worker's request.
  int64_t first_part = -1;
  // The keys frame is a key frame (ps/internal/key_frame.h); in a request also: the
  // sender takes answers whose keys frame is one.
  bool keys_encoded = false;
  // Key caching (docs/pipeline.md), ids of key lists at their sender (0: none).
  // key_list: the server keeps this request's keys under it. key_list_ref: the keys
  // frame is empty, the keys are the list the server kept under it (an answer to such
  // a request echoes it, with key_list_unknown when the list is not kept: send the keys).
  uint64_t key_list = 0;
  uint64_t key_list_ref = 0;
  bool key_list_unknown = false;
  // Answer: the keys frame is empty; the keys are those the request asked for, in order.
  bool keys_as_asked = false;
  // An answer from a server that copies closed rounds instead of pushes: the clock
  // below which its rounds are on every live replica; -1: not such a server.
  int64_t rounds_copied_below = -1;
  // A worker's word to every live server that it sent again the pushes it kept for
  // the dead server of rank first_server (no keys, no answer).
  bool rounds_resent = false;
  uint64_t sequence = 0;            // reliable delivery; 0 = not tracked
  uint64_t request_id = 0;          // 64-bit request id (answers echo it)
  uint64_t incarnation = 0;         // the requesting customer's incarnation (echoed)
  uint64_t sender_incarnation = 0;  // random per sending process
  std::string DebugString() const;
};

// A message: Meta plus data frames. Data frames share their buffers (SArray), so
// copying a Message is cheap and never copies payload bytes.
struct Message {
  Meta meta;
  std::vector<SArray<char>> data;
  // Set by the receiving van, never sent: the routing identity of the connection the
  // message came on, which the runtime checks against the claimed sender.
  std::string peer_identity;

  // Appends a data frame that views `val`'s buffer (no copy) and records its type.
  template <typename V>
  void AddData(const SArray<V>& val) {
    meta.data_type.push_back(DataTypeOf<V>());
    data.emplace_back(SArray<char>(val));
  }
  size_t DataBytes() const {
    size_t n = 0;
    for (const auto& d : data) n += d.size();
    return n;
  }
  std::string DebugString() const;
};

}  // namespace ps

#endif  // PS_INTERNAL_MESSAGE_H_
