#include "request_bounds.h"

#include <algorithm>
#include <string>

#include "ps/internal/clock_client.h"
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

// What a minimum of `closing_below` means: "every counted worker has ended clock 6" for 7.
std::string Applied(int64_t closing_below) {
  if (closing_below == kAllClocksEnded) return "no worker counts any more";
  if (closing_below == 0) return "no worker has ended a clock yet";
  return "every counted worker has ended clock " + std::to_string(closing_below - 1);
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

Status CheckClock(const KVMeta& meta, int64_t closing_below, int64_t max_ahead) {
  const std::string what = std::string(meta.push ? "push" : "pull") + " of clock " +
                           std::to_string(meta.clock) + " from node " + std::to_string(meta.sender);
  if (meta.push && meta.clock < 0) {
    return Status::InvalidArgument(
        what +
        ": synchronous aggregation sums pushes by the clock their worker stamps on "
        "them; push from a KVWorker of this job");
  }
  if (meta.clock < -1) {
    return Status::InvalidArgument(what + ": a clock is -1 (none) or at least 0");
  }
  if (meta.push && meta.clock < closing_below) {
    return Status::InvalidArgument(what + " after the rounds of that clock were applied (" +
                                   Applied(closing_below) +
                                   "): it comes from a worker that no longer counts");
  }
  if (meta.clock > closing_below && meta.clock - closing_below > max_ahead) {
    return Status::InvalidArgument(
        what + " is " + std::to_string(meta.clock - closing_below) +
        " clocks ahead of the minimum this server has heard of (" + Applied(closing_below) +
        "); under BSP a worker is at most 1 clock ahead of the minimum, and the server takes "
        "up to " +
        std::to_string(max_ahead) +
        " while new minimums are on their way to it: the sender does not keep the job's "
        "clocks");
  }
  return Status::OK();
}

}  // namespace ps
