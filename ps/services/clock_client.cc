#include "ps/internal/clock_client.h"

#include <glog/logging.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>

#include "ps/base.h"
#include "ps/internal/node_activity.h"
#include "ps/internal/postoffice.h"
#include "ps/simple_app.h"

namespace ps {
namespace {

// How often a blocked EndClock looks whether the node gave up (the scheduler lost):
// a give-up ends requests, not this wait.
constexpr std::chrono::milliseconds kGiveUpCheck(100);

}  // namespace

bool ParseClockText(const std::string& text, int64_t* out) {
  if (text.empty() || text.size() > 20 || text[0] < '0' || text[0] > '9') return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno || *end || v < 0) return false;
  *out = v;
  return true;
}

ClockClient::ClockClient(const ConsistencyModel& model, bool worker)
    : model_(model), worker_(worker) {
  if (!model_.waits()) return;
  app_ = std::make_unique<SimpleApp>(kClockAppId, kClockAppId);
  // Both the coordinator's pushes and its answers carry the minimum.
  app_->set_request_handle([this](const SimpleData& req, SimpleApp* app) {
    int64_t minimum = 0;
    if (req.sender != kScheduler || req.head != kClockMinimum ||
        !ParseClockText(req.body, &minimum)) {
      app->ResponseError(req, Status::InvalidArgument("not a clock minimum from the scheduler"));
      return;
    }
    app->Response(req);
    OnMinimum(minimum);
  });
  app_->set_response_handle([this](const SimpleData& res, SimpleApp*) {
    int64_t minimum = 0;
    if (res.status.ok() && ParseClockText(res.body, &minimum)) OnMinimum(minimum);
  });
}

ClockClient::~ClockClient() {
  Abort("the node is shutting down");
  app_.reset();
}

void ClockClient::OnMinimum(int64_t minimum) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Pushes and answers may cross: only a larger minimum is news.
    if (minimum <= minimum_.load(std::memory_order_relaxed)) return;
    minimum_.store(minimum, std::memory_order_release);
  }
  cv_.notify_all();
  std::lock_guard<std::mutex> lock(listeners_mu_);
  for (auto& kv : listeners_) kv.second(minimum);
}

Status ClockClient::EndClock() {
  if (!worker_) return Status::InvalidArgument("Clock() is for workers");
  int64_t ended = 0;
  {
    // Clocks are reported one at a time, in order; the wait below is outside the lock,
    // so that FinishClocks (and Finalize) never wait behind a blocked Clock().
    std::lock_guard<std::mutex> one_at_a_time(end_mu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_) return Status::Unavailable("Clock() after this worker finished its clocks");
    }
    ended = current_.load();
    current_.store(ended + 1, std::memory_order_release);
    NodeActivity::Get()->SetClocks(ended + 1, false);
    if (!app_) return Status::OK();  // asp: nobody waits, nobody is told
    Status s = app_->Wait(app_->Request(kClockEnded, std::to_string(ended), kScheduler));
    if (!s.ok()) {
      return Status::Unavailable("cannot end clock " + std::to_string(ended) + ": " +
                                 s.message());
    }
  }
  // Clock ended+1 may begin once every counted worker is at most `bound` behind it.
  int64_t need = ended + 1 - model_.bound();
  if (minimum_.load(std::memory_order_acquire) >= need) return Status::OK();
  // Registered outside mu_ (NodeActivity's lock is taken first when a report asks).
  ActivityWait wait([ended, need](NodeActivity::WaitInfo* info) {
    info->what = "Clock() ending clock " + std::to_string(ended);
    info->clock_minimum = need;
  });
  std::unique_lock<std::mutex> lock(mu_);
  Postoffice* po = Postoffice::Get();
  while (minimum_.load(std::memory_order_acquire) < need) {
    if (!aborted_.empty()) return Status::Unavailable(aborted_);
    if (finished_) return Status::Unavailable("this worker finished its clocks meanwhile");
    if (po->gave_up()) return Status::Unavailable("this node gave up (see the log)");
    cv_.wait_for(lock, kGiveUpCheck);
  }
  return Status::OK();
}

Status ClockClient::Finish() {
  if (!worker_) return Status::InvalidArgument("FinishClocks() is for workers");
  std::lock_guard<std::mutex> one_at_a_time(end_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return Status::OK();
    finished_ = true;
  }
  NodeActivity::Get()->SetClocks(current_.load(), true);
  cv_.notify_all();  // a Clock() waiting on another thread ends
  if (!app_) return Status::OK();
  return app_->Wait(app_->Request(kClockFinished, "", kScheduler));
}

int ClockClient::AddListener(Listener listener) {
  std::lock_guard<std::mutex> lock(listeners_mu_);
  int64_t now = minimum();
  if (now > 0) listener(now);
  // Ids are unique in the process, so a stale id never removes another's listener.
  static std::atomic<int> next_id{0};
  int id = next_id.fetch_add(1);
  listeners_[id] = std::move(listener);
  return id;
}

void ClockClient::RemoveListener(int id) {
  std::lock_guard<std::mutex> lock(listeners_mu_);
  listeners_.erase(id);
}

void ClockClient::Abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.empty()) aborted_ = why;
  }
  cv_.notify_all();
}

}  // namespace ps
