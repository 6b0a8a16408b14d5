// ZmqVan, the receiving side: one message off a channel's ROUTER (identity checks,
// the meta codec, the shared-memory frames), and the channels' receive loops.
#include <glog/logging.h>
#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "meta_codec.h"
#include "send_batch.h"
#include "zmq_van.h"

namespace ps {
namespace {

// Received frames become SArrays that own the zmq_msg_t, so the payload is handed to
// the app without a copy. ZeroMQ places large payloads 8 bytes into their allocation,
// so 8 is the alignment to ask for (enough for every element type a frame can hold);
// a frame that is not aligned so (tiny frames live inside the message struct) is
// copied so that typed views of it stay legal.
constexpr uintptr_t kFrameAlignment = 8;
SArray<char> AdoptFrame(zmq_msg_t* msg, std::atomic<uint64_t>* copied_bytes) {
  char* data = static_cast<char*>(zmq_msg_data(msg));
  size_t size = zmq_msg_size(msg);
  if (size == 0 || reinterpret_cast<uintptr_t>(data) % kFrameAlignment != 0) {
    copied_bytes->fetch_add(size, std::memory_order_relaxed);
    // The frame is ours from here on: it goes whether or not the copy can be made.
    std::unique_ptr<zmq_msg_t, void (*)(zmq_msg_t*)> owned(msg, [](zmq_msg_t* m) {
      zmq_msg_close(m);
      delete m;
    });
    SArray<char> copy;
    copy.CopyFrom(data, size);
    return copy;
  }
  return SArray<char>(data, size, [msg](char*) {
    zmq_msg_close(msg);
    delete msg;
  });
}

// The wake-ups handlers owe for the batch this thread is handing on (ReceiveBatch).
struct BatchWakes {
  std::vector<std::shared_ptr<std::condition_variable>> owed;
  bool more_follow = false;  // the message being handed on is not the batch's last
};
thread_local BatchWakes* t_batch_wakes = nullptr;

// For ReceiveBatch: makes this thread's handlers defer their wake-ups while it hands on
// a batch, and notifies them when it is done (also when a handler throws).
class WakesAtBatchEnd {
 public:
  WakesAtBatchEnd() : outer_(t_batch_wakes) { t_batch_wakes = &wakes_; }
  ~WakesAtBatchEnd() {
    t_batch_wakes = outer_;
    for (const auto& cv : wakes_.owed) cv->notify_all();
  }
  WakesAtBatchEnd(const WakesAtBatchEnd&) = delete;
  WakesAtBatchEnd& operator=(const WakesAtBatchEnd&) = delete;
  void set_more_follow(bool more) { wakes_.more_follow = more; }

 private:
  BatchWakes wakes_;
  BatchWakes* outer_;
};

}  // namespace

bool DeferWakeToBatchEnd(const std::shared_ptr<std::condition_variable>& cv) {
  BatchWakes* wakes = t_batch_wakes;
  if (!wakes || !wakes->more_follow) return false;
  if (std::find(wakes->owed.begin(), wakes->owed.end(), cv) == wakes->owed.end()) {
    wakes->owed.push_back(cv);
  }
  return true;
}

void NotifyDeferredWakes() {
  BatchWakes* wakes = t_batch_wakes;
  if (!wakes) return;
  for (const auto& cv : wakes->owed) cv->notify_all();
  wakes->owed.clear();
}

void ZmqVan::LogDropped(const std::string& reason) {
  dropped_messages_.fetch_add(1, std::memory_order_relaxed);
  if (drop_log_.ShouldLog()) {
    LOG(WARNING) << "dropped malformed message (" << drop_log_.count() << " so far): " << reason;
  }
}

void ZmqVan::ReceiveLoop(Channel channel) {
  while (ReceiveOneGuarded(channel, Wait::kBlock) != Received::kDone) {
  }
}

ZmqVan::Received ZmqVan::ReceiveOneGuarded(Channel channel, Wait wait) {
  try {
    return ReceiveOne(channel, wait);
  } catch (const std::exception& e) {
    // Out of memory while taking a message apart: that message is lost, the node goes
    // on (and a waiter holding the data ROUTER hands it on as usual).
    LOG(ERROR) << "receiving a message failed, the message is lost: " << e.what();
  } catch (...) {
    LOG(ERROR) << "receiving a message failed, the message is lost";
  }
  return Received::kMessage;
}

ZmqVan::Received ZmqVan::ReceiveOne(Channel channel, Wait wait) {
  void* socket = receivers_[static_cast<int>(channel)].socket;
  std::vector<zmq_msg_t*> frames;
  auto release_all = [&frames]() {
    for (auto* f : frames) zmq_msg_close(f), delete f;
    frames.clear();
  };
  // One multipart message: identity frame (added by ROUTER), meta, data frames.
  // ZeroMQ delivers multipart messages whole, so this loop never blocks mid-message.
  for (int more = 1; more;) {
    auto* part = new zmq_msg_t;
    zmq_msg_init(part);
    int flags = frames.empty() && wait == Wait::kNoWait ? ZMQ_DONTWAIT : 0;
    if (zmq_msg_recv(part, socket, flags) < 0) {
      zmq_msg_close(part);
      delete part;
      if (zmq_errno() == EINTR) continue;
      // Nothing there (kNoWait), or ZMQ_RCVTIMEO (set by a waiter) ran out, before a
      // message began.
      if (zmq_errno() == EAGAIN && frames.empty()) return Received::kTimedOut;
      LOG(ERROR) << "receive failed, van stops receiving: " << ZmqError();
      release_all();
      return Received::kDone;
    }
    frames.push_back(part);
    more = zmq_msg_more(part);
  }
  // Stop's wake-up, or anything that arrived after it: the van is done.
  if (stopped_.load(std::memory_order_acquire)) {
    release_all();
    return Received::kDone;
  }
  const bool empty_meta = frames.size() == 2 && zmq_msg_size(frames[1]) == 0;
  const bool nudge = empty_meta && IsNudge(static_cast<const char*>(zmq_msg_data(frames[0])),
                                           zmq_msg_size(frames[0]));
  // The guard learns which connection presents which identity: from every probe (a
  // connection's first message; the guard may not have seen it accepted yet), and from
  // any message while some connection has not shown a member's identity.
  if (!nudge && frames.size() >= 2 && (empty_meta || guard_.watching())) {
    int fd = zmq_msg_get(frames[1], ZMQ_SRCFD);
    if (fd >= 0) {
      guard_.Seen(fd, std::string(static_cast<const char*>(zmq_msg_data(frames[0])),
                                  zmq_msg_size(frames[0])));
    }
  }
  if (empty_meta) {
    release_all();
    if (!nudge) return Received::kMessage;  // a peer's probe (ZMQ_PROBE_ROUTER)
    RunReceiverTasks(channel);
    return Received::kNudge;
  }
  if (frames.size() == 2 && IsSendBatch(zmq_msg_data(frames[1]), zmq_msg_size(frames[1]))) {
    return ReceiveBatch(channel, &frames);
  }
  size_t total = 0;
  for (size_t i = 1; i < frames.size(); ++i) total += zmq_msg_size(frames[i]);
  if (frames.size() < 2) {
    LogDropped("no meta frame");
    release_all();
    return Received::kMessage;
  }
  if (total > static_cast<uint64_t>(options_.max_message_bytes)) {
    LogDropped("message of " + std::to_string(total) + " bytes is over PS_MAX_MESSAGE_BYTES=" +
               std::to_string(options_.max_message_bytes));
    release_all();
    return Received::kMessage;
  }
  if (frames.size() - 2 > static_cast<size_t>(options_.max_frames)) {
    LogDropped(std::to_string(frames.size() - 2) + " data frames, more than the limit of " +
               std::to_string(options_.max_frames));
    release_all();
    return Received::kMessage;
  }
  std::vector<size_t> sizes;
  for (size_t i = 2; i < frames.size(); ++i) sizes.push_back(zmq_msg_size(frames[i]));
  Message msg;
  ShmFields shm;
  Status s =
      DecodeMeta(zmq_msg_data(frames[1]), zmq_msg_size(frames[1]), sizes, &msg.meta, &shm);
  if (!s.ok()) {
    LogDropped(s.message());
    release_all();
    return Received::kMessage;
  }
  msg.peer_identity.assign(static_cast<const char*>(zmq_msg_data(frames[0])),
                           zmq_msg_size(frames[0]));
  if (!shm.empty()) {
    if (channel != Channel::kData) {
      LogDropped("shared-memory fields on the control channel");
      release_all();
      return Received::kMessage;
    }
    if (shm.has_offer) AnswerShmOffer(socket, msg.peer_identity, shm.offer);
    if (shm.has_offer && frames.size() == 2) {
      // An offer alone (ZmqVan::OfferRingAhead): the van's own business.
      release_all();
      return Received::kMessage;
    }
    // The frames' real sizes, which the check above could not see.
    for (const ShmFrameRef& f : shm.frames) {
      total = f.length > SIZE_MAX - total ? SIZE_MAX : total + f.length;  // a peer's number
    }
    const uint64_t slack = kShmOfferBytes + kShmDescriptorBytes * shm.frames.size();
    if (total > static_cast<uint64_t>(options_.max_message_bytes) + slack) {
      LogDropped("message of " + std::to_string(total) +
                 " bytes is over PS_MAX_MESSAGE_BYTES=" +
                 std::to_string(options_.max_message_bytes));
      DiscardShmFrames(msg.peer_identity, shm);
      release_all();
      return Received::kMessage;
    }
  }
  if (channel == Channel::kData) shm_receiver_.Sweep();
  zmq_msg_close(frames[0]), delete frames[0];
  zmq_msg_close(frames[1]), delete frames[1];
  for (size_t i = 2; i < frames.size(); ++i) {
    msg.data.push_back(AdoptFrame(frames[i], &received_copied_bytes_));
  }
  frames.clear();
  if (!shm.frames.empty()) {
    s = AdoptShmFrames(msg.peer_identity, shm, &msg.data, msg.meta);
    if (!s.ok()) {
      LogDropped(s.message());
      return Received::kMessage;
    }
  }
  Deliver(std::move(msg), channel, total);
  return Received::kMessage;
}

ZmqVan::Received ZmqVan::ReceiveBatch(Channel channel, std::vector<zmq_msg_t*>* frames) {
  auto release_all = [frames]() {
    for (auto* f : *frames) zmq_msg_close(f), delete f;
    frames->clear();
  };
  // Whatever throws (out of memory taking the batch apart), the frames go.
  struct ReleaseOnThrow {
    std::function<void()> release;
    ~ReleaseOnThrow() { release(); }
  } release_on_throw{release_all};
  received_batches_.fetch_add(1, std::memory_order_relaxed);
  const size_t size = zmq_msg_size((*frames)[1]);
  ParsedBatch parsed;
  Status s = channel != Channel::kData
                 ? Status::InvalidArgument("a batch of messages on the control channel")
             : size > static_cast<uint64_t>(options_.max_message_bytes)
                 ? Status::InvalidArgument("batch of " + std::to_string(size) +
                                           " bytes is over PS_MAX_MESSAGE_BYTES=" +
                                           std::to_string(options_.max_message_bytes))
                 : ParseSendBatch(static_cast<const char*>(zmq_msg_data((*frames)[1])), size,
                                  static_cast<size_t>(options_.max_frames), &parsed);
  // Every meta is checked before any message is handed on: a batch counts whole or not
  // at all.
  const std::vector<BatchedMessage>& parts = parsed.messages;
  std::vector<Message> messages(parts.size());
  const char* bytes = static_cast<const char*>(zmq_msg_data((*frames)[1]));
  std::vector<size_t> sizes;
  for (size_t m = 0; m < parts.size() && s.ok(); ++m) {
    sizes.clear();
    for (size_t f = 0; f < parts[m].frame_count; ++f) {
      sizes.push_back(parsed.frames[parts[m].first_frame + f].bytes);
    }
    s = DecodeMeta(bytes + parts[m].meta_offset, parts[m].meta_bytes, sizes, &messages[m].meta);
  }
  if (!s.ok()) {
    LogDropped(s.message());
    release_all();
    return Received::kMessage;
  }
  std::string identity(static_cast<const char*>(zmq_msg_data((*frames)[0])),
                       zmq_msg_size((*frames)[0]));
  zmq_msg_t* batch_msg = (*frames)[1];
  zmq_msg_close((*frames)[0]), delete (*frames)[0];
  frames->clear();  // batch_msg is AdoptFrame's now
  // The messages' frames are views of the batch (its frames start 8-byte aligned within
  // it; a batch ZeroMQ did not place so is copied once).
  SArray<char> batch = AdoptFrame(batch_msg, &received_copied_bytes_);
  shm_receiver_.Sweep();
  WakesAtBatchEnd wakes;
  for (size_t m = 0; m < parts.size(); ++m) {
    wakes.set_more_follow(m + 1 < parts.size());
    Message& msg = messages[m];
    msg.peer_identity = identity;
    uint64_t total = parts[m].meta_bytes;
    msg.data.reserve(parts[m].frame_count);
    for (size_t f = 0; f < parts[m].frame_count; ++f) {
      const BatchedFrame& frame = parsed.frames[parts[m].first_frame + f];
      msg.data.push_back(batch.segment(frame.offset, frame.offset + frame.bytes));
      total += frame.bytes;
    }
    Deliver(std::move(msg), channel, total);
  }
  return Received::kMessage;
}

void ZmqVan::Deliver(Message&& msg, Channel channel, uint64_t bytes) {
  received_messages_.fetch_add(1, std::memory_order_relaxed);
  received_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (channel == Channel::kData) CountDelivery();
  try {
    handler_(std::move(msg), channel);
  } catch (const std::exception& e) {
    // Whatever a handler throws, the node keeps serving (on the receive thread, or on a
    // waiter that must hand the ROUTER back).
    LOG(ERROR) << "message handler threw: " << e.what();
  } catch (...) {
    LOG(ERROR) << "message handler threw something that is not a std::exception";
  }
}

}  // namespace ps
