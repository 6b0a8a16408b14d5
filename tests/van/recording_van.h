// RecordingVan: a started van for tests that keeps every message its handler gets (and
// the thread that delivered it), so a test can send through one van and look at what
// another received.
// Thread safety: all methods may be called while the van's threads deliver messages.
#ifndef HERDPS_TESTS_VAN_RECORDING_VAN_H_
#define HERDPS_TESTS_VAN_RECORDING_VAN_H_

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ps/internal/van.h"

namespace ps {

class RecordingVan {
 public:
  // Starts a zmq van with default options changed by `tweak` (if any); status() says
  // whether it started.
  // `on_message` (if any) runs for every message before it is recorded, on the thread
  // that delivers it.
  explicit RecordingVan(std::function<void(VanOptions*)> tweak = nullptr,
                        std::function<void(const Message&)> on_message = nullptr)
      : on_message_(std::move(on_message)) {
    van_ = Van::Create("zmq");
    VanOptions options;
    options.identity = "t" + std::to_string(reinterpret_cast<uintptr_t>(this));
    if (tweak) tweak(&options);
    status_ = van_->Start(options, [this](Message&& msg, Channel channel) {
      if (on_message_) on_message_(msg);
      std::lock_guard<std::mutex> lock(mu_);
      received_.push_back({std::move(msg), channel});
      threads_.push_back(std::this_thread::get_id());
      cv_.notify_all();
    });
  }
  ~RecordingVan() { van_->Stop(); }
  RecordingVan(const RecordingVan&) = delete;
  RecordingVan& operator=(const RecordingVan&) = delete;

  Van* operator->() { return van_.get(); }
  const Status& status() const { return status_; }

  // Connects to `peer` as node `id`.
  void Reach(int id, RecordingVan& peer) {
    ASSERT_TRUE(van_->Connect(id, peer->endpoint(), peer->control_endpoint()).ok());
  }

  // Waits up to `seconds` for `count` messages in all; returns how many arrived.
  size_t WaitFor(size_t count, double seconds = 20) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::duration<double>(seconds),
                 [&] { return received_.size() >= count; });
    return received_.size();
  }
  // What arrived so far: a copy (messages share their buffers), or all of it, taken.
  std::vector<std::pair<Message, Channel>> Received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  std::vector<std::pair<Message, Channel>> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(received_);
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_.size();
  }
  // The thread that delivered each message since the van started, in order (Take does
  // not clear it).
  std::vector<std::thread::id> threads() {
    std::lock_guard<std::mutex> lock(mu_);
    return threads_;
  }

 private:
  std::function<void(const Message&)> on_message_;
  std::unique_ptr<Van> van_;
  Status status_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<Message, Channel>> received_;
  std::vector<std::thread::id> threads_;
};

// A data message from node 9 to node 1 with head `head` and one 64-byte frame: what a
// test sends to tell messages apart by their head.
inline Message Numbered(int head) {
  Message msg;
  msg.meta.sender = 9;
  msg.meta.recipient = 1;
  msg.meta.head = head;
  msg.data.push_back(SArray<char>(64, 'x'));
  msg.meta.data_type.push_back(DataType::kChar);
  return msg;
}

}  // namespace ps

#endif  // HERDPS_TESTS_VAN_RECORDING_VAN_H_
