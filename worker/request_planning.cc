// RequestPipeline's planning: how one request becomes parts, one message per server
// that owns some of its keys and one per chunk of a value over the job's chunk size
// (docs/pipeline.md).
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ps/internal/key_partition.h"
#include "ps/internal/large_buffer.h"
#include "ps/internal/postoffice.h"
#include "ps/internal/request_pipeline.h"
#include "request_parts.h"

namespace ps {
namespace {

// One server's share of a push split by SplitPushByServer.
struct ServerShare {
  int server = 0;
  SArray<Key> keys;
  SArray<char> vals;
  bool keys_lent = false;  // keys in a buffer the transport lent (Van::LendSendBuffers)
  bool vals_lent = false;  // likewise its values
};

// Makes a share's arrays for `count` keys of `bytes` of values each.
using ShareArrays = std::function<void(size_t count, size_t bytes, ServerShare* share)>;

// Copies each key and its kBytes of values (bytes when kBytes is 0) to the next place
// of its server's arrays.
template <size_t kBytes>
void CopyToServers(const uint16_t* server_of, const Key* keys, const char* vals, size_t n,
                   size_t bytes, Key** key_at, char** val_at) {
  const size_t step = kBytes ? kBytes : bytes;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t s = server_of[i];
    *key_at[s]++ = keys[i];
    std::memcpy(val_at[s], vals + i * step, kBytes ? kBytes : bytes);
    val_at[s] += step;
  }
}

// A push of whole keys with `bytes` of values each, split by server in two passes over
// the request: which server owns each key (ConsistentHashRing::ServersOf), then each
// key and its values straight into its server's arrays (made by `arrays`). No
// positions are made: a push's answer has no values to put back. Empty when one
// server owns every key, whose rank goes to *only.
std::vector<ServerShare> SplitPushByServer(const ConsistentHashRing& ring, int num_servers,
                                           const SArray<Key>& keys, const SArray<char>& vals,
                                           size_t bytes, const ShareArrays& arrays, int* only) {
  const size_t n = keys.size();
  SArray<uint16_t> server_of = NewLargeArray<uint16_t>(n);
  ring.ServersOf(keys.data(), n, server_of.data());
  std::vector<size_t> count(static_cast<size_t>(num_servers), 0);
  for (size_t i = 0; i < n; ++i) ++count[server_of[i]];
  std::vector<ServerShare> shares;
  std::vector<Key*> key_at(count.size(), nullptr);
  std::vector<char*> val_at(count.size(), nullptr);
  for (size_t s = 0; s < count.size(); ++s) {
    if (count[s] == n) {
      *only = static_cast<int>(s);
      return shares;
    }
    if (count[s] == 0) continue;
    ServerShare share;
    share.server = static_cast<int>(s);
    arrays(count[s], bytes, &share);
    key_at[s] = share.keys.data();
    val_at[s] = share.vals.data();
    shares.push_back(std::move(share));
  }
  if (bytes == 4) {
    CopyToServers<4>(server_of.data(), keys.data(), vals.data(), n, bytes, key_at.data(),
                     val_at.data());
  } else if (bytes == 8) {
    CopyToServers<8>(server_of.data(), keys.data(), vals.data(), n, bytes, key_at.data(),
                     val_at.data());
  } else {
    CopyToServers<0>(server_of.data(), keys.data(), vals.data(), n, bytes, key_at.data(),
                     val_at.data());
  }
  return shares;
}

// No transport lends a block for a frame under this (the ZeroMQ van's shared-memory
// rings take frames of 64 KiB and more): smaller requests do not ask.
constexpr size_t kLendFromBytes = 64 << 10;

bool Within(const void* at, const void* base, size_t bytes) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(at), b = reinterpret_cast<uintptr_t>(base);
  return bytes > 0 && p >= b && p < b + bytes;
}

// Whether a message frame is a view of one of a borrowed request's caller arrays.
bool ViewsCallerArrays(const PipelineRequest& req, const SArray<char>& frame) {
  const char* at = frame.data();
  return Within(at, req.keys.data(), req.keys.size() * sizeof(Key)) ||
         Within(at, req.vals.data(), req.vals.size()) ||
         Within(at, req.lens.data(), req.lens.size() * sizeof(int));
}

}  // namespace

void OwnRequestArrays(PipelineRequest* req) {
  if (!req->borrowed) return;
  req->keys = OwnedCopy(req->keys);
  req->vals = OwnedCopy(req->vals);
  req->lens = OwnedCopy(req->lens);
  for (PipelineRequest::Slice& slice : req->slices) {
    slice.keys = OwnedCopy(slice.keys);
    slice.vals = OwnedCopy(slice.vals);
    slice.lens = OwnedCopy(slice.lens);
  }
  req->borrowed = false;
}

void RequestPipeline::LendBorrowedFrames(const PipelineRequest& req, Pending* p,
                                         std::vector<Message>* messages) {
  if (!req.borrowed) return;
  for (size_t i = 0; i < messages->size() && i < p->parts.size(); ++i) {
    Message& msg = (*messages)[i];
    Part& part = p->parts[i];
    if (part.lent || msg.data.empty()) continue;
    std::vector<uint64_t> sizes(msg.data.size(), 0);
    bool views = false;
    for (size_t f = 0; f < msg.data.size(); ++f) {
      if (msg.data[f].size() >= kLendFromBytes && ViewsCallerArrays(req, msg.data[f])) {
        sizes[f] = msg.data[f].size();
        views = true;
      }
    }
    // A part kept to go again (or whose key list may go as an id) needs arrays of its
    // own; KeepSentParts asks the same of the keys frame as it is now.
    if (!views || KeepsSentPart(msg.data[0].size())) continue;
    std::vector<SArray<char>> lent =
        Postoffice::Get()->LendSendBuffers(Postoffice::ServerRankToID(part.server), sizes);
    for (size_t f = 0; f < msg.data.size() && f < lent.size(); ++f) {
      if (sizes[f] == 0 || lent[f].size() != sizes[f]) continue;
      std::memcpy(lent[f].data(), msg.data[f].data(), sizes[f]);
      msg.data[f] = lent[f];
      part.lent = true;
      if (f == 0) part.keys_lent = true;
    }
  }
}

void OwnBorrowedData(const PipelineRequest& req, std::vector<Message>* messages) {
  if (!req.borrowed) return;
  for (Message& msg : *messages) {
    for (SArray<char>& data : msg.data) {
      if (ViewsCallerArrays(req, data)) data = OwnedCopy(data);
    }
  }
}

uint64_t RequestPipeline::ChunkValues() const {
  uint64_t bytes = Postoffice::Get()->chunk_bytes();
  if (bytes == 0) return 0;
  return std::max<uint64_t>(1, bytes / elem_size_);
}

std::vector<uint64_t> RequestPipeline::ChunkedLengths(const PipelineRequest& req) {
  std::vector<uint64_t> chunked;
  const size_t n = req.keys.size();
  const uint64_t chunk_values = ChunkValues();
  // A slicer's parts go as it made them.
  if (n == 0 || req.sliced || chunk_values == 0 || !chunking_.load(std::memory_order_relaxed)) {
    return chunked;
  }
  if (req.push) {
    // Read from lens in place: a push that chunks nothing allocates nothing here.
    const uint64_t width = req.lens.empty() ? req.vals.size() / elem_size_ / n : 0;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t len = req.lens.empty() ? width : static_cast<uint64_t>(req.lens[i]);
      if (len <= chunk_values) continue;
      if (chunked.empty()) chunked.assign(n, 0);
      chunked[i] = len;
    }
    return chunked;
  }
  if (n == 1 && req.sized_output.size() / elem_size_ > chunk_values) {
    chunked.assign(1, req.sized_output.size() / elem_size_);
    return chunked;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (known_lens_.empty()) return chunked;
  for (size_t i = 0; i < n; ++i) {
    auto it = known_lens_.find(req.keys[i]);
    if (it == known_lens_.end()) continue;
    if (chunked.empty()) chunked.assign(n, 0);
    chunked[i] = it->second;
  }
  return chunked;
}

void RequestPipeline::RememberChunkedLengths(const PipelineRequest& req,
                                             const std::vector<uint64_t>& chunked) {
  if (chunked.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < chunked.size(); ++i) {
    if (chunked[i]) known_lens_[req.keys[i]] = chunked[i];
  }
}

void RequestPipeline::GatherPart(const PipelineRequest& req, const std::vector<size_t>& offsets,
                                 size_t width, const std::vector<uint32_t>& pos,
                                 SArray<Key>* keys, SArray<char>* vals, SArray<int>* lens) const {
  // Not zero-filled: every element is written below (into *keys if it has their size).
  if (keys->size() != pos.size()) *keys = NewLargeArray<Key>(pos.size());
  for (size_t j = 0; j < pos.size(); ++j) (*keys)[j] = req.keys[pos[j]];
  if (!req.push) return;
  if (offsets.empty()) {
    // Every key has `width` values.
    const size_t bytes = width * elem_size_;
    *vals = RawBuffer(pos.size() * bytes);
    GatherValues(pos, bytes, req.vals.data(), vals->data());
    return;
  }
  size_t total = 0;
  for (uint32_t i : pos) total += offsets[i + 1] - offsets[i];
  *vals = RawBuffer(total * elem_size_);
  lens->resize(pos.size());
  size_t out = 0;
  for (size_t j = 0; j < pos.size(); ++j) {
    const size_t i = pos[j];
    const size_t len = offsets[i + 1] - offsets[i];
    (*lens)[j] = req.lens[i];
    std::memcpy(vals->data() + out * elem_size_, req.vals.data() + offsets[i] * elem_size_,
                len * elem_size_);
    out += len;
  }
}

void RequestPipeline::Plan(const PipelineRequest& req, const char* what,
                           const std::vector<uint64_t>& chunked, Pending* p,
                           std::vector<Message>* messages) {
  Postoffice* po = Postoffice::Get();
  const size_t n = req.keys.size();
  if (n == 0) return;

  // The header every part shares; the van fills sender, the caller timestamp and ids.
  Message head;
  head.meta.app_id = customer_->app_id();
  head.meta.customer_id = customer_->customer_id();
  head.meta.incarnation = customer_->incarnation();
  head.meta.request = true;
  head.meta.push = req.push;
  head.meta.pull = req.pull;
  head.meta.head = req.cmd;
  head.meta.priority = req.priority;
  if (req.pull && policy_.pull_fp16) head.meta.pull_compression = static_cast<int>(Codec::kFp16);
  auto add_part = [&](Part part, const SArray<Key>& keys, const SArray<char>& vals,
                      const SArray<int>& lens, uint64_t value_len) {
    Message msg;
    msg.meta = head.meta;
    msg.data.reserve(3);  // keys, values, lengths: each grown once, not three times
    msg.meta.data_type.reserve(3);
    msg.meta.recipient = Postoffice::ServerRankToID(part.server);
    msg.meta.part = static_cast<uint32_t>(p->parts.size());
    if (part.chunk >= 0) {
      msg.meta.chunk = part.chunk;
      msg.meta.chunk_offset = part.chunk_offset;
      msg.meta.value_len = value_len;
    }
    msg.AddData(keys);
    if (req.push) {
      msg.meta.data_type.push_back(type_);
      msg.data.push_back(vals);
      if (!lens.empty()) msg.AddData(lens);
    }
    messages->push_back(std::move(msg));
    p->parts.push_back(std::move(part));
  };

  if (req.sliced) {
    for (const PipelineRequest::Slice& slice : req.slices) {
      Part part;
      part.server = slice.server;
      part.positions = slice.positions;
      add_part(std::move(part), slice.keys, slice.vals, slice.lens, 0);
    }
    return;
  }

  const ConsistentHashRing& ring = po->ring();
  // The ranks this ring names, servers added to the running job included.
  const int num_servers = ring.rank_bound();
  const uint64_t chunk_values = ChunkValues();
  const size_t width = req.push && req.lens.empty() ? req.vals.size() / elem_size_ / n : 0;
  // Value offsets of a push with lens (in elements), for copying parts.
  std::vector<size_t> offsets;
  if (req.push && !req.lens.empty()) offsets = ValueOffsets(req.lens.data(), n);
  if (req.pull) p->chunked_len = chunked;

  // A push of whole keys of one width without codecs: split straight into its parts.
  if (req.push && !req.pull && !compress_pushes_ && chunked.empty() && offsets.empty() &&
      num_servers > 1 && num_servers <= 65536) {
    // Where the transport lends memory for a part (a shared-memory ring to a server on
    // this host), the part is written there, once; not a part kept to be sent again.
    auto arrays = [&](size_t count, size_t bytes, ServerShare* share) {
      std::vector<SArray<char>> lent =
          LendForPart(share->server, {count * sizeof(Key), count * bytes});
      share->keys_lent = !lent[0].empty();
      share->keys = share->keys_lent ? SArray<Key>(lent[0]) : NewLargeArray<Key>(count);
      share->vals_lent = !lent[1].empty();
      share->vals = share->vals_lent ? lent[1] : RawBuffer(count * bytes);
    };
    int only = -1;
    std::vector<ServerShare> shares = SplitPushByServer(ring, num_servers, req.keys, req.vals,
                                                        width * elem_size_, arrays, &only);
    if (shares.empty()) {  // one server owns every key: the caller's arrays as they are
      Part part;
      part.server = only;
      add_part(std::move(part), req.keys, req.vals, req.lens, 0);
    }
    for (ServerShare& share : shares) {
      Part part;
      part.server = share.server;
      part.keys_lent = share.keys_lent;
      part.lent = share.keys_lent || share.vals_lent;
      add_part(std::move(part), share.keys, share.vals, {}, 0);
    }
    return;
  }
  // Whole keys otherwise: one part per server that owns some (and, with codecs per key
  // range, per codec, so that each part is one frame of one codec). Two passes, so that
  // each group's positions are allocated once at their size: which group each key goes
  // to, then the positions.
  const size_t codecs = req.push && compress_pushes_ ? compressors_.size() : 1;
  const size_t groups = static_cast<size_t>(num_servers) * codecs;
  constexpr uint32_t kChunkedKey = UINT32_MAX;
  SArray<uint16_t> server_of;  // every key's server, from one call into the ring
  if (groups > 1 && num_servers > 1 && num_servers <= 65536) {
    server_of = NewLargeArray<uint16_t>(n);
    ring.ServersOf(req.keys.data(), n, server_of.data());
  }
  // Without codecs or chunks a key's group is its server: server_of serves as the groups.
  const bool groups_are_servers = !server_of.empty() && codecs == 1 && chunked.empty();
  SArray<uint32_t> group_of;  // else each key's group; none for one group of whole keys
  if ((groups > 1 || !chunked.empty()) && !groups_are_servers) {
    group_of = NewLargeArray<uint32_t>(n);
  }
  std::vector<size_t> group_size(groups, 0);
  if (groups_are_servers) {
    for (size_t i = 0; i < n; ++i) ++group_size[server_of[i]];
  } else if (group_of.empty()) {
    group_size[0] = n;  // one group, every key whole
  }
  for (size_t i = 0; i < n && !group_of.empty(); ++i) {
    if (!chunked.empty() && chunked[i]) {
      group_of[i] = kChunkedKey;
      continue;
    }
    if (groups == 1) {
      group_of[i] = 0;
      ++group_size[0];
      continue;
    }
    size_t group = num_servers == 1       ? 0
                   : !server_of.empty()   ? server_of[i]
                                          : static_cast<size_t>(ring.ServerOf(req.keys[i]));
    if (codecs > 1) group = group * codecs + CodecIndex(req.keys[i]);
    group_of[i] = static_cast<uint32_t>(group);
    ++group_size[group];
  }
  size_t servers_used = 0;
  size_t whole_keys = 0;
  for (size_t size : group_size) {
    servers_used += size > 0;
    whole_keys += size;
  }
  if (servers_used == 1 && whole_keys == n) {
    // One server owns every key: send the caller's arrays as they are; empty
    // positions mean the answer is already in the caller's order.
    Part part;
    part.server = static_cast<int>(
        (std::find_if(group_size.begin(), group_size.end(), [](size_t s) { return s > 0; }) -
         group_size.begin()) / codecs);
    add_part(std::move(part), req.keys, req.vals, req.lens, 0);
  } else {
    std::vector<std::vector<uint32_t>> whole(groups);
    for (size_t g = 0; g < groups; ++g) whole[g].reserve(group_size[g]);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t g = groups_are_servers ? server_of[i] : group_of[i];
      if (g != kChunkedKey) whole[g].push_back(static_cast<uint32_t>(i));
    }
    group_of.clear();  // free them before the copies below
    server_of.clear();
    for (size_t g = 0; g < groups; ++g) {
      if (whole[g].empty()) continue;
      Part part;
      part.server = static_cast<int>(g / codecs);
      part.positions = std::move(whole[g]);
      // Keys gathered straight into the transport's memory where it lends some, as for
      // the split push above (a pull's parts then keep their keys' hash, Part::asked).
      SArray<Key> keys(LendForPart(part.server, {part.positions.size() * sizeof(Key)})[0]);
      part.keys_lent = !keys.empty();
      part.lent = part.keys_lent;
      SArray<char> vals;
      SArray<int> lens;
      GatherPart(req, offsets, width, part.positions, &keys, &vals, &lens);
      add_part(std::move(part), keys, vals, lens, 0);
    }
  }

  // Chunked keys: one part per chunk, each a view of the caller's values.
  if (chunked.empty()) return;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t len = chunked[i];
    if (!len) continue;
    const Key key = req.keys[i];
    const size_t begin = req.push ? (offsets.empty() ? i * width : offsets[i]) : 0;
    const uint64_t count = (len + chunk_values - 1) / chunk_values;
    if (count > static_cast<uint64_t>(INT32_MAX)) {
      throw Error(std::string(what) + ": key " + std::to_string(key) + " would need " +
                  std::to_string(count) + " chunks; raise PS_CHUNK_BYTES");
    }
    for (uint64_t c = 0; c < count; ++c) {
      Part part;
      part.chunk = static_cast<int32_t>(c);
      part.chunk_offset = c * chunk_values;
      part.chunk_len = std::min<uint64_t>(chunk_values, len - part.chunk_offset);
      part.server = ring.ServerOfChunk(key, static_cast<uint32_t>(c));
      part.positions.push_back(static_cast<uint32_t>(i));
      SArray<Key> keys{key};
      SArray<char> vals;
      SArray<int> lens;
      if (req.push) {
        vals = req.vals.segment((begin + part.chunk_offset) * elem_size_,
                                (begin + part.chunk_offset + part.chunk_len) * elem_size_);
      }
      add_part(std::move(part), keys, vals, lens, len);
    }
  }
}

void RequestPipeline::Stamp(const PipelineRequest& req, const Pending& p, int timestamp,
                            uint64_t id, int64_t clock, std::vector<Message>* messages) {
  {
    std::lock_guard<std::mutex> lock(counters_mu_);
    counters_.parts += messages->size();
    // The parts hold every value of the request once: raw, that is the caller's array.
    if (req.push) counters_.push_raw_bytes += req.vals.size();
    for (size_t i = 0; i < messages->size(); ++i) {
      if (p.parts[i].chunk >= 0) ++counters_.chunks;
    }
  }
  for (Message& msg : *messages) {
    msg.meta.timestamp = timestamp;
    msg.meta.request_id = id;
    msg.meta.clock = clock;
  }
}

}  // namespace ps
