// RequestPipeline's core: issuing a planned request, matching answers to parts, ending
// requests, and assembling pulled values (docs/pipeline.md). Planning is in
// request_planning.cc, encoding in request_encoding.cc.
#include "ps/internal/request_pipeline.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "ps/internal/key_partition.h"
#include "ps/internal/kv_message.h"
#include "ps/internal/job_services.h"
#include "ps/internal/membership.h"
#include "ps/internal/key_frame.h"
#include "ps/internal/postoffice.h"
#include "ps/internal/van.h"
#include "kept_round_pushes.h"
#include "request_parts.h"
#include "sent_key_lists.h"

namespace ps {

RequestPipeline::RequestPipeline(Customer* customer, DataType type, size_t elem_size)
    : customer_(customer), type_(type), elem_size_(elem_size),
      kept_rounds_(std::make_unique<KeptRoundPushes>()) {
  membership_listener_ = Postoffice::Get()->AddMembershipListener(
      [this](const MembershipView& view) { OnMembership(view); });
}

RequestPipeline::~RequestPipeline() { StopListening(); }

void RequestPipeline::StopListening() {
  std::lock_guard<std::mutex> lock(listener_mu_);
  if (membership_listener_ < 0) return;
  Postoffice::Get()->RemoveMembershipListener(membership_listener_);
  membership_listener_ = -1;
}

bool RequestPipeline::KeepRoundPush(const Message& msg, const Part& part) {
  // The process by the table's name for it, as PartServerGone reads it.
  const Node* server = Postoffice::Get()->membership()->Find(msg.meta.sender);
  const std::string process =
      !part.process.empty() ? part.process : (server ? server->identity : msg.peer_identity);
  const int rank = Postoffice::IDtoRank(msg.meta.sender);
  kept_rounds_->Copied(rank, process, msg.meta.rounds_copied_below);
  // Before the request ends: the caller may change its arrays once it has.
  if (part.sent->meta.keys_encoded ||
      !kept_rounds_->Keep(rank, process, part.sent->meta.clock, *part.sent)) {
    return false;
  }
  return !server || !server->alive() || server->identity != process;
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
  // One pass that stops early on keys that are not one run; on keys that are, it
  // stands for the check that they ascend, and the planning and the encoders reuse it.
  const bool one_run = IsOneRun(req.keys.data(), req.keys.size());
  Status s = ValidateKVPairsShape(what, req.keys.data(), req.keys.size(),
                                  req.vals.size() / elem_size_, req.lens.data(), req.lens.size(),
                                  req.push, one_run);
  if (!s.ok()) throw Error(s.message());
  if (req.pull && !req.deliver) throw Error(std::string(what) + ": no output array given");

  auto p = std::make_unique<Pending>();
  p->key_shape = one_run ? KeyShape::kOneRun : KeyShape::kNotOneRun;
  p->callback = std::move(req.callback);
  p->push = req.push;
  p->pull = req.pull;
  p->issued_at = std::chrono::steady_clock::now();
  NodeActivity::Get()->CountIssued(req.push, req.pull);
  p->sized_output = req.sized_output;
  p->output_of_size = std::move(req.output_of_size);
  p->deliver = std::move(req.deliver);
  p->wants_lens = req.wants_lens;
  // Chunks by the server app's one answer (chunk_agreement.cc): a request that would
  // chunk before it is known, and every request while it is asked for, is held.
  const ChunkSupport support = chunk_support_.load(std::memory_order_acquire);
  std::vector<uint64_t> chunked;
  if (support != ChunkSupport::kWholeOnly) chunked = ChunkedLengths(req);
  const bool hold =
      support == ChunkSupport::kAsking || (support == ChunkSupport::kUnknown && !chunked.empty());
  if (hold) OwnRequestArrays(&req);  // planned later: the caller's arrays may have changed
  // Borrowed keys are kept only to name a chunk's key: a pull's parts keep theirs.
  p->num_keys = req.keys.size();
  if (!req.borrowed) {
    p->keys = req.keys;
  } else if (!chunked.empty()) {
    p->keys = OwnedCopy(req.keys);
  }
  if (hold) return Hold(std::move(req), what, std::move(p), !chunked.empty());
  RememberChunkedLengths(req, chunked);
  std::vector<Message> messages;
  Plan(req, what, chunked, p.get(), &messages);
  if (req.push && compress_pushes_) Encode(req, *p, &messages);
  if (req.borrowed) {
    EncodeBorrowedRuns(req, p.get(), &messages);
    LendBorrowedFrames(req, p.get(), &messages);
  }
  OwnBorrowedData(req, &messages);
  if (req.pull) RememberAsked(p.get(), messages);

  std::vector<int> server_ids;
  for (const Part& part : p->parts) {
    int id = Postoffice::ServerRankToID(part.server);
    if (std::find(server_ids.begin(), server_ids.end(), id) == server_ids.end()) {
      server_ids.push_back(id);
    }
  }
  uint64_t id = 0;
  int ts = customer_->NewDataRequest(server_ids, &id);
  p->timestamp = ts;
  p->remaining = static_cast<int>(p->parts.size());
  if (p->parts.empty()) {  // no keys: nothing to ask
    Finish(*p, /*run_callback_here=*/true);
    return ts;
  }
  ClockClient* clocks = JobServices::Get()->clocks();
  Stamp(req, *p, ts, id, clocks ? clocks->current() : -1, &messages);
  KeepSentParts(p.get(), messages);
  const std::vector<KeyForm> forms = KeyFormsOf(p->parts);  // before p moves
  const bool has_callback = static_cast<bool>(p->callback);
  bool others_in_flight = false;
  bool lead_waits = false;
  {
    // Registered before the first part leaves: its answer may come back at once.
    std::lock_guard<std::mutex> lock(mu_);
    others_in_flight = !pending_.empty();
    if (others_in_flight) {
      lead_followed_ = true;
    } else {
      // The first request of what is likely a window (the last first request was
      // followed by others while requests were in flight), from an app that waits for
      // its requests (it did since then): it waits in the batch for the others, so a
      // window costs one send per server, not one more for its first request; the
      // app's next wait sends them. One with a callback, or from an app that did not
      // wait (callbacks, or pushes it never waits for), goes at once: nothing may
      // flush it but the van's deadline.
      const bool waited = waited_.exchange(false, std::memory_order_relaxed);
      lead_waits = lead_followed_ && waited && !has_callback;
      lead_followed_ = false;
    }
    pending_.emplace(id, std::move(p));
  }
  // With other requests in flight the app is issuing a window: its small parts may go
  // together with the next ones, when it waits or when the receive thread has handled
  // an answer to the others and runs out of input (Van::FlushCoalesced). A first
  // request that waits for the others goes by then too, or at the van's deadline.
  {
    CoalesceHint coalesce(others_in_flight || lead_waits, /*deadline=*/lead_waits);
    for (size_t i = 0; i < messages.size(); ++i) SendPart(messages[i], forms[i]);
  }
  if (others_in_flight) {
    // The others may have been answered meanwhile, and the receive thread gone idle
    // before these parts were in a batch: then nothing else would send them. Looked at
    // after they are (under mu_, which that thread takes to finish a request).
    bool answers_coming = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      answers_coming = pending_.size() > pending_.count(id);
    }
    if (!answers_coming) {
      if (Van* van = Postoffice::Get()->running_van()) van->FlushCoalesced();
    }
  }
  return ts;
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
  std::unique_ptr<Message> again;  // a part whose key list the server did not keep
  bool late_keep = false;     // kept for a server this worker already holds dead
  bool copied_noted = false;  // KeepRoundPush noted the answer's copied clock
  const int answer_rank = Postoffice::IDtoRank(meta.sender);
  if (kept_resends_size_.load(std::memory_order_acquire) > 0) {
    // A kept push sent again (its request may have ended, or go on with other parts).
    std::unique_ptr<KeptResend> resend;
    {
      std::lock_guard<std::mutex> lock(mu_);
      resend = TakeKeptAnswer(msg);
    }
    if (resend) return EndKeptResend(msg, *resend);
  }
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
    // Evicted, or a new server process: the part goes again with its keys, below. A
    // server answers so only to a list id, so a part sent with its keys never needs
    // it twice; the bound keeps a faulty server from making it loop.
    if (meta.key_list_unknown && part.sent && meta.key_list_ref != 0 && part.key_resends < 2) {
      ++part.key_resends;
      again = std::make_unique<Message>(*part.sent);
    }
    part.answered = again == nullptr;
    Status s = Status::FromWire(meta.status_code, meta.status_message);
    if (again) {
      s = Status::OK();
    } else if (meta.key_list_unknown) {
      s = Status::Internal("the server did not keep this part's key list, and the part "
                           "was not kept to send again");
    }
    if (again) {
      // Not an answer: the part waits for the one to its keys sent again.
    } else if (p.question) {
      if (s.ok() && !meta.takes_chunks && p.whole_only_server < 0) p.whole_only_server = rank;
    } else if (s.ok() && p.pull) {
      s = TakeAnswer(part, p, msg);
    } else if (part.chunk >= 0 && s.code() == Status::Code::kUnimplemented &&
               s.message() == kChunksRefused) {
      // Every server of the app took chunks when this worker asked; this one no longer
      // does (its KVServer was replaced). Nothing is resent whole: the request fails.
      s = Status(s.code(), "chunk " + std::to_string(part.chunk) + " of key " +
                               std::to_string(p.keys[part.positions[0]]) + " refused: " +
                               s.message() + "; the app took chunks when this KVWorker " +
                               "asked, before its first chunk (a new KVWorker asks again; " +
                               "KVWorker::set_chunking(false) sends values whole)");
    }
    if (!s.ok()) {
      s = Status(s.code(), "server " + std::to_string(rank) + ": " + s.message());
      if (p.status.ok()) p.status = s;
    } else if (p.push && !p.question && !again) {
      CountAck(rank, msg.peer_identity);
      // Under mu_: a death's hand-over (SendKeptAgain) sees this part either in flight
      // or kept, never between.
      if (meta.rounds_copied_below >= 0 && part.sent) late_keep = KeepRoundPush(msg, part);
      copied_noted = meta.rounds_copied_below >= 0;
    }
    if (!again && --p.remaining == 0) {
      done = std::move(it->second);
      pending_.erase(it);
    }
  }
  if (meta.rounds_copied_below >= 0 && IsServerId(meta.sender) && !copied_noted) {
    const Node* server = Postoffice::Get()->membership()->Find(meta.sender);
    kept_rounds_->Copied(answer_rank, server ? server->identity : msg.peer_identity,
                         meta.rounds_copied_below);
  }
  if (late_keep) {
    // The answer came after the table that says its server died (whose kept pushes
    // went again then, with this worker's word): this one goes too, and the word again.
    LOG(WARNING) << "server " << answer_rank << " answered a push after this worker heard "
                 << "it died: the push goes again to the keys' new servers";
    customer_->RunOnOwnThread([this, answer_rank] { SendKeptAgain({answer_rank}); });
  }
  if (again) {
    SentLists()->Forget(Postoffice::IDtoRank(meta.sender), meta.key_list_ref);
    {
      std::lock_guard<std::mutex> lock(counters_mu_);
      ++counters_.key_lists_resent;
    }
    // Sending may block (a full send queue) and encoding costs a pass over the keys: not
    // on the thread that receives. The keys go in full (no list id), so another thread
    // that kept the list under a new id meanwhile cannot make this part miss again.
    customer_->RunOnOwnThread([this, msg = std::move(*again)]() mutable {
      SendPart(msg, KeyForm::kInFull);
    });
    return;
  }
  if (!done) return;
  if (done->question) {
    EndChunkQuestion(*done);
  } else {
    Finish(*done, /*run_callback_here=*/true);
  }
}

void RequestPipeline::SendPart(Message& msg, KeyForm form) {
  Postoffice* po = Postoffice::Get();
  const bool push = msg.meta.request && msg.meta.push && msg.data.size() >= 2;
  uint64_t raw_keys = push ? msg.data[0].size() : 0;
  if (push && msg.meta.keys_encoded) {  // encoded at Issue (EncodeBorrowedRuns)
    raw_keys = KeyFrameCount(msg.data[0].data(), msg.data[0].size()) * sizeof(Key);
  }
  PrepareKeys(&msg, form);
  if (push) {
    const uint64_t lens = msg.data.size() > 2 ? msg.data[2].size() : 0;
    std::lock_guard<std::mutex> lock(counters_mu_);
    counters_.push_key_bytes += msg.data[0].size() + lens;
    counters_.push_raw_key_bytes += raw_keys + lens;
    counters_.push_value_bytes += msg.data[1].size();
  }
  Status sent = po->Send(msg);
  if (sent.ok()) return;
  // Its server died between the plan and the send (the table changed meanwhile, and its
  // connection went): with replicas the part goes where a part in flight there goes.
  if (RerouteUnsent(msg)) return;
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
  const uint64_t limit = static_cast<uint64_t>(Postoffice::Get()->config().max_message_bytes);
  Status s = DecodeKeysFrame(&msg, limit / sizeof(Key));
  if (!s.ok()) return s;
  const std::vector<uint32_t>& pos = part.positions;
  const size_t expect = part.is_run() ? part.run_keys : pos.empty() ? p.num_keys : pos.size();
  if (msg.meta.compression != 0) {
    s = type_ == DataType::kFloat
            ? DecodeCompressedValues(&msg, limit,
                                     msg.meta.keys_as_asked ? expect : kKeysFromFrame)
            : Status::InvalidArgument("a compressed answer for " +
                                      std::string(DataTypeName(type_)) + " values");
    if (!s.ok()) return s;
  }
  if (msg.meta.keys_as_asked) {
    // The server answered with the request's own keys, and sent none.
    s = ParseKVFrames(msg, false, type_, elem_size_, &part.answer, expect);
    if (!s.ok()) return s;
  } else {
    s = ParseKVFrames(msg, false, type_, elem_size_, &part.answer);
    if (!s.ok()) return s;
    // The answer must be for exactly the keys this part asked for.
    const SArray<Key>& got = part.answer.keys;
    bool same = got.size() == expect;
    if (same && part.is_run()) {
      // Rare (a handle that answers with keys of its own): the bitmap decoded again.
      SArray<Key> asked;
      same = DecodeKeyFrame(part.run_frame.data(), part.run_frame.size(), expect, &asked).ok() &&
             std::equal(got.begin(), got.end(), asked.begin());
    } else if (same && part.asked.size() == expect) {
      same = std::equal(got.begin(), got.end(), part.asked.begin());
    } else if (same && part.asked_by_hash) {
      same = HashKeys(got.data(), got.size()) == part.asked_hash;
    } else if (same && !p.keys.empty()) {
      for (size_t i = 0; same && i < expect; ++i) same = got[i] == p.keys[pos.empty() ? i : pos[i]];
    } else {
      same = false;  // nothing to check against: never expected
    }
    if (!same) return Status::Internal("the server answered with keys other than those asked");
  }
  if (part.chunk >= 0 && part.answer.vals.size() != part.chunk_len * elem_size_) {
    return Status::Internal("the server answered chunk " + std::to_string(part.chunk) +
                            " of key " + std::to_string(p.keys[pos[0]]) + " with " +
                            std::to_string(part.answer.vals.size() / elem_size_) +
                            " values; expected " + std::to_string(part.chunk_len));
  }
  return Status::OK();
}

void RequestPipeline::Abort(int timestamp, uint64_t request_id, const Status& status) {
  if (FailOverLater(request_id, status)) return;
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
  if (done->question) {
    EndChunkQuestion(*done);
  } else {
    Finish(*done, /*run_callback_here=*/false);
  }
}

bool RequestPipeline::Describe(uint64_t request_id, NodeActivity::WaitInfo* info) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(request_id);
  if (it == pending_.end()) return false;
  const Pending& p = *it->second;
  const char* kind = p.question ? "ChunkQuestion" : p.push && p.pull ? "PushPull" :
                     p.push ? "Push" : "Pull";
  info->what = std::string(kind) + "(timestamp " + std::to_string(p.timestamp) + ")";
  if (p.held) info->what += ", held until the servers say whether they take chunks";
  for (const Part& part : p.parts) {
    if (part.answered || part.replaced) continue;
    int id = Postoffice::ServerRankToID(part.server);
    if (std::find(info->waiting_for.begin(), info->waiting_for.end(), id) ==
        info->waiting_for.end()) {
      info->waiting_for.push_back(id);
    }
  }
  return true;
}

void RequestPipeline::Finish(Pending& p, bool run_callback_here) {
  const int timestamp = p.timestamp;
  if (!p.question) {
    NodeActivity::Get()->CountLatency(std::chrono::steady_clock::now() - p.issued_at);
  }
  if (p.pull && p.status.ok()) {
    // The caller's buffers are app memory (a std::vector may fail to grow): whatever the
    // delivery throws becomes the request's status, never a request left unfinished.
    Status s;
    try {
      SArray<char> vals;
      SArray<int> lens;
      s = Assemble(p, &vals, &lens);
      if (s.ok()) s = p.deliver(vals, lens);
    } catch (const std::exception& e) {
      s = Status::Internal("request " + std::to_string(timestamp) +
                           ": delivering the pulled values threw: " + e.what());
    } catch (...) {
      s = Status::Internal("request " + std::to_string(timestamp) +
                           ": delivering the pulled values threw something that is not a "
                           "std::exception");
    }
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
  if (run_callback_here) {
    customer_->FinishRequest(timestamp, RunCallback(p.callback, timestamp, p.status));
    return;
  }
  // Ended by the control loop, which never runs app code: the callback goes to the
  // worker's own thread, and Wait returns after it. The customer drains that thread
  // when it closes, before this pipeline is destroyed.
  customer_->RunOnOwnThread([this, cb = std::move(p.callback), timestamp, status = p.status] {
    customer_->FinishRequest(timestamp, RunCallback(cb, timestamp, status));
  });
}

Status RequestPipeline::RunCallback(const std::function<void()>& callback, int timestamp,
                                    const Status& status) {
  std::string what;
  try {
    callback();
    return status;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "something that is not a std::exception";
  }
  LOG_IF(WARNING, callback_log_.ShouldLog())
      << "request " << timestamp << ": its callback threw: " << what << " ("
      << callback_log_.count() << " so far); Wait returns "
      << (status.ok() ? "Internal" : "the request's own error");
  // A request that failed keeps its own error (the cause); one that succeeded must not
  // look as if all went well.
  if (!status.ok()) return status;
  return Status::Internal("request " + std::to_string(timestamp) + ": its callback threw: " +
                          what);
}

SArray<char> RequestPipeline::ResultBuffer(Pending& p, size_t bytes) {
  if (p.sized_output.size() == bytes) return p.sized_output;
  if (p.output_of_size) return p.output_of_size(bytes);
  return RawBuffer(bytes);
}

bool RequestPipeline::AssembleSameWidth(Pending& p, SArray<char>* vals, SArray<int>* lens) {
  const size_t n = p.num_keys;
  if (!p.chunked_len.empty()) return false;
  size_t width = 0, covered = 0;
  bool first = true;
  for (const Part& part : p.parts) {
    if (part.replaced) continue;
    const KVFrames& a = part.answer;
    const size_t k = part.key_count();
    if (part.chunk >= 0 || !a.lens.empty() || k == 0) return false;
    const size_t w = a.vals.size() / elem_size_ / k;
    if (!first && w != width) return false;
    width = w;
    first = false;
    covered += k;
  }
  if (first || covered != n || width > static_cast<size_t>(INT32_MAX)) return false;
  const size_t bytes = width * elem_size_;
  const size_t total = n * bytes;
  *vals = ResultBuffer(p, total);
  for (const Part& part : p.parts) {
    if (part.replaced) continue;
    if (part.is_run()) {
      part.ScatterRunValues(bytes, part.answer.vals.data(), vals->data());
    } else {
      ScatterValues(part.positions, bytes, part.answer.vals.data(), vals->data());
    }
  }
  if (p.wants_lens) lens->resize(n, static_cast<int>(width));
  return true;
}

Status RequestPipeline::Assemble(Pending& p, SArray<char>* vals, SArray<int>* lens) {
  const size_t n = p.num_keys;
  if (p.parts.empty()) return Status::OK();
  if (p.parts.size() == 1 && p.parts[0].positions.empty()) {
    // One server answered for every key, in order: its buffer is the result.
    const KVFrames& a = p.parts[0].answer;
    *vals = a.vals;
    *lens = a.lens;
    if (lens->empty() && p.wants_lens) {
      lens->resize(n, n ? static_cast<int>(a.vals.size() / elem_size_ / n) : 0);
    }
    return Status::OK();
  }
  if (AssembleSameWidth(p, vals, lens)) return Status::OK();
  // Several parts: place each part's values at its keys' positions.
  std::vector<uint64_t> key_lens(n, 0);
  // A run part's positions, made from its bitmap: this path (keys of different
  // lengths) is not the one such parts are for.
  std::vector<std::vector<uint32_t>> run_positions(p.parts.size());
  for (size_t j = 0; j < p.parts.size(); ++j) {
    if (p.parts[j].is_run() && !p.parts[j].replaced) run_positions[j] = p.parts[j].AllPositions();
  }
  auto positions_of = [&](size_t j) -> const std::vector<uint32_t>& {
    return p.parts[j].is_run() ? run_positions[j] : p.parts[j].positions;
  };
  for (size_t j = 0; j < p.parts.size(); ++j) {
    const Part& part = p.parts[j];
    if (part.chunk >= 0 || part.replaced) continue;
    const KVFrames& a = part.answer;
    const std::vector<uint32_t>& pos = positions_of(j);
    const size_t k = pos.size();
    for (size_t i = 0; i < k; ++i) {
      key_lens[pos[i]] =
          a.lens.empty() ? a.vals.size() / elem_size_ / k : static_cast<uint64_t>(a.lens[i]);
    }
  }
  for (size_t i = 0; i < p.chunked_len.size(); ++i) {
    if (p.chunked_len[i]) key_lens[i] = p.chunked_len[i];
  }
  std::vector<size_t> offsets(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    if (key_lens[i] > static_cast<uint64_t>(INT32_MAX)) {
      const std::string key =
          p.keys.empty() ? "at " + std::to_string(i) : std::to_string(p.keys[i]);
      return Status::InvalidArgument("key " + key + " holds " +
                                     std::to_string(key_lens[i]) +
                                     " values, more than one pull can return (2^31 - 1)");
    }
    offsets[i + 1] = offsets[i] + key_lens[i];
  }
  const size_t total = offsets[n] * elem_size_;
  // Write straight into the caller's array when it already has the right size.
  *vals = ResultBuffer(p, total);
  for (size_t j = 0; j < p.parts.size(); ++j) {
    const Part& part = p.parts[j];
    if (part.replaced) continue;
    const KVFrames& a = part.answer;
    if (part.chunk >= 0) {
      size_t at = (offsets[part.positions[0]] + part.chunk_offset) * elem_size_;
      std::memcpy(vals->data() + at, a.vals.data(), a.vals.size());
      continue;
    }
    const char* from = a.vals.data();
    for (uint32_t pos : positions_of(j)) {
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
