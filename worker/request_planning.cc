// RequestPipeline's planning: how one request becomes parts, one message per server
// that owns some of its keys and one per chunk of a value over the job's chunk size
// (docs/pipeline.md).
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ps/internal/key_frame.h"
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
  SArray<Key> keys;      // empty when the keys go as key_frame
  SArray<char> key_frame;  // the keys as a bitmap key frame, for a request that is one run
  SArray<char> vals;
  bool keys_lent = false;  // keys in a buffer the transport lent (Van::LendSendBuffers)
  bool vals_lent = false;  // likewise its values
};

// Makes a share's arrays for `count` keys of `bytes` of values each (its keys array
// only when `keys`).
using ShareArrays =
    std::function<void(size_t count, size_t bytes, bool keys, ServerShare* share)>;

// Copies each key (unless `keys` is null: they go as bitmaps, SetShareBits) and its
// kBytes of values (bytes when kBytes is 0) to the next place of its server's arrays.
template <size_t kBytes>
void CopyToServers(const uint16_t* server_of, const Key* keys, const char* vals, size_t n,
                   size_t bytes, Key** key_at, char** val_at) {
  const size_t step = kBytes ? kBytes : bytes;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t s = server_of[i];
    if (keys) *key_at[s]++ = keys[i];
    std::memcpy(val_at[s], vals + i * step, kBytes ? kBytes : bytes);
    val_at[s] += step;
  }
}

// The values alone, when exactly two servers, ranks r0 and r1, own the keys: both
// places stay in registers and each value goes to one without a branch (a branch per
// key mispredicts half the time on the ring's even spread; an array of places costs a
// store and a load per key).
template <size_t kBytes>
void CopyValuesToTwo(const uint16_t* server_of, const char* vals, size_t n, size_t bytes,
                     uint16_t r1, char* at0, char* at1) {
  const size_t step = kBytes ? kBytes : bytes;
  for (size_t i = 0; i < n; ++i) {
    const size_t one = server_of[i] == r1;
    // A mask, not `one ? at1 : at0`, which compilers turn back into a branch.
    const uintptr_t mask = 0 - static_cast<uintptr_t>(one);
    char* to = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(at0) & ~mask) |
                                       (reinterpret_cast<uintptr_t>(at1) & mask));
    std::memcpy(to, vals + i * step, kBytes ? kBytes : bytes);
    at0 += (1 - one) * step;
    at1 += one * step;
  }
}

template <size_t kBytes>
void CopyByServer(const uint16_t* server_of, const Key* keys, const char* vals, size_t n,
                  size_t bytes, const std::vector<size_t>& count, Key** key_at, char** val_at) {
  std::vector<uint16_t> owners;
  for (size_t s = 0; s < count.size(); ++s) {
    if (count[s]) owners.push_back(static_cast<uint16_t>(s));
  }
  if (!keys && owners.size() == 2) {
    CopyValuesToTwo<kBytes>(server_of, vals, n, bytes, owners[1], val_at[owners[0]],
                            val_at[owners[1]]);
  } else {
    CopyToServers<kBytes>(server_of, keys, vals, n, bytes, key_at, val_at);
  }
}

// Which server owns each key of a request (ConsistentHashRing::ServersOf), how many
// keys each owns, and, when asked, each one's first and last position.
struct ServerSpread {
  SArray<uint16_t> server_of;
  std::vector<size_t> count, first, last;
  int only = -1;  // the rank that owns every key, if one does
};

ServerSpread SpreadOverServers(const ConsistentHashRing& ring, int num_servers,
                               const SArray<Key>& keys, bool ends) {
  const size_t n = keys.size(), servers = static_cast<size_t>(num_servers);
  ServerSpread spread;
  spread.server_of = NewLargeArray<uint16_t>(n);
  ring.ServersOf(keys.data(), n, spread.server_of.data());
  const uint16_t* server_of = spread.server_of.data();
  spread.count.assign(servers, 0);
  for (size_t i = 0; i < n; ++i) ++spread.count[server_of[i]];
  size_t with_keys = 0;
  for (size_t s = 0; s < servers; ++s) {
    if (spread.count[s] == n) spread.only = static_cast<int>(s);
    with_keys += spread.count[s] > 0;
  }
  if (!ends || spread.only >= 0) return spread;
  // Scans from both ends that stop once every server with keys was seen (at once, for
  // a ring's even spread).
  spread.first.assign(servers, n);
  spread.last.assign(servers, 0);
  for (size_t i = 0, seen = 0; i < n && seen < with_keys; ++i) {
    if (spread.first[server_of[i]] == n) spread.first[server_of[i]] = i, ++seen;
  }
  std::vector<bool> found(servers, false);
  for (size_t i = n, seen = 0; i-- > 0 && seen < with_keys;) {
    if (!found[server_of[i]]) spread.last[server_of[i]] = i, found[server_of[i]] = true, ++seen;
  }
  return spread;
}

// Whether each server's keys of a request whose keys are one run go as a bitmap key
// frame over the positions from its first key to its last (a bit a position instead of
// 8 bytes a key: ps-lite's benchmark spreads 10 million strided keys over the servers,
// 1.25 MB a server instead of 40 MB): when every share's frame takes at most 4 bytes a
// key, as for any key frame. The ring gives each of a few servers about an even share
// of any run, but a share of a few keys spread far apart would cost more as a bitmap.
bool SharesFitBitmaps(const ServerSpread& spread, const SArray<Key>& keys) {
  if (keys.size() < 2 || spread.first.empty()) return false;
  const Key step = keys[1] - keys[0];
  for (size_t s = 0; s < spread.count.size(); ++s) {
    const size_t count = spread.count[s];
    if (count == 0) continue;
    const size_t span = spread.last[s] - spread.first[s] + 1;
    if (KeyBitmapFrameBytes(count, keys[spread.first[s]], step, span) > count * (sizeof(Key) / 2)) {
      return false;
    }
  }
  return true;
}

// Server s's bitmap key frame (SharesFitBitmaps), its bits not yet set: into *frame;
// returns where the bitmap starts.
unsigned char* BeginShareBitmap(const ServerSpread& spread, const SArray<Key>& keys, size_t s,
                                SArray<char>* frame) {
  return reinterpret_cast<unsigned char*>(
      BeginKeyBitmapFrame(spread.count[s], keys[spread.first[s]], keys[1] - keys[0],
                          spread.last[s] - spread.first[s] + 1, frame));
}

// Bit k set where server[k] == s, for k < count (at most 64).
uint64_t BlockMask(const uint16_t* server, size_t count, uint16_t s) {
  uint64_t word = 0;
  size_t k = 0;
#if defined(__SSE2__)
  // 16 comparisons at a time: two vectors of 8 compared, packed to bytes, one mask.
  const __m128i want = _mm_set1_epi16(static_cast<short>(s));
  for (; k + 16 <= count; k += 16) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(server + k));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(server + k + 8));
    const __m128i eq = _mm_packs_epi16(_mm_cmpeq_epi16(lo, want), _mm_cmpeq_epi16(hi, want));
    word |= static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(eq))) << k;
  }
#endif
  for (; k < count; ++k) word |= static_cast<uint64_t>(server[k] == s) << k;
  return word;
}

// Sets each key's bit in its server's bitmap (bit_at[s], whose bit 0 is position
// first[s]), 64 positions at a time: per block, a word per server from comparisons
// without a branch or a store per key, then shifted into place in words of its own,
// copied into the frame at the end.
void SetShareBits(const ServerSpread& spread, unsigned char* const* bit_at) {
  const size_t n = spread.server_of.size();
  const uint16_t* server_of = spread.server_of.data();
  std::vector<uint16_t> owners;
  std::vector<std::vector<uint64_t>> words;
  for (size_t s = 0; s < spread.count.size(); ++s) {
    if (spread.count[s] == 0) continue;
    owners.push_back(static_cast<uint16_t>(s));
    words.emplace_back((spread.last[s] - spread.first[s]) / 64 + 2, 0);
  }
  for (size_t b = 0; b < n; b += 64) {
    const size_t in_block = std::min<size_t>(64, n - b);
    for (size_t o = 0; o < owners.size(); ++o) {
      const uint16_t s = owners[o];
      const size_t first = spread.first[s];
      if (b + in_block <= first || b > spread.last[s]) continue;
      const uint64_t word = BlockMask(server_of + b, in_block, s);
      if (word == 0) continue;
      if (b < first) {  // the block of its first key: no bit below it is set
        words[o][0] |= word >> (first - b);
        continue;
      }
      const size_t r = b - first;
      words[o][r / 64] |= word << (r % 64);
      if (r % 64) words[o][r / 64 + 1] |= word >> (64 - r % 64);
    }
  }
  for (size_t o = 0; o < owners.size(); ++o) {
    const uint16_t s = owners[o];
    const size_t span = spread.last[s] - spread.first[s] + 1;
    std::memcpy(bit_at[s], words[o].data(), (span + 7) / 8);  // little-endian hosts
  }
}

// A push of whole keys with `bytes` of values each, split by server: which server owns
// each key (SpreadOverServers), then each key and its values straight into its
// server's arrays (made by `arrays`), in one more pass. No positions are made: a
// push's answer has no values to put back. With `one_run` (the keys are one run,
// IsOneRun) and SharesFitBitmaps, each server's keys go as a bitmap key frame
// (ServerShare::key_frame). Empty when one server owns every key, whose rank goes to
// *only.
std::vector<ServerShare> SplitPushByServer(const ConsistentHashRing& ring, int num_servers,
                                           const SArray<Key>& keys, const SArray<char>& vals,
                                           size_t bytes, bool one_run, const ShareArrays& arrays,
                                           int* only) {
  const size_t n = keys.size();
  const size_t servers = static_cast<size_t>(num_servers);
  const ServerSpread spread = SpreadOverServers(ring, num_servers, keys, one_run);
  std::vector<ServerShare> shares;
  if (spread.only >= 0) {
    *only = spread.only;
    return shares;
  }
  const bool bitmaps = one_run && SharesFitBitmaps(spread, keys);
  std::vector<Key*> key_at(servers, nullptr);
  std::vector<char*> val_at(servers, nullptr);
  std::vector<unsigned char*> bit_at(servers, nullptr);
  for (size_t s = 0; s < servers; ++s) {
    if (spread.count[s] == 0) continue;
    ServerShare share;
    share.server = static_cast<int>(s);
    arrays(spread.count[s], bytes, !bitmaps, &share);
    if (bitmaps) {
      bit_at[s] = BeginShareBitmap(spread, keys, s, &share.key_frame);
    } else {
      key_at[s] = share.keys.data();
    }
    val_at[s] = share.vals.data();
    shares.push_back(std::move(share));
  }
  if (bitmaps) SetShareBits(spread, bit_at.data());
  const uint16_t* server_of = spread.server_of.data();
  const Key* key_list = bitmaps ? nullptr : keys.data();
  if (bytes == 4) {
    CopyByServer<4>(server_of, key_list, vals.data(), n, bytes, spread.count, key_at.data(),
                    val_at.data());
  } else if (bytes == 8) {
    CopyByServer<8>(server_of, key_list, vals.data(), n, bytes, spread.count, key_at.data(),
                    val_at.data());
  } else {
    CopyByServer<0>(server_of, key_list, vals.data(), n, bytes, spread.count, key_at.data(),
                    val_at.data());
  }
  return shares;
}

// The fewest keys of a one-run pull split over servers whose parts go as bitmaps.
constexpr size_t kRunPullFromKeys = 4096;

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
    if (req.lens.empty() && width <= chunk_values) return chunked;  // no key is long
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
    auto arrays = [&](size_t count, size_t bytes, bool keys, ServerShare* share) {
      std::vector<SArray<char>> lent =
          LendForPart(share->server, {keys ? count * sizeof(Key) : 0, count * bytes});
      share->keys_lent = keys && !lent[0].empty();
      if (keys) share->keys = share->keys_lent ? SArray<Key>(lent[0]) : NewLargeArray<Key>(count);
      share->vals_lent = !lent[1].empty();
      share->vals = share->vals_lent ? lent[1] : RawBuffer(count * bytes);
    };
    int only = -1;
    std::vector<ServerShare> shares =
        SplitPushByServer(ring, num_servers, req.keys, req.vals, width * elem_size_,
                          EncodesKeysAtIssue() && OneRun(p->key_shape, req.keys), arrays, &only);
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
      if (!share.key_frame.empty()) {
        Message& msg = messages->back();
        msg.data[0] = share.key_frame;
        msg.meta.data_type[0] = DataType::kChar;
        msg.meta.keys_encoded = true;
      }
    }
    return;
  }
  // A pull of keys that are one run, over several servers: each server's keys go as a
  // bitmap of the run, and its part keeps that frame in place of positions (Part::
  // run_frame): neither 4 bytes of positions nor 8 of keys per key are written. Not
  // for a few keys, whose general path below costs less than the passes here.
  SArray<uint16_t> known_server_of;  // from the try below, for the general path
  if (req.pull && !req.push && chunked.empty() && n >= kRunPullFromKeys && num_servers > 1 &&
      num_servers <= 65536 && EncodesKeysAtIssue() && OneRun(p->key_shape, req.keys)) {
    const ServerSpread spread = SpreadOverServers(ring, num_servers, req.keys, true);
    known_server_of = spread.server_of;
    if (spread.only < 0 && SharesFitBitmaps(spread, req.keys)) {
      std::vector<unsigned char*> bit_at(spread.count.size(), nullptr);
      for (size_t s = 0; s < spread.count.size(); ++s) {
        if (spread.count[s] == 0) continue;
        Part part;
        part.server = static_cast<int>(s);
        bit_at[s] = BeginShareBitmap(spread, req.keys, s, &part.run_frame);
        part.run_bits = static_cast<size_t>(reinterpret_cast<char*>(bit_at[s]) -
                                            part.run_frame.data());
        part.run_from = spread.first[s];
        part.run_keys = spread.count[s];
        const SArray<char> frame = part.run_frame;
        add_part(std::move(part), SArray<Key>(), {}, {}, 0);
        Message& msg = messages->back();
        msg.data[0] = frame;
        msg.meta.data_type[0] = DataType::kChar;
        msg.meta.keys_encoded = true;
      }
      SetShareBits(spread, bit_at.data());
      return;
    }
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
    server_of = known_server_of;
    known_server_of = SArray<uint16_t>();  // one owner, freed with server_of below
    if (server_of.empty()) {
      server_of = NewLargeArray<uint16_t>(n);
      ring.ServersOf(req.keys.data(), n, server_of.data());
    }
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
