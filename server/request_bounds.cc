#include "request_bounds.h"

#include <algorithm>
#include <string>

#include "ps/optimizer_server.h"
#include "shard_store.h"

namespace ps {
namespace {

Status TooLong(Key key, uint64_t len) {
  return Status::InvalidArgument(
      "push of " + std::to_string(len) + " values to key " + std::to_string(key) +
      ": a key holds at most " + std::to_string(kMaxValueLength) +
      " values; split it into several keys, or let the job store it in chunks "
      "(PS_CHUNK_BYTES on the scheduler)");
}

Status NoValues(Key key) {
  return Status::InvalidArgument("push with a key that has no values (key " + std::to_string(key) +
                                 ")");
}

}  // namespace

Status CheckValueLengths(const KVMeta& meta, const KVPairs<float>& data, size_t* width) {
  *width = 0;
  if (!meta.push) return Status::OK();
  const size_t n = data.keys.size();
  const bool need_values = meta.cmd != kEraseKeysCmd;
  if (data.lens.empty()) {
    const uint64_t w = data.vals.size() / n;
    if (w == 0 && need_values) return NoValues(data.keys[0]);
    if (w > kMaxValueLength) return TooLong(data.keys[0], w);
    *width = static_cast<size_t>(w);
    return Status::OK();
  }
  if (data.lens.size() != n) {
    return Status::InvalidArgument(std::to_string(data.lens.size()) + " lens for " +
                                   std::to_string(n) + " keys");
  }
  // One pass; the branch is taken only for a bad length.
  const int* lens = data.lens.data();
  for (size_t i = 0; i < n; ++i) {
    const int len = lens[i];
    if (len < (need_values ? 1 : 0) || static_cast<uint64_t>(len) > kMaxValueLength) {
      if (len < 0) {
        return Status::InvalidArgument("negative length " + std::to_string(len) + " for key " +
                                       std::to_string(data.keys[i]));
      }
      return len == 0 ? NoValues(data.keys[i]) : TooLong(data.keys[i], len);
    }
  }
  return Status::OK();
}

Status CheckChunkLayout(const KVMeta& meta, const KVPairs<float>& data, uint64_t chunk_values,
                        uint32_t* len) {
  if (data.keys.size() != 1) {
    return Status::InvalidArgument("a chunk request carries " + std::to_string(data.keys.size()) +
                                   " keys; expected one");
  }
  if (chunk_values == 0) {
    return Status::InvalidArgument(
        "a chunk arrived but this job does not chunk values "
        "(PS_CHUNK_BYTES=0 on the scheduler)");
  }
  const Key key = data.keys[0];
  const uint64_t offset = meta.chunk_offset, whole = meta.value_len;
  // By division, not chunk * chunk_values, which a forged chunk size could overflow.
  if (meta.chunk < 0 || offset % chunk_values != 0 ||
      offset / chunk_values != static_cast<uint64_t>(meta.chunk) || offset >= whole ||
      whole <= chunk_values) {
    return Status::InvalidArgument(
        "chunk " + std::to_string(meta.chunk) + " of key " + std::to_string(key) + " at value " +
        std::to_string(offset) + " of " + std::to_string(whole) +
        " does not match the job's chunks of " + std::to_string(chunk_values) + " values");
  }
  const uint64_t expect = std::min<uint64_t>(chunk_values, whole - offset);
  if (expect > kMaxValueLength) {
    return Status::InvalidArgument(
        "chunk " + std::to_string(meta.chunk) + " of key " + std::to_string(key) + " holds " +
        std::to_string(expect) + " values; a chunk holds at most " +
        std::to_string(kMaxValueLength) + " (lower PS_CHUNK_BYTES on the scheduler)");
  }
  if (meta.push && data.vals.size() != expect) {
    return Status::InvalidArgument(
        "chunk " + std::to_string(meta.chunk) + " of key " + std::to_string(key) + " carries " +
        std::to_string(data.vals.size()) + " values; expected " + std::to_string(expect));
  }
  *len = static_cast<uint32_t>(expect);
  return Status::OK();
}

}  // namespace ps
