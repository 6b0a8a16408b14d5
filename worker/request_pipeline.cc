#include "ps/internal/request_pipeline.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "ps/internal/key_partition.h"
#include "ps/internal/kv_message.h"
#include "ps/internal/membership.h"
#include "ps/internal/postoffice.h"
#include "ps/internal/clock_client.h"

namespace ps {
namespace {

// An uninitialised byte buffer: the result of a pull is written over it whole, so
// zero-filling it first would be one more pass over the data.
SArray<char> RawBuffer(size_t bytes) {
  return SArray<char>(new char[bytes ? bytes : 1], bytes, [](char* p) { delete[] p; });
}

}  // namespace

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

RequestPipeline::RequestPipeline(Customer* customer, DataType type, size_t elem_size)
    : customer_(customer), type_(type), elem_size_(elem_size) {}

RequestPipeline::~RequestPipeline() = default;

void RequestPipeline::set_compression(const CompressionPolicy& policy) {
  if (policy.compresses() && type_ != DataType::kFloat) {
    throw Error(std::string("compression needs float values; this KVWorker's are ") +
                DataTypeName(type_));
  }
  std::vector<std::unique_ptr<Compressor>> compressors;
  auto make = [&compressors](const CodecSpec& spec) {
    compressors.push_back(spec.codec == Codec::kNone ? nullptr : Compressor::Create(spec));
  };
  make(policy.push);
  for (const auto& r : policy.ranges) make(r.second);
  policy_ = policy;
  compressors_ = std::move(compressors);
  compress_pushes_ = false;
  for (const auto& c : compressors_) compress_pushes_ |= c != nullptr;
}

void RequestPipeline::ClearResiduals() {
  std::lock_guard<std::mutex> lock(residual_mu_);
  residuals_.Clear();
}

size_t RequestPipeline::residual_floats() {
  std::lock_guard<std::mutex> lock(residual_mu_);
  return residuals_.floats();
}

size_t RequestPipeline::CodecIndex(Key key) const {
  for (size_t i = 0; i < policy_.ranges.size(); ++i) {
    const Range& r = policy_.ranges[i].first;
    if (key >= r.begin() && key < r.end()) return i + 1;
  }
  return 0;
}

uint64_t RequestPipeline::ChunkValues() const {
  uint64_t bytes = Postoffice::Get()->chunk_bytes();
  if (bytes == 0) return 0;
  return std::max<uint64_t>(1, bytes / elem_size_);
}

RequestPipeline::Counters RequestPipeline::counters() const {
  std::lock_guard<std::mutex> lock(counters_mu_);
  return counters_;
}

std::vector<int> RequestPipeline::PushesInFlight() {
  std::vector<int> pushes;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& kv : pending_) {
    if (kv.second->push) pushes.push_back(kv.second->timestamp);
  }
  return pushes;
}

int RequestPipeline::Issue(PipelineRequest req, const char* what) {
  Postoffice* po = Postoffice::Get();
  if (!po->started() || po->ring().empty()) {
    throw Error(std::string(what) + " called before ps::Start finished");
  }
  if (req.vals.size() % elem_size_ != 0) {
    throw Error(std::string(what) + ": values are not a whole number of elements");
  }
  Status s = ValidateKVPairsShape(what, req.keys.data(), req.keys.size(),
                                  req.vals.size() / elem_size_, req.lens.data(), req.lens.size(),
                                  req.push);
  if (!s.ok()) throw Error(s.message());
  if (req.pull && !req.deliver) throw Error(std::string(what) + ": no output array given");

  auto p = std::make_unique<Pending>();
  p->callback = std::move(req.callback);
  p->push = req.push;
  p->pull = req.pull;
  p->keys = req.keys;
  p->sized_output = req.sized_output;
  p->deliver = std::move(req.deliver);
  std::vector<Message> messages;
  Plan(req, what, p.get(), &messages);
  std::vector<uint64_t> raw_bytes;
  for (const Message& m : messages) raw_bytes.push_back(m.data.size() > 1 ? m.data[1].size() : 0);
  if (req.push && compress_pushes_) Encode(req, *p, &messages);

  std::vector<int> server_ids;
  for (const Part& part : p->parts) {
    int id = Postoffice::ServerRankToID(part.server);
    if (std::find(server_ids.begin(), server_ids.end(), id) == server_ids.end()) {
      server_ids.push_back(id);
    }
  }
  uint64_t id = 0;
  int ts = customer_->NewRequest(server_ids, &id);
  p->timestamp = ts;
  p->remaining = static_cast<int>(p->parts.size());
  if (p->parts.empty()) {  // no keys: nothing to ask
    Finish(*p, /*on_receive_thread=*/true);
    return ts;
  }
  ClockClient* clocks = po->clocks();
  const int64_t clock = clocks ? clocks->current() : -1;
  {
    std::lock_guard<std::mutex> lock(counters_mu_);
    counters_.parts += messages.size();
    for (size_t i = 0; i < messages.size(); ++i) {
      if (p->parts[i].chunk >= 0) ++counters_.chunks;
      if (!req.push) continue;
      const Message& m = messages[i];
      counters_.push_key_bytes += m.data[0].size() + (m.data.size() > 2 ? m.data[2].size() : 0);
      counters_.push_value_bytes += m.data[1].size();
      counters_.push_raw_bytes += raw_bytes[i];
    }
  }
  for (Message& msg : messages) {
    msg.meta.timestamp = ts;
    msg.meta.request_id = id;
    msg.meta.clock = clock;
  }
  if (p->chunked_any) {
    p->head = messages[0].meta;
    p->head.data_type.clear();
    p->vals = req.vals;
  }
  {
    // Registered before the first part leaves: its answer may come back at once.
    std::lock_guard<std::mutex> lock(mu_);
    pending_.emplace(id, std::move(p));
  }
  for (Message& msg : messages) SendPart(msg);
  return ts;
}

void RequestPipeline::Plan(const PipelineRequest& req, const char* what, Pending* p,
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

  const int num_servers = po->num_servers();
  const uint64_t chunk_values = ChunkValues();
  const size_t width = req.push && req.lens.empty() ? req.vals.size() / elem_size_ / n : 0;
  // Value offsets of a push with lens (in elements), for copying parts.
  std::vector<size_t> offsets;
  if (req.push && !req.lens.empty()) offsets = ValueOffsets(req.lens.data(), n);
  auto push_len = [&](size_t i) -> uint64_t {
    return offsets.empty() ? width : offsets[i + 1] - offsets[i];
  };

  // Which keys travel in chunks: pushes by their length; pulls by the length this
  // worker knows (from its own pushes and pulls), or the one key's sized output.
  std::vector<uint64_t> chunked(0);
  if (chunk_values > 0 && chunking_.load(std::memory_order_relaxed) &&
      !chunks_refused_.load(std::memory_order_relaxed)) {
    if (req.push) {
      for (size_t i = 0; i < n; ++i) {
        if (push_len(i) > chunk_values) {
          if (chunked.empty()) chunked.assign(n, 0);
          chunked[i] = push_len(i);
        }
      }
      if (!chunked.empty()) {
        std::lock_guard<std::mutex> lock(mu_);
        for (size_t i = 0; i < n; ++i) {
          if (chunked[i]) known_lens_[req.keys[i]] = chunked[i];
        }
      }
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      if (n == 1 && !req.sized_output.empty() &&
          req.sized_output.size() / elem_size_ > chunk_values) {
        chunked.assign(1, req.sized_output.size() / elem_size_);
        known_lens_[req.keys[0]] = chunked[0];
      } else if (!known_lens_.empty()) {
        for (size_t i = 0; i < n; ++i) {
          auto it = known_lens_.find(req.keys[i]);
          if (it == known_lens_.end()) continue;
          if (chunked.empty()) chunked.assign(n, 0);
          chunked[i] = it->second;
        }
      }
    }
  }
  if (req.pull) p->chunked_len = chunked;

  // Whole keys: one part per server that owns some (and, with codecs per key range,
  // per codec, so that each part is one frame of one codec).
  const ConsistentHashRing& ring = po->ring();
  const size_t codecs = req.push && compress_pushes_ ? compressors_.size() : 1;
  std::vector<std::vector<uint32_t>> whole(static_cast<size_t>(num_servers) * codecs);
  size_t servers_used = 0;
  size_t whole_keys = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!chunked.empty() && chunked[i]) continue;
    size_t group = num_servers == 1 ? 0 : static_cast<size_t>(ring.ServerOf(req.keys[i]));
    if (codecs > 1) group = group * codecs + CodecIndex(req.keys[i]);
    auto& list = whole[group];
    servers_used += list.empty();
    list.push_back(static_cast<uint32_t>(i));
    ++whole_keys;
  }
  for (size_t g = 0; g < whole.size(); ++g) {
    if (whole[g].empty()) continue;
    const int r = static_cast<int>(g / codecs);
    Part part;
    part.server = r;
    if (servers_used == 1 && whole_keys == n) {
      // One server owns every key: send the caller's arrays as they are; empty
      // positions mean the answer is already in the caller's order.
      add_part(std::move(part), req.keys, req.vals, req.lens, 0);
      continue;
    }
    const std::vector<uint32_t>& pos = whole[g];
    SArray<Key> keys(pos.size());
    SArray<int> lens;
    SArray<char> vals;
    size_t total = 0;
    for (size_t j = 0; j < pos.size(); ++j) {
      keys[j] = req.keys[pos[j]];
      if (req.push) total += push_len(pos[j]);
    }
    if (req.push) {
      vals = RawBuffer(total * elem_size_);
      if (!req.lens.empty()) lens.resize(pos.size());
      size_t out = 0;
      for (size_t j = 0; j < pos.size(); ++j) {
        size_t i = pos[j];
        size_t begin = offsets.empty() ? i * width : offsets[i];
        size_t len = push_len(i);
        if (!req.lens.empty()) lens[j] = req.lens[i];
        std::memcpy(vals.data() + out * elem_size_, req.vals.data() + begin * elem_size_,
                    len * elem_size_);
        out += len;
      }
    }
    part.positions = pos;
    add_part(std::move(part), keys, vals, lens, 0);
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
      part.value_begin = begin;
      part.value_len_of_key = len;
      p->chunked_any = true;
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

void RequestPipeline::Encode(const PipelineRequest& req, const Pending& p,
                             std::vector<Message>* messages) {
  const size_t n = req.keys.size();
  const size_t width = req.lens.empty() && n ? req.vals.size() / elem_size_ / n : 0;
  auto len_of = [&](size_t i) -> size_t {
    return req.lens.empty() ? width : static_cast<size_t>(req.lens[i]);
  };
  std::vector<SArray<char>> frames(messages->size());
  std::vector<Codec> used(messages->size(), Codec::kNone);
  std::vector<float> gathered;
  std::lock_guard<std::mutex> lock(residual_mu_);
  // A value a codec refuses (not finite) throws: the residuals already moved are put
  // back, and nothing is sent.
  std::vector<std::pair<float*, std::vector<float>>> undo;
  try {
    for (size_t m = 0; m < messages->size(); ++m) {
      const Part& part = p.parts[m];
      const Key first = req.keys[part.positions.empty() ? 0 : part.positions[0]];
      const Compressor* codec = compressors_[CodecIndex(first)].get();
      if (!codec) continue;
      SArray<float> g((*messages)[m].data[1]);
      float* residual = nullptr;
      const bool one_slice = part.chunk >= 0 || part.positions.size() == 1 ||
                             (part.positions.empty() && n == 1);
      if (one_slice) {
        residual = residuals_.Get(first, part.chunk, g.size());
        undo.emplace_back(residual, std::vector<float>(residual, residual + g.size()));
      } else {
        // Several keys in one frame: their residuals side by side, as the values are.
        gathered.resize(g.size());
        size_t at = 0;
        const size_t keys = part.positions.empty() ? n : part.positions.size();
        for (size_t j = 0; j < keys; ++j) {
          const size_t i = part.positions.empty() ? j : part.positions[j];
          const size_t len = len_of(i);
          const float* r = residuals_.Get(req.keys[i], -1, len);
          std::copy(r, r + len, gathered.data() + at);
          at += len;
        }
        residual = gathered.data();
      }
      codec->Encode(g.data(), g.size(), residual, nonce_.fetch_add(1), &frames[m]);
      used[m] = codec->spec().codec;
      if (!one_slice) {
        size_t at = 0;
        const size_t keys = part.positions.empty() ? n : part.positions.size();
        for (size_t j = 0; j < keys; ++j) {
          const size_t i = part.positions.empty() ? j : part.positions[j];
          const size_t len = len_of(i);
          float* r = residuals_.Get(req.keys[i], -1, len);
          undo.emplace_back(r, std::vector<float>(r, r + len));
          std::copy(gathered.data() + at, gathered.data() + at + len, r);
          at += len;
        }
      }
    }
  } catch (...) {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
      std::copy(it->second.begin(), it->second.end(), it->first);
    }
    throw;
  }
  for (size_t m = 0; m < messages->size(); ++m) {
    if (frames[m].empty()) continue;
    Message& msg = (*messages)[m];
    msg.data[1] = frames[m];
    msg.meta.data_type[1] = DataType::kChar;
    msg.meta.compression = static_cast<int>(used[m]);
  }
}

void RequestPipeline::Process(Message& msg) {
  const Meta& meta = msg.meta;
  if (meta.request) {
    // A worker serves no requests; one addressed to its app id is misrouted or hostile.
    LOG_IF(WARNING, stray_log_.ShouldLog())
        << "request from node " << meta.sender << " to a worker dropped";
    return;
  }
  if (meta.incarnation != customer_->incarnation()) {
    LOG_IF(WARNING, stray_log_.ShouldLog())
        << "answer from node " << meta.sender << " for an earlier KVWorker (app "
        << meta.app_id << ", customer " << meta.customer_id << ") dropped";
    stale_answers_.fetch_add(1, std::memory_order_relaxed);
    dropped_answers_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::unique_ptr<Pending> done;
  std::vector<Message> resend;  // chunked keys going whole after a refusal
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(meta.request_id);
    if (it == pending_.end()) {
      LOG_IF(WARNING, stray_log_.ShouldLog())
          << "answer to unknown request " << meta.timestamp << " from node " << meta.sender
          << " dropped";
      dropped_answers_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    Pending& p = *it->second;
    const int rank = Postoffice::IDtoRank(meta.sender);
    if (meta.part >= p.parts.size() || p.parts[meta.part].answered ||
        p.parts[meta.part].server != rank || !IsServerId(meta.sender)) {
      LOG_IF(WARNING, stray_log_.ShouldLog())
          << "unexpected answer to request " << meta.timestamp << " (part " << meta.part
          << ") from node " << meta.sender << " dropped";
      dropped_answers_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    Part& part = p.parts[meta.part];
    part.answered = true;
    Status s = Status::FromWire(meta.status_code, meta.status_message);
    if (part.chunk >= 0 && s.code() == Status::Code::kUnimplemented &&
        s.message() == kChunksRefused) {
      // The server app takes whole values only: from now on this worker sends every
      // key whole, and this key goes whole now (once, whichever chunk came back first).
      chunks_refused_.store(true, std::memory_order_relaxed);
      part.refused = true;
      s = Status::OK();
      const uint32_t pos = part.positions[0];
      if (std::find(p.sent_whole.begin(), p.sent_whole.end(), pos) == p.sent_whole.end()) {
        p.sent_whole.push_back(pos);
        resend.push_back(WholeKeyPart(p, part));
        ++p.remaining;
      }
    } else if (s.ok() && p.pull) {
      s = TakeAnswer(part, p, msg);
    }
    if (!s.ok()) {
      s = Status(s.code(), "server " + std::to_string(rank) + ": " + s.message());
      if (p.status.ok()) p.status = s;
    }
    if (--p.remaining == 0) {
      done = std::move(it->second);
      pending_.erase(it);
    }
  }
  for (Message& whole : resend) SendPart(whole);
  if (done) Finish(*done, /*on_receive_thread=*/true);
}

Message RequestPipeline::WholeKeyPart(Pending& p, const Part& chunk) {
  const uint32_t pos = chunk.positions[0];
  const Key key = p.keys[pos];
  Part part;
  part.server = Postoffice::Get()->ring().ServerOf(key);
  part.positions.push_back(pos);
  Message msg;
  msg.meta = p.head;
  msg.meta.recipient = Postoffice::ServerRankToID(part.server);
  msg.meta.part = static_cast<uint32_t>(p.parts.size());
  msg.meta.chunk = -1;
  msg.meta.chunk_offset = 0;
  msg.meta.value_len = 0;
  msg.AddData(SArray<Key>{key});
  if (p.push) {
    msg.meta.data_type.push_back(type_);
    msg.data.push_back(p.vals.segment(chunk.value_begin * elem_size_,
                                      (chunk.value_begin + chunk.value_len_of_key) * elem_size_));
  }
  if (p.pull) p.chunked_len[pos] = 0;  // its length comes with the answer
  p.parts.push_back(std::move(part));
  return msg;
}

void RequestPipeline::SendPart(Message& msg) {
  Status sent = Postoffice::Get()->Send(msg);
  if (sent.ok()) return;
  // Account for the part that never left, as if its server had failed it.
  Message failed;
  failed.meta = msg.meta;
  failed.meta.request = false;
  failed.meta.sender = msg.meta.recipient;
  failed.meta.status_code = static_cast<int>(sent.code());
  failed.meta.status_message = "not sent: " + sent.message();
  failed.meta.data_type.clear();
  Process(failed);
}

Status RequestPipeline::TakeAnswer(Part& part, const Pending& p, Message& msg) {
  Status s;
  if (msg.meta.compression != 0) {
    s = type_ == DataType::kFloat ? DecodeCompressedValues(&msg)
                                  : Status::InvalidArgument("a compressed answer for " +
                                                            std::string(DataTypeName(type_)) +
                                                            " values");
    if (!s.ok()) return s;
  }
  s = ParseKVFrames(msg, false, type_, elem_size_, &part.answer);
  if (!s.ok()) return s;
  // The answer must be for exactly the keys this part asked for.
  const SArray<Key>& got = part.answer.keys;
  const std::vector<uint32_t>& pos = part.positions;
  const size_t expect = pos.empty() ? p.keys.size() : pos.size();
  bool same = got.size() == expect;
  for (size_t i = 0; same && i < expect; ++i) same = got[i] == p.keys[pos.empty() ? i : pos[i]];
  if (!same) return Status::Internal("the server answered with keys other than those asked");
  if (part.chunk >= 0 && part.answer.vals.size() != part.chunk_len * elem_size_) {
    return Status::Internal("the server answered chunk " + std::to_string(part.chunk) +
                            " of key " + std::to_string(got[0]) + " with " +
                            std::to_string(part.answer.vals.size() / elem_size_) +
                            " values; expected " + std::to_string(part.chunk_len));
  }
  return Status::OK();
}

void RequestPipeline::Abort(int timestamp, uint64_t request_id, const Status& status) {
  std::unique_ptr<Pending> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(request_id);
    if (it == pending_.end()) return;  // finished meanwhile
    done = std::move(it->second);
    pending_.erase(it);
  }
  (void)timestamp;
  done->status = status;
  Finish(*done, /*on_receive_thread=*/false);
}

void RequestPipeline::Finish(Pending& p, bool on_receive_thread) {
  const int timestamp = p.timestamp;
  if (p.pull && p.status.ok()) {
    SArray<char> vals;
    SArray<int> lens;
    Status s = Assemble(p, &vals, &lens);
    if (s.ok()) s = p.deliver(vals, lens);
    if (!s.ok()) p.status = s;
  }
  if (!p.status.ok() && failure_log_.ShouldLog()) {
    LOG(WARNING) << "request " << timestamp << " failed: " << p.status << " ("
                 << failure_log_.count() << " failures so far)";
  }
  if (!p.callback) {
    customer_->FinishRequest(timestamp, p.status);
    return;
  }
  if (on_receive_thread) {
    p.callback();
    customer_->FinishRequest(timestamp, p.status);
    return;
  }
  // Ended by the control loop, which never runs app code: the callback goes to the
  // worker's own thread, and Wait returns after it.
  Customer* customer = customer_;
  customer->RunOnOwnThread(
      [customer, cb = std::move(p.callback), timestamp, status = p.status] {
        try {
          cb();
        } catch (...) {
          customer->FinishRequest(timestamp, status);
          throw;
        }
        customer->FinishRequest(timestamp, status);
      });
}

Status RequestPipeline::Assemble(Pending& p, SArray<char>* vals, SArray<int>* lens) {
  const size_t n = p.keys.size();
  if (p.parts.empty()) return Status::OK();
  if (p.parts.size() == 1 && p.parts[0].positions.empty()) {
    // One server answered for every key, in order: its buffer is the result.
    const KVFrames& a = p.parts[0].answer;
    *vals = a.vals;
    *lens = a.lens;
    if (lens->empty()) lens->resize(n, n ? static_cast<int>(a.vals.size() / elem_size_ / n) : 0);
    return Status::OK();
  }
  // Several parts: place each part's values at its keys' positions.
  std::vector<uint64_t> key_lens(n, 0);
  for (const Part& part : p.parts) {
    if (part.chunk >= 0) continue;
    const KVFrames& a = part.answer;
    const size_t k = part.positions.size();
    for (size_t i = 0; i < k; ++i) {
      key_lens[part.positions[i]] =
          a.lens.empty() ? a.vals.size() / elem_size_ / k : static_cast<uint64_t>(a.lens[i]);
    }
  }
  for (size_t i = 0; i < p.chunked_len.size(); ++i) {
    if (p.chunked_len[i]) key_lens[i] = p.chunked_len[i];
  }
  std::vector<size_t> offsets(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    if (key_lens[i] > static_cast<uint64_t>(INT32_MAX)) {
      return Status::InvalidArgument("key " + std::to_string(p.keys[i]) + " holds " +
                                     std::to_string(key_lens[i]) +
                                     " values, more than one pull can return (2^31 - 1)");
    }
    offsets[i + 1] = offsets[i] + key_lens[i];
  }
  const size_t total = offsets[n] * elem_size_;
  // Write straight into the caller's array when it already has the right size.
  *vals = p.sized_output.size() == total ? p.sized_output : RawBuffer(total);
  for (const Part& part : p.parts) {
    const KVFrames& a = part.answer;
    if (part.refused) continue;
    if (part.chunk >= 0) {
      size_t at = (offsets[part.positions[0]] + part.chunk_offset) * elem_size_;
      std::memcpy(vals->data() + at, a.vals.data(), a.vals.size());
      continue;
    }
    const char* from = a.vals.data();
    for (uint32_t pos : part.positions) {
      size_t bytes = (offsets[pos + 1] - offsets[pos]) * elem_size_;
      if (bytes) std::memcpy(vals->data() + offsets[pos] * elem_size_, from, bytes);
      from += bytes;
    }
  }
  lens->resize(n);
  for (size_t i = 0; i < n; ++i) (*lens)[i] = static_cast<int>(key_lens[i]);
  return Status::OK();
}

}  // namespace ps
