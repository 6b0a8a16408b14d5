// The bookkeeping of RequestPipeline (ps/internal/request_pipeline.h): one request in
// flight and its parts. Private to worker/: request_pipeline.cc plans, sends and
// assembles them, request_encoding.cc encodes push parts.
#ifndef HERDPS_WORKER_REQUEST_PARTS_H_
#define HERDPS_WORKER_REQUEST_PARTS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "ps/internal/kv_message.h"
#include "ps/internal/request_pipeline.h"

namespace ps {

// An uninitialised byte buffer, for arrays written over whole (a pull's result, a part's
// gathered values): zero-filling them first would be one more pass over the data.
inline SArray<char> RawBuffer(size_t bytes) {
  return SArray<char>(new char[bytes ? bytes : 1], bytes, [](char* p) { delete[] p; });
}

// One message of a request and, for a pull, its answer.
struct RequestPipeline::Part {
  int server = 0;                   // rank
  std::vector<uint32_t> positions;  // of its keys in the request; empty: all, in order
  int32_t chunk = -1;               // the chunk it carries (positions holds its key)
  uint64_t chunk_offset = 0;        // the chunk's first value within the key
  uint64_t chunk_len = 0;           // values in the chunk
  uint64_t value_begin = 0;         // a pushed chunk's key: its first value in the request
  uint64_t value_len_of_key = 0;    // and its whole length
  bool answered = false;
  bool refused = false;  // a chunk the server app does not take: its key went whole
  KVFrames answer;
};

struct RequestPipeline::Pending {
  int timestamp = 0;
  int remaining = 0;
  bool push = false;
  bool pull = false;
  std::function<void()> callback;
  SArray<Key> keys;
  std::vector<Part> parts;
  // Pull: the whole value length of each chunked key, by position (0: not chunked);
  // empty when no key is chunked.
  std::vector<uint64_t> chunked_len;
  SArray<char> sized_output;
  std::function<Status(const SArray<char>&, const SArray<int>&)> deliver;
  Status status;
  // For sending a chunked key whole when its server app refuses chunks.
  Meta head;
  SArray<char> vals;
  std::vector<uint32_t> sent_whole;  // positions of keys sent whole after a refusal
  bool chunked_any = false;
};

}  // namespace ps

#endif  // HERDPS_WORKER_REQUEST_PARTS_H_
