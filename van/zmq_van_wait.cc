// The data ROUTER's receive role: who may call zmq_msg_recv on it.
//
// ZeroMQ sockets are not thread-safe, so one thread at a time receives on the data
// ROUTER, and the role passes between threads under role_mu_ (which also orders what
// the holders touch: the socket, the shared-memory receiver). Normally the receive
// thread holds it. A thread that waits for an answer (Customer::WaitRequest) while no
// other thread waits takes it: the answer then wakes the waiter straight from ZeroMQ's
// I/O thread instead of through the receive thread. Threads that wait while others do
// (waiting_threads_ counts them all), or did lately (kSeveralWaitersQuiet), return to
// wait in their caller and leave the receiving to whoever holds the ROUTER; a holder
// that is done meanwhile hands it to the receive thread at once.
//
// With nobody else waiting, a holder that is done leaves the ROUTER parked when nothing is
// queued (ZMQ_EVENTS; asking it also arms the socket's ZMQ_FD for the next input), else
// hands it to the receive thread. The receive thread watches a parked ROUTER's
// descriptor with a plain poll and takes it back when input comes that no waiter takes.
// A waiter parks without a word, so while one receives the receive thread looks now and
// then whether it has parked (kParkCheck, backing off to kMaxParkCheck). Other changes
// it must see write role_event_fd_, which it polls, and notify role_freed_cv_.
//
// Taking the ROUTER from the receive thread: the waiter sends a nudge, an empty message
// from this van's own inproc DEALER (nudge_identity_, random per van), which wakes the
// receive thread in zmq_msg_recv; it lets go, and a waiter takes over. Stale nudges are
// read and ignored.
#include <glog/logging.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

#include "zmq_van.h"

namespace ps {
namespace {

// How often the receive thread looks whether a receiving waiter has parked the ROUTER:
// every kParkCheck at first, twice as long after each look that finds a waiter still
// receiving, up to kMaxParkCheck (each look is a wake-up, and on a busy 2-core machine
// a thousand of them a second slow 16 MiB transfers by 15%), and every kParkCheck
// again once it finds the ROUTER parked. After kLongWait of a waiter's spell the
// waiter tells it when it parks (one wake-up is nothing next to a wait that long),
// and the receive thread sleeps until then.
constexpr std::chrono::milliseconds kParkCheck(1);
constexpr std::chrono::milliseconds kMaxParkCheck(32);
constexpr std::chrono::milliseconds kLongWait(100);
// After several threads waited at once, no thread receives in its wait until this
// long has passed without two waiting at once: threads that each wait (an engine's
// workers) keep coming back, and moving the ROUTER between them and the receive thread
// costs hand-overs that the receive thread, receiving for them all, does not need
// (with 4 threads each waiting for 4 KiB answers, p99 was 5-13% above receive-in-wait
// off while they took turns).
constexpr std::chrono::seconds kSeveralWaitersQuiet(1);

// The van whose ROUTER this thread receives on as a waiter, and the van whose data
// receive thread this is: a wait nested in a dispatch, and a wake-up from the waiter's
// own dispatch, need to know.
thread_local const ZmqVan* t_waiting_receiver = nullptr;
thread_local const ZmqVan* t_receive_thread_of = nullptr;
// Messages the waiting thread handed on during its current wait.
thread_local uint64_t t_delivered_in_wait = 0;

}  // namespace

bool ZmqVan::StartReceiveInWait() {
  size_t fd_size = sizeof(data_socket_fd_);
  if (zmq_getsockopt(receivers_[0].socket, ZMQ_FD, &data_socket_fd_, &fd_size) != 0) return false;
  role_event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (role_event_fd_ < 0) return false;
  std::random_device random;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%08x%08x", random(), random());
  // Unguessable, so that no peer can connect with it and pass for a nudge.
  nudge_identity_ = std::string("herdps-nudge-") + hex;
  auto make_nudger = [this](const std::string& endpoint) -> void* {
    void* socket = zmq_socket(context_, ZMQ_DEALER);
    if (!socket) return nullptr;
    int linger = 0;
    // A nudge that finds a few already queued is not needed: one wakes the holder.
    int high_water_mark = 4;
    if (zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
        zmq_setsockopt(socket, ZMQ_SNDHWM, &high_water_mark, sizeof(high_water_mark)) != 0 ||
        zmq_setsockopt(socket, ZMQ_ROUTING_ID, nudge_identity_.data(), nudge_identity_.size()) !=
            0 ||
        zmq_connect(socket, endpoint.c_str()) != 0) {
      zmq_close(socket);
      return nullptr;
    }
    return socket;
  };
  nudge_socket_ = make_nudger(receivers_[0].wake_endpoint);
  control_nudge_socket_ = make_nudger(receivers_[1].wake_endpoint);
  return nudge_socket_ && control_nudge_socket_;
}

bool ZmqVan::RunOnReceiver(Channel channel, std::function<void()> task) {
  const int c = static_cast<int>(channel);
  {
    std::lock_guard<std::mutex> lock(tasks_mu_);
    if (!started_ || stopped_ || !nudge_socket_ || !control_nudge_socket_) return false;
    receiver_tasks_[c].push_back(std::move(task));
    // Never blocks: with nudges already queued, one of them is read after this task
    // was added, and runs it.
    if (channel == Channel::kControl) zmq_send(control_nudge_socket_, "", 0, ZMQ_DONTWAIT);
  }
  if (channel == Channel::kData) {
    std::lock_guard<std::mutex> lock(role_mu_);  // guards the data nudge socket
    NudgeLocked();
  }
  return true;
}

void ZmqVan::RunReceiverTasks(Channel channel) {
  std::vector<std::function<void()>> tasks;
  {
    std::lock_guard<std::mutex> lock(tasks_mu_);
    tasks.swap(receiver_tasks_[static_cast<int>(channel)]);
  }
  for (auto& task : tasks) {
    try {
      task();
    } catch (const std::exception& e) {
      LOG(ERROR) << "a task on the receive thread threw: " << e.what();
    } catch (...) {
      LOG(ERROR) << "a task on the receive thread threw something that is not a std::exception";
    }
  }
}

bool ZmqVan::IsNudge(const char* identity, size_t size) const {
  return !nudge_identity_.empty() && size == nudge_identity_.size() &&
         std::memcmp(identity, nudge_identity_.data(), size) == 0;
}

void ZmqVan::NudgeLocked() {
  // Never blocks: a full queue means nudges are already waiting to be read.
  if (nudge_socket_) zmq_send(nudge_socket_, "", 0, ZMQ_DONTWAIT);
}

void ZmqVan::SignalReceiveThreadLocked() {
  role_freed_cv_.notify_all();
  if (role_event_fd_ >= 0) {
    uint64_t one = 1;
    // Fails only when the counter is near overflow: then it is readable anyway.
    ssize_t ignored = write(role_event_fd_, &one, sizeof(one));
    (void)ignored;
  }
}

void ZmqVan::CountDelivery() {
  if (t_waiting_receiver != this) return;
  ++t_delivered_in_wait;
  received_in_wait_.fetch_add(1, std::memory_order_relaxed);
}

bool ZmqVan::WaitForDataRole(std::unique_lock<std::mutex>& lock, bool* from_parked) {
  *from_parked = false;
  for (;;) {
    if (stopped_) return false;
    if (role_wanted_ > 0 && role_holder_ != DataReceiver::kWaiter) {
      // A waiter takes the ROUTER next (the last one to give up tells this thread);
      // then this thread looks after it as below.
      role_freed_cv_.wait_for(lock, kParkCheck);
      continue;
    }
    if (role_holder_ == DataReceiver::kNobody) return true;
    if (role_holder_ == DataReceiver::kParked) {
      // Watch the parked ROUTER for input, without touching the socket, and our own
      // event descriptor for anything else. Stop's wake-up is input too.
      park_check_ = kParkCheck;
      lock.unlock();
      pollfd watch[2] = {{data_socket_fd_, POLLIN, 0}, {role_event_fd_, POLLIN, 0}};
      int ready = poll(watch, 2, -1);
      int poll_errno = errno;
      if (ready > 0 && (watch[1].revents & POLLIN)) {
        uint64_t count;
        ssize_t ignored = read(role_event_fd_, &count, sizeof(count));  // reset it
        (void)ignored;
      }
      lock.lock();
      bool input = ready > 0 && (watch[0].revents & (POLLIN | POLLERR | POLLHUP));
      if (ready < 0 && poll_errno != EINTR) {
        // Cannot watch it: take it back rather than leave input unread.
        LOG(WARNING) << "cannot watch the data socket (" << std::strerror(poll_errno)
                     << "); the receive thread takes it back";
        input = true;
      }
      if (input && role_holder_ == DataReceiver::kParked && role_wanted_ == 0 && !stopped_) {
        *from_parked = true;
        return true;
      }
      continue;
    }
    // A waiter receives: it may park the ROUTER without a word, unless it has received
    // for kLongWait.
    if (role_holder_ == DataReceiver::kWaiter &&
        std::chrono::steady_clock::now() - receiving_since_ >= kLongWait) {
      role_freed_cv_.wait(lock);
    } else {
      role_freed_cv_.wait_for(lock, park_check_);
      if (role_holder_ == DataReceiver::kWaiter) {
        park_check_ = std::min(2 * park_check_, kMaxParkCheck);
      }
    }
  }
}

bool ZmqVan::OnReceiveThread() const { return t_receive_thread_of == this; }

bool ZmqVan::CoalescesOnThisThread() const {
  if (!coalesce_on_) return false;
  if (t_receive_thread_of == this) return true;
  return CoalesceHint::active() &&
         (!CoalesceHint::deadline() || coalesce_first_.load(std::memory_order_relaxed));
}

void ZmqVan::DataReceiveLoop() {
  t_receive_thread_of = this;
  for (;;) {
    bool from_parked = false;
    {
      std::unique_lock<std::mutex> lock(role_mu_);
      if (!WaitForDataRole(lock, &from_parked)) return;
      role_holder_ = DataReceiver::kReceiveThread;
      nudge_pending_ = false;  // a waiter that wants the ROUTER now nudges again
    }
    // Taken from a parked ROUTER, the first look does not block: the input the watch
    // saw may have gone to a waiter meanwhile, and if nothing is there the ROUTER is
    // parked again (the empty look re-arms its descriptor).
    Wait wait = from_parked ? Wait::kNoWait : Wait::kBlock;
    bool ended = false;
    bool park_again = false;
    for (bool keep_receiving = true; keep_receiving;) {
      // With batches to send, look without blocking first: they go once no more input
      // waits (the answers to a burst of requests leave together), or once the oldest
      // has waited kMaxBatchDelay while input keeps coming (a busy server's answers to
      // a worker that sends one request at a time).
      bool flush_when_idle = false;
      if (wait == Wait::kBlock && pending_any_.load(std::memory_order_acquire)) {
        const auto now = std::chrono::steady_clock::now();
        if (now < flush_retry_at_) {
          // Batches found no room lately: wait for input only until they may be tried
          // again (nothing else would try them, nor send newer ones), then try.
          zmq_pollitem_t item{receivers_[0].socket, 0, ZMQ_POLLIN, 0};
          auto left = std::chrono::duration_cast<std::chrono::milliseconds>(flush_retry_at_ - now);
          if (zmq_poll(&item, 1, static_cast<long>(left.count()) + 1) <= 0) {
            flush_retry_at_ = {};
            continue;
          }
          // Input: receive it (below) before trying again.
        } else {
          if (batches_since_ == std::chrono::steady_clock::time_point{}) batches_since_ = now;
          if (now - batches_since_ >= kMaxBatchDelay) {
            FlushFromReceiveThread();
            continue;
          }
          flush_when_idle = true;
        }
      } else {
        batches_since_ = {};  // another thread flushed them
      }
      Received r = ReceiveOneGuarded(Channel::kData, flush_when_idle ? Wait::kNoWait : wait);
      if (flush_when_idle && r == Received::kTimedOut) {
        FlushFromReceiveThread();
        continue;
      }
      wait = Wait::kBlock;
      if (r == Received::kTimedOut) {  // only the first, non-blocking look
        park_again = true;
        break;
      }
      if (r == Received::kDone) {
        ended = true;
        break;
      }
      if (r == Received::kNudge) {
        std::lock_guard<std::mutex> lock(role_mu_);
        nudge_pending_ = false;
        keep_receiving = role_wanted_ == 0;
      }
    }
    // Nothing waits in a batch while another thread holds the ROUTER; nothing holds Stop.
    if (ended) {
      FlushCoalesced(SendMode::kNonBlocking);
    } else {
      FlushFromReceiveThread();
    }
    {
      std::lock_guard<std::mutex> lock(role_mu_);
      role_holder_ = park_again && role_wanted_ == 0 ? DataReceiver::kParked
                                                     : DataReceiver::kNobody;
      waiter_cv_.notify_all();
    }
    if (ended) return;
  }
}

bool ZmqVan::TakeDataRole(std::unique_lock<std::mutex>& lock, const std::function<bool()>& done,
                          std::chrono::steady_clock::time_point deadline) {
  // Counts this thread among the waiters until it takes the ROUTER (then until
  // ReleaseDataRole) or gives up, whatever done() throws.
  struct Waiting {
    ZmqVan* van;
    bool took = false;
    bool wanted = false;  // this thread asked the receive thread for the ROUTER
    ~Waiting() {
      if (wanted) --van->role_wanted_;
      if (!took) --van->waiting_threads_;
      // A free or parked ROUTER nobody asks for any more is the receive thread's again.
      if (van->role_wanted_ == 0 && (van->role_holder_ == DataReceiver::kNobody ||
                                     van->role_holder_ == DataReceiver::kParked)) {
        van->SignalReceiveThreadLocked();
      }
    }
  } waiting{this};
  if (++waiting_threads_ > 1) several_waited_at_ = std::chrono::steady_clock::now();
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (stopped_ || done() || now >= deadline) return false;
    // Only a thread that waits alone receives: with several, the holder's hand-over
    // to the next one would put a thread wake-up in front of every answer that comes
    // meanwhile. Threads that wait at once, or did within kSeveralWaitersQuiet, wait
    // as with receive-in-wait off (in their caller: Customer::WaitRequest), and the
    // receive thread receives for them all and wakes each when its answer is in.
    if (now - several_waited_at_ < kSeveralWaitersQuiet) return false;
    const bool alone = waiting_threads_ == 1;
    if (alone && (role_holder_ == DataReceiver::kNobody ||
                  role_holder_ == DataReceiver::kParked)) {
      role_holder_ = DataReceiver::kWaiter;
      receiving_since_ = std::chrono::steady_clock::now();
      waiting.took = true;
      return true;
    }
    if (alone && role_holder_ == DataReceiver::kReceiveThread) {
      if (!waiting.wanted) ++role_wanted_;
      waiting.wanted = true;
      if (!nudge_pending_) {
        NudgeLocked();
        nudge_pending_ = true;
      }
    } else if (!alone && waiting.wanted) {
      // The receive thread keeps (or takes back) the ROUTER for everyone.
      waiting.wanted = false;
      if (--role_wanted_ == 0 && role_holder_ != DataReceiver::kWaiter &&
          role_holder_ != DataReceiver::kReceiveThread) {
        SignalReceiveThreadLocked();
      }
    }
    if (deadline == std::chrono::steady_clock::time_point::max()) {
      waiter_cv_.wait(lock);
    } else {
      waiter_cv_.wait_until(lock, deadline);
    }
  }
}

void ZmqVan::ReleaseDataRole(bool ended) {
  void* socket = receivers_[0].socket;
  // Park the ROUTER only if nothing is queued: asking ZMQ_EVENTS arms its descriptor
  // for the next input, which the receive thread watches. Queued input goes to the
  // receive thread now (the waiter's caller has its answer).
  bool park = false;
  if (!ended) {
    int events = 0;
    size_t size = sizeof(events);
    park = zmq_getsockopt(socket, ZMQ_EVENTS, &events, &size) == 0 && !(events & ZMQ_POLLIN);
  }
  std::lock_guard<std::mutex> role_lock(role_mu_);
  --waiting_threads_;
  if (std::chrono::steady_clock::now() - several_waited_at_ < kSeveralWaitersQuiet) {
    // Threads wait meanwhile (in their callers, as with receive-in-wait off): the
    // receive thread receives for them, told at once, and waiters still here let go.
    role_holder_ = DataReceiver::kNobody;
    waiter_cv_.notify_all();
    SignalReceiveThreadLocked();
    return;
  }
  if (waiting_threads_ == 1 && !ended) {
    // The one other waiter waits alone now: it receives next, queued input and all.
    role_holder_ = DataReceiver::kNobody;
    waiter_cv_.notify_all();
    return;
  }
  // Several others wait (for answers this thread may not receive any more): the
  // receive thread receives for them, told at once.
  if (waiting_threads_ > 0) park = false;
  role_holder_ = park ? DataReceiver::kParked : DataReceiver::kNobody;
  // Parking after a short spell needs no word: the receive thread looks within
  // kParkCheck. After a long one it sleeps until told; handing back always tells it.
  if (!park || std::chrono::steady_clock::now() - receiving_since_ >= kLongWait) {
    SignalReceiveThreadLocked();
  }
}

uint64_t ZmqVan::ReceiveWhileWaiting(const std::function<bool()>& done,
                                     std::chrono::steady_clock::time_point deadline) {
  using Clock = std::chrono::steady_clock;
  // A handle that waits while dispatching (on the receive thread, or on a waiter that
  // receives) cannot take the ROUTER over from itself; a wait that is already over
  // gains nothing from it.
  if (t_waiting_receiver == this || t_receive_thread_of == this) return 0;
  if (deadline <= Clock::now()) return 0;
  {
    std::unique_lock<std::mutex> lock(role_mu_);
    if (!started_ || stopped_ || !nudge_socket_ || !receive_in_wait_) return 0;
    if (!TakeDataRole(lock, done, deadline)) return 0;
  }
  t_waiting_receiver = this;
  t_delivered_in_wait = 0;
  void* socket = receivers_[0].socket;
  int timeout_set = -1;  // the socket's ZMQ_RCVTIMEO as this thread set it
  bool ended = false;    // the socket failed or the van stops
  // Whatever ends this thread's spell (done() or the deadline, the van stopping, an
  // exception), the ROUTER goes to the next waiter or back to the receive thread.
  struct Release {
    ZmqVan* van;
    void* socket;
    const int& timeout_set;
    const bool& ended;
    ~Release() {
      if (timeout_set != -1) {
        int forever = -1;
        zmq_setsockopt(socket, ZMQ_RCVTIMEO, &forever, sizeof(forever));
      }
      t_waiting_receiver = nullptr;
      van->ReleaseDataRole(ended);
    }
  } release{this, socket, timeout_set, ended};
  for (;;) {
    if (done()) break;
    if (deadline != Clock::time_point::max()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      // Ceiling in whole milliseconds, at most ZeroMQ's int.
      int timeout_ms = static_cast<int>(std::min<int64_t>(left.count() + 1, INT32_MAX));
      if (timeout_ms != timeout_set) {
        zmq_setsockopt(socket, ZMQ_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));
        timeout_set = timeout_ms;
      }
    }
    // Batches other threads coalesced while answers come here instead of to the receive
    // thread: they go before this thread blocks, without waiting for room (a waiter that
    // blocked on a full queue would stop draining the answers that free it).
    FlushCoalesced(SendMode::kNonBlocking);
    if (ReceiveOneGuarded(Channel::kData, Wait::kBlock) == Received::kDone) {
      ended = true;
      break;
    }
  }
  // And what the last messages it handled let go (it may park the socket).
  FlushCoalesced(SendMode::kNonBlocking);
  return t_delivered_in_wait;
}

void ZmqVan::WakeReceivingWaiter() {
  std::lock_guard<std::mutex> lock(role_mu_);
  // Threads waiting for the ROUTER look at done() again; a waiter that holds it looks
  // after every message it dispatches, so only another thread's call nudges it.
  waiter_cv_.notify_all();
  if (role_holder_ == DataReceiver::kWaiter && t_waiting_receiver != this) NudgeLocked();
}

void ZmqVan::WakeRoleThreadsForStop() {
  std::lock_guard<std::mutex> lock(role_mu_);  // they see stopped_ (set before) under it
  SignalReceiveThreadLocked();
  waiter_cv_.notify_all();
}

void ZmqVan::ReleaseWaiters() {
  std::unique_lock<std::mutex> lock(role_mu_);
  waiter_cv_.notify_all();
  // A receiving waiter reads Stop's wake-up, or finds its answer, and lets go; waiters
  // waiting for the ROUTER see stopped_.
  while (role_holder_ == DataReceiver::kWaiter || waiting_threads_ > 0) {
    waiter_cv_.notify_all();
    role_freed_cv_.wait_for(lock, kParkCheck);
  }
  if (nudge_socket_) zmq_close(nudge_socket_);
  nudge_socket_ = nullptr;
  std::lock_guard<std::mutex> tasks_lock(tasks_mu_);
  if (control_nudge_socket_) zmq_close(control_nudge_socket_);
  control_nudge_socket_ = nullptr;
  for (auto& tasks : receiver_tasks_) tasks.clear();  // the van is stopped: nobody receives
  if (role_event_fd_ >= 0) close(role_event_fd_);
  role_event_fd_ = -1;
}

}  // namespace ps
