// RequestPipeline's agreement with the server app on chunks (docs/pipeline.md, "Chunks
// of large values"). Chunks and a whole value of one key never mix, so an app's values
// must be split the same way on all its servers, for good: before its first request
// that would chunk, the pipeline asks every live server once (Meta::chunk_query, which
// the KVServer answers itself) and chunks only if all take them. Meanwhile its requests
// are held in issue order, registered with the customer (Wait, deadlines and dead
// servers work as for any), then planned by the one answer and sent from the customer's
// own thread: the answer arrives on a receiving thread or the control loop, neither of
// which may block on sends. A failed question (an app that never starts, a dead server)
// fails the held requests that would chunk, sends the rest, and is asked again later.
#include <glog/logging.h>

#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ps/internal/job_services.h"
#include "ps/internal/postoffice.h"
#include "ps/internal/request_pipeline.h"
#include "request_parts.h"

namespace ps {

int RequestPipeline::Hold(PipelineRequest req, const char* what, std::unique_ptr<Pending> p,
                          bool would_chunk) {
  Postoffice* po = Postoffice::Get();
  // Its servers are not known before it is planned: it waits for them all, so a server
  // that dies meanwhile ends it with Unavailable.
  uint64_t id = 0;
  const int ts = customer_->NewDataRequest(po->GetNodeIDs(kServerGroup), &id);
  p->timestamp = ts;
  p->held = std::make_unique<Held>();
  p->held->request = std::move(req);
  p->held->what = what;
  ClockClient* clocks = JobServices::Get()->clocks();
  p->held->clock = clocks ? clocks->current() : -1;
  bool ask = false;
  ChunkSupport now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    now = chunk_support_.load(std::memory_order_relaxed);
    if (now == ChunkSupport::kUnknown && would_chunk) {
      chunk_support_.store(ChunkSupport::kAsking, std::memory_order_relaxed);
      now = ChunkSupport::kAsking;
      ask = true;
    }
    pending_.emplace(id, std::move(p));
    if (now == ChunkSupport::kAsking) held_.push_back(id);
  }
  if (ask) AskChunkSupport();
  // The answer came in meanwhile, and every request held before this one has left; or
  // a question failed meanwhile and this request needs no answer.
  if (now != ChunkSupport::kAsking) {
    LaunchHeldRequest(id, now, Status::Unavailable("the app's answer on chunks is not in"));
  }
  return ts;
}

void RequestPipeline::AskChunkSupport() {
  const std::vector<int> servers = Postoffice::Get()->GetNodeIDs(kServerGroup);
  auto question = std::make_unique<Pending>();
  question->question = true;
  uint64_t id = 0;
  question->timestamp = customer_->NewDataRequest(servers, &id);
  std::vector<Message> messages;
  for (int server : servers) {
    Message msg;
    msg.meta.app_id = customer_->app_id();
    msg.meta.customer_id = customer_->customer_id();
    msg.meta.incarnation = customer_->incarnation();
    msg.meta.request = true;
    msg.meta.chunk_query = true;
    msg.meta.recipient = server;
    msg.meta.part = static_cast<uint32_t>(question->parts.size());
    msg.meta.timestamp = question->timestamp;
    msg.meta.request_id = id;
    // No keys: a server that predates the question gives its handle an empty request.
    msg.AddData(SArray<Key>());
    messages.push_back(std::move(msg));
    Part part;
    part.server = Postoffice::IDtoRank(server);
    question->parts.push_back(std::move(part));
  }
  question->remaining = static_cast<int>(messages.size());
  if (messages.empty()) {
    question->status = Status::Unavailable("no server is live");
    EndChunkQuestion(*question);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.emplace(id, std::move(question));
  }
  for (Message& msg : messages) SendPart(msg);
}

void RequestPipeline::EndChunkQuestion(const Pending& question) {
  // Nobody waits for the question itself; its record only has to go.
  customer_->FinishRequest(question.timestamp, Status::OK());
  const std::string app = "app " + std::to_string(customer_->app_id());
  ChunkSupport answer = ChunkSupport::kTaken;
  Status failure;
  if (!question.status.ok()) {
    answer = ChunkSupport::kUnknown;
    failure = Status(question.status.code(),
                     "cannot tell whether " + app + " takes values over PS_CHUNK_BYTES in " +
                         "chunks (" + question.status.message() + "); the request was not " +
                         "sent: start the app on every server (the next request with such " +
                         "a value asks again), or call KVWorker::set_chunking(false)");
    LOG(WARNING) << failure.message();
  } else if (question.whole_only_server >= 0) {
    answer = ChunkSupport::kWholeOnly;
    LOG(INFO) << app << " on server " << question.whole_only_server
              << " takes whole values only (its KVServer does not AcceptChunks): this "
                 "KVWorker sends every value of "
              << app << " whole";
  }
  // Planning and sending may block (a full send queue): not on the receiving thread,
  // nor on the control loop.
  customer_->RunOnOwnThread([this, answer, failure] { LaunchHeld(answer, failure); });
}

void RequestPipeline::LaunchHeld(ChunkSupport answer, const Status& failure) {
  for (;;) {
    uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (held_.empty()) {
        // Requests issued from now on are planned by the answer at once; none can
        // overtake a held one, as none is left.
        chunk_support_.store(answer, std::memory_order_release);
        return;
      }
      id = held_.front();
      held_.pop_front();
    }
    LaunchHeldRequest(id, answer, failure);
  }
}

void RequestPipeline::LaunchHeldRequest(uint64_t id, ChunkSupport answer, const Status& failure) {
  std::unique_ptr<Held> held;
  int timestamp = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;  // ended early: its deadline, a dead server
    held = std::move(it->second->held);
    timestamp = it->second->timestamp;
  }
  const PipelineRequest& req = held->request;
  std::vector<uint64_t> chunked;
  if (answer != ChunkSupport::kWholeOnly) chunked = ChunkedLengths(req);
  Status refused;
  if (!chunked.empty() && answer == ChunkSupport::kUnknown) {
    refused = Status(failure.code(), std::string(held->what) + ": " + failure.message());
  }
  // Planned apart from the pending entry, which an early end may take meanwhile.
  Pending planned;
  std::vector<Message> messages;
  if (refused.ok()) {
    try {
      RememberChunkedLengths(req, chunked);
      Plan(req, held->what, chunked, &planned, &messages);
      if (req.push && compress_pushes_) Encode(req, planned, &messages);
    } catch (const Error& e) {
      // What Issue would have thrown: it returned long ago, so Wait reports it.
      refused = Status::InvalidArgument(e.what());
    } catch (const std::exception& e) {
      refused = Status::Internal(std::string(held->what) + ": planning failed: " + e.what());
    }
  }
  if (refused.ok()) {
    Stamp(req, planned, timestamp, id, held->clock, &messages);
    KeepSentParts(&planned, messages);
  }
  const std::vector<KeyForm> forms = KeyFormsOf(planned.parts);  // before they move
  std::unique_ptr<Pending> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    Pending& p = *it->second;
    if (!refused.ok() || planned.parts.empty()) {
      p.status = refused;
      done = std::move(it->second);
      pending_.erase(it);
    } else {
      p.parts = std::move(planned.parts);
      p.chunked_len = std::move(planned.chunked_len);
      p.remaining = static_cast<int>(p.parts.size());
    }
  }
  if (done) {
    // Here, on the issuing thread or the customer's own thread: either may run app code.
    Finish(*done, /*run_callback_here=*/true);
    return;
  }
  for (size_t i = 0; i < messages.size(); ++i) SendPart(messages[i], forms[i]);
}

}  // namespace ps
