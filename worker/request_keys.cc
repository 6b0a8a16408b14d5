// RequestPipeline: keys on the wire (docs/pipeline.md, "Keys on the wire"). A part's
// key list goes as the id of a list its server kept (key caching), else as a key frame
// where that is shorter (key encoding), else raw.
#include <algorithm>

#include "ps/internal/key_frame.h"
#include "ps/internal/kv_message.h"
#include "ps/internal/postoffice.h"
#include "ps/internal/request_pipeline.h"
#include "request_parts.h"
#include "sent_key_lists.h"

namespace ps {

SentKeyLists* RequestPipeline::SentLists() {
  std::call_once(sent_lists_once_, [this] {
    Postoffice* po = Postoffice::Get();
    const uint64_t workers = static_cast<uint64_t>(std::max(1, po->num_workers()));
    sent_lists_ = std::make_unique<SentKeyLists>(po->config().key_cache_bytes / workers);
  });
  return sent_lists_.get();
}

bool RequestPipeline::EncodesKeysAtIssue() {
  const Config& config = Postoffice::Get()->config();
  // Failover splits a part by its raw keys (part_failover.cc): they stay raw there.
  return config.key_encoding && key_encoding_.load(std::memory_order_relaxed) &&
         !SendsPartsAgain();
}

void RequestPipeline::EncodeBorrowedRuns(const PipelineRequest& req, Pending* p,
                                         std::vector<Message>* messages) {
  if (!EncodesKeysAtIssue()) return;
  for (size_t i = 0; i < messages->size() && i < p->parts.size(); ++i) {
    Message& msg = (*messages)[i];
    const char* caller_keys = reinterpret_cast<const char*>(req.keys.data());
    if (msg.data.empty() || msg.data[0].data() != caller_keys || msg.meta.data_type.empty() ||
        msg.meta.data_type[0] != DataType::kUInt64) {
      continue;
    }
    const SArray<Key> keys(msg.data[0]);
    // Only one run: such a list never goes as a list id, so nothing needs it raw later.
    const bool whole = keys.size() == req.keys.size();
    if (!(whole ? OneRun(p->key_shape, keys) : IsOneRun(keys.data(), keys.size()))) continue;
    if (msg.meta.pull) {
      // Its answer is checked against these keys' hash, not a copy of them.
      Part& part = p->parts[i];
      part.asked_hash = HashKeys(keys.data(), keys.size());
      part.asked_by_hash = true;
    }
    EncodeKeysFrame(&msg, KeyShape::kOneRun);
  }
}

std::vector<RequestPipeline::KeyForm> RequestPipeline::KeyFormsOf(
    const std::vector<Part>& parts) {
  std::vector<KeyForm> forms;
  forms.reserve(parts.size());
  for (const Part& part : parts) {
    forms.push_back(part.keys_lent ? KeyForm::kAsTheyAre : KeyForm::kShortest);
  }
  return forms;
}

void RequestPipeline::RememberAsked(Pending* p, const std::vector<Message>& messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    Part& part = p->parts[i];
    // Remembered when its keys were encoded; a run part checks against its bitmap.
    if (part.asked_by_hash || part.is_run()) continue;
    const SArray<Key> keys(messages[i].data[0]);
    if (part.keys_lent) {
      part.asked_hash = HashKeys(keys.data(), keys.size());
      part.asked_by_hash = true;
    } else {
      part.asked = keys;
    }
  }
}

bool RequestPipeline::KeepsSentPart(uint64_t key_bytes) {
  Postoffice* po = Postoffice::Get();
  if (SendsPartsAgain()) return true;  // failover sends it again
  const bool caching = po->config().key_cache_bytes > 0 && key_caching_.load();
  // A list over the cache's bound never goes as an id (SentKeyLists::Lookup).
  return caching && key_bytes >= kMinCachedListBytes && key_bytes <= SentLists()->max_bytes();
}

std::vector<SArray<char>> RequestPipeline::LendForPart(int rank,
                                                       const std::vector<uint64_t>& sizes) {
  if (KeepsSentPart(sizes[0])) return std::vector<SArray<char>>(sizes.size());
  return Postoffice::Get()->LendSendBuffers(Postoffice::ServerRankToID(rank), sizes);
}

void RequestPipeline::PrepareKeys(Message* msg, KeyForm form) {
  if (!msg->meta.request || msg->data.empty() || msg->meta.data_type.empty() ||
      msg->meta.data_type[0] != DataType::kUInt64 || msg->meta.key_list_ref ||
      form == KeyForm::kAsTheyAre) {
    return;
  }
  const Config& config = Postoffice::Get()->config();
  const SArray<Key> keys(msg->data[0]);
  const bool encode = config.key_encoding && key_encoding_.load(std::memory_order_relaxed);
  // A list that is one run travels in a few bytes as a key frame: an id gains nothing,
  // and ps-lite's 10-million-key benchmark would pay a hash and a comparison for it.
  // Asked once, and the answer handed to the encoder.
  KeyShape shape = KeyShape::kUnknown;
  if (encode) shape = IsOneRun(keys.data(), keys.size()) ? KeyShape::kOneRun : KeyShape::kNotOneRun;
  const bool cache = form == KeyForm::kShortest && config.key_cache_bytes != 0 &&
                     key_caching_.load(std::memory_order_relaxed) &&
                     keys.size() * sizeof(Key) >= kMinCachedListBytes &&
                     shape != KeyShape::kOneRun;
  SentKeyLists::Use use;
  if (cache) use = SentLists()->Lookup(Postoffice::IDtoRank(msg->meta.recipient), keys.data(),
                                       keys.size());
  if (!use.known) {
    // Sent in full (as a key frame where that is shorter), kept under its id if it has one.
    msg->meta.key_list = use.id;
    if (encode) EncodeKeysFrame(msg, shape);
    return;
  }
  // The server has the list: an empty keys frame and its id. A pull asks for a key frame
  // in the answer (for a handle that answers with keys of its own); a push's answer has
  // no keys.
  msg->meta.key_list_ref = use.id;
  msg->meta.keys_encoded = encode && msg->meta.pull;
  msg->data[0] = SArray<char>();
  msg->meta.data_type[0] = DataType::kUInt64;
  std::lock_guard<std::mutex> lock(counters_mu_);
  ++counters_.cached_key_lists;
}

}  // namespace ps
