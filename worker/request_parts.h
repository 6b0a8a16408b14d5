// The bookkeeping of RequestPipeline (ps/internal/request_pipeline.h): one request in
// flight and its parts. Private to worker/: request_pipeline.cc plans, sends and
// assembles them, request_encoding.cc encodes push parts, part_failover.cc sends again
// the parts whose server died.
#ifndef HERDPS_WORKER_REQUEST_PARTS_H_
#define HERDPS_WORKER_REQUEST_PARTS_H_

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "ps/internal/kv_message.h"
#include "ps/internal/large_buffer.h"
#include "ps/internal/message.h"
#include "ps/internal/request_pipeline.h"

namespace ps {

// An uninitialised byte buffer, for arrays written over whole (a pull's result, a part's
// gathered values): zero-filling them first would be one more pass over the data. Large
// ones on huge pages (ps/internal/large_buffer.h).
inline SArray<char> RawBuffer(size_t bytes) { return NewLargeBuffer(bytes); }

// Copies values of `bytes` bytes each between a request's order and a part's: value j
// of the part is value pos[j] of the request. Gather fills a part, Scatter puts a
// part's answer back. One-float and one-double values (the common case) take
// constant-size copies, which compile to plain loads and stores; a memcpy call per key
// would cost more than the copy.
template <bool kGather, size_t kBytes>
void MoveValuesFixed(const std::vector<uint32_t>& pos, const char* from, char* to) {
  for (size_t j = 0; j < pos.size(); ++j) {
    const size_t at = static_cast<size_t>(pos[j]) * kBytes, here = j * kBytes;
    std::memcpy(to + (kGather ? here : at), from + (kGather ? at : here), kBytes);
  }
}

template <bool kGather>
void MoveValues(const std::vector<uint32_t>& pos, size_t bytes, const char* from, char* to) {
  if (bytes == 4) return MoveValuesFixed<kGather, 4>(pos, from, to);
  if (bytes == 8) return MoveValuesFixed<kGather, 8>(pos, from, to);
  if (bytes == 0) return;
  for (size_t j = 0; j < pos.size(); ++j) {
    const size_t at = static_cast<size_t>(pos[j]) * bytes, here = j * bytes;
    std::memcpy(to + (kGather ? here : at), from + (kGather ? at : here), bytes);
  }
}

// to[j] = from[pos[j]] / to[pos[j]] = from[j], in values of `bytes` bytes.
inline void GatherValues(const std::vector<uint32_t>& pos, size_t bytes, const char* from,
                         char* to) {
  MoveValues<true>(pos, bytes, from, to);
}
inline void ScatterValues(const std::vector<uint32_t>& pos, size_t bytes, const char* from,
                          char* to) {
  MoveValues<false>(pos, bytes, from, to);
}

// A copy of `from` in memory of its own.
template <typename T>
SArray<T> OwnedCopy(const SArray<T>& from) {
  if (from.empty()) return {};
  SArray<T> copy = NewLargeArray<T>(from.size());
  std::memcpy(copy.data(), from.data(), from.size() * sizeof(T));
  return copy;
}

// A request with borrowed arrays (PipelineRequest::borrowed) that is kept past Issue
// (held for the chunk agreement): its own copies of them.
void OwnRequestArrays(PipelineRequest* req);
// The message data that are views of req's borrowed arrays replaced by copies (a
// request sent to one server, chunks, a slicer's slices), so that nothing sent or kept
// for sending again refers to the caller's arrays after Issue.
void OwnBorrowedData(const PipelineRequest& req, std::vector<Message>* messages);

// Key caching: the smallest key list (raw, 8 bytes a key) that goes as a list id once
// its server has it. Shorter lists gain little from an id (a varint in the meta) and
// would cost a hash and a lookup per part.
constexpr size_t kMinCachedListBytes = 24;

// One message of a request and, for a pull, its answer.
struct RequestPipeline::Part {
  int server = 0;                   // rank
  // Of its keys in the request; empty: all, in order. A push's part of keys split by
  // server has none either: nothing of its answer goes back to the request's order.
  std::vector<uint32_t> positions;
  int32_t chunk = -1;               // the chunk it carries (positions holds its key)
  bool keys_lent = false;           // its keys are in a buffer the transport lent
  // Some of its frames (keys or values) are in buffers the transport lent: never sent
  // again (Van::LendSendBuffers), even when kept.
  bool lent = false;
  uint64_t chunk_offset = 0;        // the chunk's first value within the key
  uint64_t chunk_len = 0;           // values in the chunk
  bool answered = false;
  uint8_t key_resends = 0;  // times sent again with its keys (key caching)
  // Pull: the keys it asked for, as planned (raw), which a server's answer with keys
  // must repeat; empty for a part planned for a held request (Pending::keys then), and
  // for one whose keys are lent (keys_lent: the block is the server's once sent),
  // which keeps their HashKeys instead.
  SArray<Key> asked;
  uint64_t asked_hash = 0;
  bool asked_by_hash = false;
  KVFrames answer;
  // With failover (RequestPipeline::SendsPartsAgain), or when its keys may go
  // as a list id: the message as planned, to send again to the replica that takes over
  // if its server dies or leaves, or with its keys if the server has not kept their
  // list; and the rank and part index it was first sent as.
  std::unique_ptr<Message> sent;
  int first_server = -1;
  int64_t first_part = -1;
  // With PS_REPLICATION >= 2: the identity of the server process it went to. A new
  // process in a dead server's place has the same rank and node id: a part sent to the
  // dead one still goes again (PartServerGone).
  std::string process;
  // Split, after its server died, into parts for the servers that took its keys over:
  // it has no answer of its own (its pieces do).
  bool replaced = false;
  // A pull's part of a request whose keys are one run, split over servers: its keys
  // went as a bitmap key frame (KeyForm::kBitmap), kept here in place of positions
  // (none are made: 4 bytes a key): bit j of the bitmap at run_frame[run_bits] stands
  // for position run_from + j, and run_keys bits are set.
  SArray<char> run_frame;
  size_t run_bits = 0;
  size_t run_from = 0;
  size_t run_keys = 0;

  bool is_run() const { return run_keys > 0; }
  // How many of the request's keys the part holds; 0 for a part of all of them.
  size_t key_count() const { return is_run() ? run_keys : positions.size(); }
  // Calls f(position) for each key of a run part, in order.
  template <typename F>
  void ForEachRunPosition(F f) const {
    const unsigned char* bits = reinterpret_cast<const unsigned char*>(run_frame.data()) + run_bits;
    const size_t bytes = run_frame.size() - run_bits;
    for (size_t i = 0; i < bytes; i += 8) {
      uint64_t word = 0;
      std::memcpy(&word, bits + i, bytes - i < 8 ? bytes - i : 8);  // little-endian
      while (word) {
        f(run_from + i * 8 + static_cast<size_t>(__builtin_ctzll(word)));
        word &= word - 1;
      }
    }
  }
  // to[position] = from[j] for its j-th key, in values of `bytes` bytes (a run part).
  void ScatterRunValues(size_t bytes, const char* from, char* to) const {
    if (bytes == 4) return ScatterRun<4>(bytes, from, to);
    if (bytes == 8) return ScatterRun<8>(bytes, from, to);
    ScatterRun<0>(bytes, from, to);
  }
  template <size_t kBytes>
  void ScatterRun(size_t bytes, const char* from, char* to) const {
    const size_t b = kBytes ? kBytes : bytes;
    ForEachRunPosition([&](size_t at) {
      std::memcpy(to + at * b, from, kBytes ? kBytes : bytes);
      from += b;
    });
  }
  // Its positions, made from the bitmap for a run part.
  std::vector<uint32_t> AllPositions() const {
    if (!is_run()) return positions;
    std::vector<uint32_t> all;
    all.reserve(run_keys);
    ForEachRunPosition([&all](size_t at) { all.push_back(static_cast<uint32_t>(at)); });
    return all;
  }
};

// A request issued while the server app's answer on chunks is not in yet: registered
// with the customer (so it has its timestamp, deadline and peers), not planned.
struct RequestPipeline::Held {
  PipelineRequest request;
  const char* what = "";
  int64_t clock = -1;  // the node's clock when it was issued
};

struct RequestPipeline::Pending {
  int timestamp = 0;
  int remaining = 0;
  bool push = false;
  bool pull = false;
  std::function<void()> callback;
  size_t num_keys = 0;
  // IsOneRun of the request's keys, asked once by Issue (one pass over them stands for
  // the check that they ascend). A request held for the chunk agreement is planned
  // later into a Pending of its own, where this is kUnknown and Plan asks again.
  KeyShape key_shape = KeyShape::kUnknown;
  // The request's keys; empty when it borrowed them (PipelineRequest::borrowed) and no
  // key is chunked: a pull's parts then check their answers against Part::asked.
  SArray<Key> keys;
  std::vector<Part> parts;
  // Pull: the whole value length of each chunked key, by position (0: not chunked);
  // empty when no key is chunked.
  std::vector<uint64_t> chunked_len;
  SArray<char> sized_output;
  std::function<SArray<char>(size_t)> output_of_size;  // PipelineRequest::output_of_size
  std::function<Status(const SArray<char>&, const SArray<int>&)> deliver;
  bool wants_lens = true;  // PipelineRequest::wants_lens
  Status status;
  std::unique_ptr<Held> held;  // set while held for the chunk answer (no parts yet)
  // The chunk question (AskChunkSupport) rather than a request: one part per server,
  // and the first server that said it takes whole values only, or -1.
  bool question = false;
  int whole_only_server = -1;
  // When it was issued: its latency (NodeActivity) is from here to Finish.
  std::chrono::steady_clock::time_point issued_at;
};

// Whether a request's `keys` are one run (IsOneRun): `known` (Pending::key_shape, the
// answer Issue kept), or asked now.
inline bool OneRun(KeyShape known, const SArray<Key>& keys) {
  if (known != KeyShape::kUnknown) return known == KeyShape::kOneRun;
  return IsOneRun(keys.data(), keys.size());
}

}  // namespace ps

#endif  // HERDPS_WORKER_REQUEST_PARTS_H_
