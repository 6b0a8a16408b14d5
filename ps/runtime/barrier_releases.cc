#include "barrier_releases.h"

namespace ps {

void BarrierReleases::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  counts_.clear();
  failed_.clear();
  released_all_ = false;
}

uint64_t BarrierReleases::Count(const Key& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_[key];
}

void BarrierReleases::Release(const Key& key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_[key];
  }
  cv_.notify_all();
}

Status BarrierReleases::WaitBeyond(const Key& key, uint64_t seen) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return counts_[key] > seen || released_all_ || !failed_.empty(); });
  if (counts_[key] > seen || released_all_) return Status::OK();
  return Status::Unavailable(failed_);
}

void BarrierReleases::ReleaseAll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    released_all_ = true;
  }
  cv_.notify_all();
}

void BarrierReleases::Fail(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.empty()) failed_ = why;
  }
  cv_.notify_all();
}

}  // namespace ps
