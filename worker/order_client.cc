#include "ps/order_client.h"

#include <glog/logging.h>

#include <chrono>
#include <cmath>
#include <utility>

#include "ps/base.h"
#include "ps/internal/order_balancer.h"
#include "ps/internal/order_protocol.h"
#include "ps/internal/postoffice.h"
#include "ps/simple_app.h"

namespace ps {
namespace {

// Messages to the plugin that may be unanswered at once: enough to hide the round trip
// behind a few batches, few enough that a slow scheduler holds back a fast worker.
constexpr size_t kMaxInFlight = 8;
// How often a NextEpoch waiting for its order looks whether the node gave up (the
// scheduler lost): a give-up ends requests, not this wait.
constexpr std::chrono::milliseconds kGiveUpCheck(100);
// A SimpleApp body is at most 64 MiB (docs/architecture.md, "Validation").
constexpr int64_t kMaxBodyBytes = int64_t{64} << 20;

}  // namespace

Status ParseOrderAlgorithm(const std::string& text, OrderAlgorithm* out) {
  for (OrderAlgorithm a : {OrderAlgorithm::kRr, OrderAlgorithm::kIdGrab, OrderAlgorithm::kCdGrab,
                           OrderAlgorithm::kFixed}) {
    if (text == OrderAlgorithmName(a)) {
      *out = a;
      return Status::OK();
    }
  }
  return Status::InvalidArgument("unknown example order '" + text +
                                 "': use rr, idgrab, cdgrab or fixed");
}

const char* OrderAlgorithmName(OrderAlgorithm algorithm) {
  switch (algorithm) {
    case OrderAlgorithm::kRr:
      return "rr";
    case OrderAlgorithm::kIdGrab:
      return "idgrab";
    case OrderAlgorithm::kCdGrab:
      return "cdgrab";
    case OrderAlgorithm::kFixed:
      return "fixed";
  }
  return "?";
}

OrderClient::OrderClient(const OrderOptions& options)
    : options_(options),
      rank_(Postoffice::Get()->my_rank()),
      dim_(options.projection_dim > 0 ? options.projection_dim : options.dim) {
  Postoffice* po = Postoffice::Get();
  if (!po->started() || !po->is_worker()) {
    throw Error("OrderClient: create it on a worker, after ps::Start");
  }
  const OrderOptions& o = options_;
  if (o.num_examples < 1 || o.dim < 1 || o.batch_pairs < 1 || o.projection_dim < 0) {
    throw Error("OrderClient: num_examples (" + std::to_string(o.num_examples) + "), dim (" +
                std::to_string(o.dim) + ") and batch_pairs (" + std::to_string(o.batch_pairs) +
                ") must be >= 1, projection_dim (" + std::to_string(o.projection_dim) + ") >= 0");
  }
  if (o.algorithm == OrderAlgorithm::kCdGrab &&
      (24 + 4 * int64_t{o.num_examples} > kMaxBodyBytes ||
       16 + 4 * int64_t{o.batch_pairs} * dim_ > kMaxBodyBytes)) {
    throw Error("OrderClient: an order of " + std::to_string(o.num_examples) +
                " examples or a batch of " + std::to_string(o.batch_pairs) + " pairs of " +
                std::to_string(dim_) +
                " floats exceeds a message's 64 MiB: lower batch_pairs or set projection_dim");
  }
  order_ = DrrOrder(o.num_examples, o.seed, rank_, 0);
  if (o.algorithm == OrderAlgorithm::kRr || o.algorithm == OrderAlgorithm::kFixed) return;
  if (o.projection_dim > 0) {
    projection_ = std::make_unique<RandomProjection>(o.dim, o.projection_dim, o.seed);
  }
  even_.resize(dim_);
  scratch_.resize(dim_);
  if (o.algorithm == OrderAlgorithm::kIdGrab) {
    local_ = std::make_unique<PairBalancer>(1, o.num_examples, dim_, o.seed);
    Status s = local_->BeginEpoch({order_});
    if (!s.ok()) throw Error("OrderClient: " + s.message());
    return;
  }
  app_ = std::make_unique<SimpleApp>(kOrderAppId, kOrderAppId);
  app_->set_request_handle([this](const SimpleData& req, SimpleApp* app) {
    Status s = req.sender == kScheduler && req.head == kOrderNext
                   ? OnNextOrder(req.body)
                   : Status::InvalidArgument("not an order from the scheduler's order plugin");
    if (s.ok()) {
      app->Response(req);
    } else {
      LOG(WARNING) << "OrderClient: refused a message from node " << req.sender << ": " << s;
      app->ResponseError(req, s);
    }
  });
  OrderBegin begin{0, o.num_examples, dim_, o.seed, order_};
  Status s = app_->Wait(app_->Request(kOrderBegin, EncodeOrderBegin(begin), kScheduler));
  if (!s.ok()) throw Error("OrderClient: the order plugin did not begin epoch 0: " + s.ToString());
}

OrderClient::~OrderClient() {
  if (Postoffice::Get()->started()) {
    Status s = Finish();
    LOG_IF(WARNING, !s.ok()) << "OrderClient: cannot tell the order plugin this worker is done: "
                             << s;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = "the OrderClient is being destroyed";
  }
  cv_.notify_all();
  app_.reset();
}

Status OrderClient::Report(int position, const float* grad, size_t len) {
  const int n = options_.num_examples;
  if (finished_) return Status::Unavailable("OrderClient::Report after Finish");
  if (!failed_.ok()) return failed_;
  if (position != reported_ || position >= n) {
    return Status::InvalidArgument("OrderClient::Report(" + std::to_string(position) +
                                   "): positions of an epoch come in " + "order, the next is " +
                                   (reported_ < n ? std::to_string(reported_) : "none") + " of " +
                                   std::to_string(n) + (reported_ < n ? "" : " (call NextEpoch)"));
  }
  if (grad == nullptr || len != static_cast<size_t>(options_.dim)) {
    return Status::InvalidArgument("OrderClient::Report: a gradient of " + std::to_string(len) +
                                   " floats, expected " + std::to_string(options_.dim));
  }
  if (options_.algorithm == OrderAlgorithm::kRr || options_.algorithm == OrderAlgorithm::kFixed) {
    ++reported_;
    return Status::OK();
  }
  for (size_t j = 0; j < len; ++j) {
    if (!std::isfinite(grad[j])) {
      return Status::InvalidArgument("OrderClient::Report: the gradient at position " +
                                     std::to_string(position) + " is not finite at " +
                                     std::to_string(j));
    }
  }
  // Odd n: the last position stays out of the balancing.
  if (position >= n - n % 2) {
    ++reported_;
    return Status::OK();
  }
  const float* g = grad;
  if (projection_) {
    Status s = projection_->Project(grad, len, scratch_.data(), scratch_.size());
    if (!s.ok()) return s;
    g = scratch_.data();
  }
  if (position % 2 == 0) {
    std::copy(g, g + dim_, even_.begin());
    ++reported_;
    return Status::OK();
  }
  Status s = ReportPair(position / 2, g);
  if (s.ok()) ++reported_;
  return s;
}

Status OrderClient::ReportSparse(int position, const uint64_t* indices, const float* values,
                                 size_t count) {
  const size_t dim = static_cast<size_t>(options_.dim);
  if (count > 0 && (indices == nullptr || values == nullptr)) {
    return Status::InvalidArgument("OrderClient::ReportSparse: null indices or values");
  }
  sparse_.resize(dim);  // zeros, kept zero between calls
  touched_.resize(dim);
  Status s;
  size_t set = 0;
  for (; set < count; ++set) {
    const uint64_t j = indices[set];
    if (j >= dim || touched_[j]) {
      s = Status::InvalidArgument(
          "OrderClient::ReportSparse: index " + std::to_string(j) +
          (j >= dim ? " is not below dim " + std::to_string(dim) : " comes twice"));
      break;
    }
    touched_[j] = true;
    sparse_[j] = values[set];
  }
  if (s.ok()) s = Report(position, sparse_.data(), dim);
  for (size_t i = 0; i < set; ++i) {
    sparse_[indices[i]] = 0;
    touched_[indices[i]] = false;
  }
  return s;
}

Status OrderClient::ReportPair(int pair, const float* odd) {
  // In float, as every worker computes it: the plugin's input is exactly this.
  for (int j = 0; j < dim_; ++j) even_[j] -= odd[j];
  if (local_) return local_->AddPair(0, pair, even_.data(), even_.size());
  if (batch_.empty()) batch_first_ = pair;
  batch_.insert(batch_.end(), even_.begin(), even_.end());
  const int queued = static_cast<int>(batch_.size() / dim_);
  if (queued == options_.batch_pairs || pair == options_.num_examples / 2 - 1) SendBatch();
  return failed_;
}

void OrderClient::SendBatch() {
  if (batch_.empty()) return;
  const int count = static_cast<int>(batch_.size() / dim_);
  std::string body = EncodeOrderPairs(epoch_, batch_first_, count, batch_.data(), batch_.size());
  batch_.clear();
  SendAsync(kOrderPairs, body);
}

void OrderClient::SendAsync(int head, const std::string& body) {
  in_flight_.push_back(app_->Request(head, body, kScheduler));
  Drain(kMaxInFlight);
}

void OrderClient::Drain(size_t max_in_flight) {
  while (in_flight_.size() > max_in_flight) {
    Status s = app_->Wait(in_flight_.front());
    in_flight_.pop_front();
    if (!s.ok()) Fail(s);
  }
}

void OrderClient::Fail(const Status& s) {
  if (failed_.ok()) failed_ = Status(s.code(), "the order plugin: " + s.message());
}

Status OrderClient::OnNextOrder(const std::string& body) {
  OrderNext next;
  Status s = DecodeOrderNext(body, &next);
  if (!s.ok()) return s;
  if (!IsPermutation(next.order, options_.num_examples)) {
    return Status::InvalidArgument("the order for epoch " + std::to_string(next.epoch) +
                                   " is not a permutation of 0.." +
                                   std::to_string(options_.num_examples - 1));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (next.epoch != next_epoch_ || !next_order_.empty()) {
      return Status::InvalidArgument("an order for epoch " + std::to_string(next.epoch) +
                                     " but this worker waits for the order of epoch " +
                                     std::to_string(next_epoch_) +
                                     (next_order_.empty() ? "" : ", which came already"));
    }
    next_order_ = std::move(next.order);
  }
  cv_.notify_all();
  return Status::OK();
}

Status OrderClient::NextEpoch() {
  const OrderOptions& o = options_;
  if (finished_) return Status::Unavailable("OrderClient::NextEpoch after Finish");
  if (!failed_.ok()) return failed_;
  if ((local_ || app_) && reported_ != o.num_examples) {
    return Status::InvalidArgument("OrderClient::NextEpoch after " + std::to_string(reported_) +
                                   " of " + std::to_string(o.num_examples) +
                                   " positions: report every position of the epoch first");
  }
  switch (o.algorithm) {
    case OrderAlgorithm::kRr:
      order_ = DrrOrder(o.num_examples, o.seed, rank_, epoch_ + 1);
      break;
    case OrderAlgorithm::kFixed:
      break;
    case OrderAlgorithm::kIdGrab: {
      Status s = local_->NextOrder(0, &order_);
      if (s.ok()) s = local_->BeginEpoch({order_});
      if (!s.ok()) return Status::Internal("OrderClient (idgrab): " + s.message());
      break;
    }
    case OrderAlgorithm::kCdGrab: {
      SendBatch();  // empty: the last pair sends its batch
      Drain(0);
      if (!failed_.ok()) return failed_;
      {
        std::unique_lock<std::mutex> lock(mu_);
        Postoffice* po = Postoffice::Get();
        while (next_order_.empty()) {
          if (!aborted_.empty()) return Status::Unavailable(aborted_);
          if (po->gave_up()) return Status::Unavailable("this node gave up (see the log)");
          cv_.wait_for(lock, kGiveUpCheck);
        }
        order_ = std::move(next_order_);
        next_order_.clear();
        ++next_epoch_;
      }
      OrderBegin begin{epoch_ + 1, o.num_examples, dim_, o.seed, order_};
      SendAsync(kOrderBegin, EncodeOrderBegin(begin));
      break;
    }
  }
  ++epoch_;
  reported_ = 0;
  return Status::OK();
}

Status OrderClient::Finish() {
  if (finished_) return Status::OK();
  finished_ = true;
  if (!app_) return Status::OK();
  // Pairs of an unfinished epoch are dropped: the plugin removes this worker from it.
  batch_.clear();
  Drain(0);
  return app_->Wait(app_->Request(kOrderFinish, "", kScheduler));
}

}  // namespace ps
