#include "ps/internal/order_balancer.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>

namespace ps {
namespace {

// SplitMix64's finaliser: spreads (seed, worker, epoch) over independent generator seeds.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [0, bound), bound >= 1, by rejection: unbiased, and the same sequence of draws
// on every standard library (unlike std::uniform_int_distribution).
uint64_t Below(std::mt19937_64* gen, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  uint64_t r;
  do r = (*gen)();
  while (r < threshold);
  return r % bound;
}

std::string WorkerName(int worker) { return "worker " + std::to_string(worker); }

}  // namespace

std::vector<int> DrrOrder(int num_examples, uint64_t seed, int worker, int64_t epoch) {
  if (num_examples <= 0) return {};
  std::vector<int> order(num_examples);
  for (int i = 0; i < num_examples; ++i) order[i] = i;
  std::mt19937_64 gen(
      Mix(Mix(Mix(seed) ^ static_cast<uint64_t>(worker)) ^ static_cast<uint64_t>(epoch)));
  for (int i = num_examples - 1; i > 0; --i) {
    std::swap(order[i], order[Below(&gen, static_cast<uint64_t>(i) + 1)]);
  }
  return order;
}

PairBalancer::PairBalancer(int num_workers, int num_examples, int dim, uint64_t seed)
    : num_workers_(num_workers), num_examples_(num_examples), dim_(dim), seed_(seed) {
  if (num_workers < 1 || num_examples < 0 || dim < 1) {
    throw Error("PairBalancer needs num_workers >= 1, num_examples >= 0 and dim >= 1, got " +
                std::to_string(num_workers) + ", " + std::to_string(num_examples) + ", " +
                std::to_string(dim));
  }
  workers_.resize(num_workers);
}

Status PairBalancer::BeginEpoch(std::vector<std::vector<int>> orders) {
  if (orders.size() != static_cast<size_t>(num_workers_)) {
    return Status::InvalidArgument("BeginEpoch got " + std::to_string(orders.size()) +
                                   " orders for " + std::to_string(num_workers_) + " workers");
  }
  std::vector<char> seen(num_examples_);
  for (int i = 0; i < num_workers_; ++i) {
    const std::vector<int>& order = orders[i];
    if (order.empty()) continue;
    if (order.size() != static_cast<size_t>(num_examples_)) {
      return Status::InvalidArgument(WorkerName(i) + "'s order has " +
                                     std::to_string(order.size()) + " entries, not " +
                                     std::to_string(num_examples_));
    }
    std::fill(seen.begin(), seen.end(), 0);
    for (int e : order) {
      if (e < 0 || e >= num_examples_ || seen[e]) {
        return Status::InvalidArgument(WorkerName(i) + "'s order is not a permutation of 0.." +
                                       std::to_string(num_examples_ - 1) + ": example " +
                                       std::to_string(e) + " is out of range or repeated");
      }
      seen[e] = 1;
    }
  }

  ++epoch_;
  // h is zeroed when the epoch's first pair arrives (Process): dim comes from the
  // network, and only a pair of dim floats proves that it is real.
  h_.clear();
  cursor_pair_ = 0;
  cursor_worker_ = 0;
  pending_ = 0;
  peak_pending_ = 0;
  for (int i = 0; i < num_workers_; ++i) {
    WorkerState& w = workers_[i];
    w.active = !orders[i].empty();
    w.received = 0;
    w.order = std::move(orders[i]);
    w.signs.assign(num_pairs(), 0);
    w.waiting.clear();
    if (!w.active) {
      w.next = DrrOrder(num_examples_, seed_, i, epoch_ + 1);
    } else {
      w.next.assign(num_examples_, -1);
      if (num_examples_ % 2) w.next.back() = w.order.back();  // odd n: the last stays last
    }
  }
  Advance();  // past workers that are absent from the start, or an epoch with no pairs
  return Status::OK();
}

Status PairBalancer::AddPair(int worker, int pair, const float* diff, size_t len) {
  if (epoch_ < 0) return Status::InvalidArgument("AddPair before BeginEpoch");
  if (worker < 0 || worker >= num_workers_) {
    return Status::InvalidArgument("AddPair for " + WorkerName(worker) + " of " +
                                   std::to_string(num_workers_));
  }
  WorkerState& w = workers_[worker];
  if (!w.active) {
    return Status::InvalidArgument(WorkerName(worker) +
                                   " was removed from this epoch; its pair is ignored");
  }
  if (pair != w.received || pair >= num_pairs()) {
    return Status::InvalidArgument(
        WorkerName(worker) + " sent pair " + std::to_string(pair) + " but its next pair is " +
        (w.received < num_pairs() ? std::to_string(w.received)
                                  : "none (all " + std::to_string(num_pairs()) + " received)"));
  }
  if (len != static_cast<size_t>(dim_)) {
    return Status::InvalidArgument(WorkerName(worker) + "'s pair has " + std::to_string(len) +
                                   " values, not " + std::to_string(dim_));
  }
  if (diff == nullptr) return Status::InvalidArgument("AddPair: diff is null");
  for (size_t j = 0; j < len; ++j) {
    if (!std::isfinite(diff[j])) {
      return Status::InvalidArgument(WorkerName(worker) + "'s pair " + std::to_string(pair) +
                                     " has a non-finite value at " + std::to_string(j));
    }
  }

  ++w.received;
  if (worker == cursor_worker_ && pair == cursor_pair_) {
    // The common case under lockstep: no copy.
    Process(worker, pair, diff);
    ++cursor_worker_;
    Advance();
  } else {
    w.waiting.emplace_back(diff, diff + len);
    peak_pending_ = std::max(peak_pending_, ++pending_);
  }
  return Status::OK();
}

Status PairBalancer::RemoveWorker(int worker) {
  if (worker < 0 || worker >= num_workers_) {
    return Status::InvalidArgument("RemoveWorker: no " + WorkerName(worker) + " among " +
                                   std::to_string(num_workers_));
  }
  WorkerState& w = workers_[worker];
  if (!w.active) return Status::OK();
  w.active = false;
  pending_ -= w.waiting.size();
  w.waiting.clear();
  w.next = DrrOrder(num_examples_, seed_, worker, epoch_ + 1);
  Advance();
  return Status::OK();
}

bool PairBalancer::IsActive(int worker) const {
  return worker >= 0 && worker < num_workers_ && workers_[worker].active;
}

bool PairBalancer::OrderReady(int worker) const {
  if (epoch_ < 0 || worker < 0 || worker >= num_workers_) return false;
  if (!workers_[worker].active || cursor_pair_ >= num_pairs()) return true;
  return cursor_pair_ == num_pairs() - 1 && cursor_worker_ > worker;
}

bool PairBalancer::EpochDone() const { return epoch_ >= 0 && cursor_pair_ >= num_pairs(); }

Status PairBalancer::NextOrder(int worker, std::vector<int>* order) const {
  if (epoch_ < 0) return Status::InvalidArgument("NextOrder before BeginEpoch");
  if (worker < 0 || worker >= num_workers_) {
    return Status::InvalidArgument("NextOrder for " + WorkerName(worker) + " of " +
                                   std::to_string(num_workers_));
  }
  if (!OrderReady(worker)) {
    return Status::Unavailable(WorkerName(worker) + "'s next order is not ready: waiting for " +
                               WorkerName(cursor_worker_) + "'s pair " +
                               std::to_string(cursor_pair_));
  }
  *order = workers_[worker].next;
  return Status::OK();
}

int PairBalancer::Sign(int worker, int pair) const {
  if (epoch_ < 0 || worker < 0 || worker >= num_workers_ || pair < 0 || pair >= num_pairs()) {
    return 0;
  }
  return workers_[worker].signs[pair];
}

void PairBalancer::Process(int worker, int pair, const float* diff) {
  if (h_.empty()) h_.assign(dim_, 0.0);
  double dot = 0;
  for (int j = 0; j < dim_; ++j) dot += h_[j] * static_cast<double>(diff[j]);
  const int sign = dot <= 0 ? 1 : -1;
  if (sign > 0) {
    for (int j = 0; j < dim_; ++j) h_[j] += static_cast<double>(diff[j]);
  } else {
    for (int j = 0; j < dim_; ++j) h_[j] -= static_cast<double>(diff[j]);
  }
  WorkerState& w = workers_[worker];
  w.signs[pair] = static_cast<int8_t>(sign);
  // Odd n: slots 0..n-2 take the pairs, the last example keeps slot n-1.
  const int balanced = num_examples_ - num_examples_ % 2;
  int first = w.order[2 * pair], second = w.order[2 * pair + 1];
  if (sign < 0) std::swap(first, second);
  w.next[pair] = first;
  w.next[balanced - 1 - pair] = second;
}

void PairBalancer::Advance() {
  while (cursor_pair_ < num_pairs()) {
    if (cursor_worker_ == num_workers_) {
      cursor_worker_ = 0;
      ++cursor_pair_;
      continue;
    }
    WorkerState& w = workers_[cursor_worker_];
    if (w.active) {
      if (w.received <= cursor_pair_) return;  // blocked: this pair has not arrived
      // All of this worker's earlier pairs are processed, so the oldest waiting one is it.
      Process(cursor_worker_, cursor_pair_, w.waiting.front().data());
      w.waiting.pop_front();
      --pending_;
    }
    ++cursor_worker_;
  }
}

RandomProjection::RandomProjection(int in_dim, int out_dim, uint64_t seed)
    : in_dim_(in_dim), out_dim_(out_dim), seed_(Mix(seed)) {
  if (in_dim < 1 || out_dim < 1) {
    throw Error("RandomProjection needs in_dim >= 1 and out_dim >= 1, got " +
                std::to_string(in_dim) + " and " + std::to_string(out_dim));
  }
}

Status RandomProjection::Project(const float* in, size_t in_len, float* out, size_t out_len) const {
  if (in_len != static_cast<size_t>(in_dim_) || out_len != static_cast<size_t>(out_dim_)) {
    return Status::InvalidArgument("RandomProjection from " + std::to_string(in_dim_) + " to " +
                                   std::to_string(out_dim_) + " floats got " +
                                   std::to_string(in_len) + " and " + std::to_string(out_len));
  }
  if (in == nullptr || out == nullptr) return Status::InvalidArgument("Project: null buffer");
  std::vector<double> acc(out_dim_, 0.0);
  const int words = (out_dim_ + 63) / 64;
  for (int c = 0; c < in_dim_; ++c) {
    const double x = in[c];
    if (x == 0) continue;  // sparse gradients cost only their non-zeros
    const uint64_t column = Mix(seed_ ^ static_cast<uint64_t>(c));
    for (int wd = 0; wd < words; ++wd) {
      // Bit r of word wd is the sign of entry (64 * wd + r, c).
      const uint64_t bits = Mix(column + static_cast<uint64_t>(wd));
      const int rows = std::min(64, out_dim_ - 64 * wd);
      for (int r = 0; r < rows; ++r) acc[64 * wd + r] += (bits >> r) & 1 ? x : -x;
    }
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(out_dim_));
  for (int r = 0; r < out_dim_; ++r) out[r] = static_cast<float>(acc[r] * scale);
  return Status::OK();
}

}  // namespace ps
