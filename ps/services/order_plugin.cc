#include "order_plugin.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "ps/internal/order_protocol.h"

namespace ps {
namespace {

std::string WorkerName(int rank) { return "worker " + std::to_string(rank); }

}  // namespace

void OrderPlugin::OnStart(PluginContext* ctx) {
  std::vector<const Node*> nodes;
  for (const Node& n : ctx->membership().nodes) {
    if (n.role == Node::kWorkerRole) nodes.push_back(&n);
  }
  // The balancer processes the workers of one pair index in rank order.
  std::sort(nodes.begin(), nodes.end(), [](const Node* a, const Node* b) {
    return a->rank != b->rank ? a->rank < b->rank : a->id < b->id;
  });
  for (const Node* n : nodes) {
    Worker w;
    w.id = n->id;
    w.stopped = !n->alive();
    workers_.push_back(std::move(w));
  }
}

void OrderPlugin::OnRequest(const SimpleData& request, PluginContext* ctx) {
  int rank = -1;
  for (size_t r = 0; r < workers_.size(); ++r) {
    if (workers_[r].id == request.sender) rank = static_cast<int>(r);
  }
  if (rank < 0 || !ctx->membership().IsAlive(request.sender)) {
    ctx->RespondError(request, Status::InvalidArgument("node " + std::to_string(request.sender) +
                                                       " is not a live worker of this job"));
    return;
  }
  Worker* w = &workers_[rank];
  switch (request.head) {
    case kOrderBegin:
      Begin(w, rank, request, ctx);
      return;
    case kOrderPairs:
      Pairs(w, rank, request, ctx);
      return;
    case kOrderFinish:
      if (!w->stopped) Stop(w, rank);
      ctx->Respond(request, "");
      Update(ctx);
      return;
    default:
      ctx->RespondError(request, Status::InvalidArgument("unknown order command " +
                                                         std::to_string(request.head)));
  }
}

void OrderPlugin::Begin(Worker* w, int rank, const SimpleData& request, PluginContext* ctx) {
  auto refuse = [&](const std::string& why) {
    ctx->RespondError(request, Status::InvalidArgument(WorkerName(rank) + ": " + why));
  };
  if (w->stopped) return refuse("it has finished its epochs");
  OrderBegin b;
  Status s = DecodeOrderBegin(request.body, &b);
  if (!s.ok()) return refuse(s.message());
  if (b.num_examples < 1 || b.dim < 1) {
    return refuse("num_examples " + std::to_string(b.num_examples) + " and dim " +
                  std::to_string(b.dim) + " must be >= 1");
  }
  if (configured_ && (b.num_examples != num_examples_ || b.dim != dim_ || b.seed != seed_)) {
    return refuse("began with num_examples " + std::to_string(b.num_examples) + ", dim " +
                  std::to_string(b.dim) + ", seed " + std::to_string(b.seed) +
                  ", but this job's orders have " + std::to_string(num_examples_) + ", " +
                  std::to_string(dim_) + ", " + std::to_string(seed_) +
                  ": every worker needs the same options");
  }
  if (b.epoch != w->begun + 1) {
    return refuse("began epoch " + std::to_string(b.epoch) + " but its next epoch is " +
                  std::to_string(w->begun + 1));
  }
  // Epoch t+1 begins with the order the plugin sent for it, so only after that.
  if (b.epoch > 0 && (!w->next_sent || balancer_->epoch() != b.epoch - 1)) {
    return refuse("began epoch " + std::to_string(b.epoch) + " before its order for it was sent");
  }
  if (!IsPermutation(b.order, b.num_examples)) {
    return refuse("its order for epoch " + std::to_string(b.epoch) +
                  " is not a permutation of 0.." + std::to_string(b.num_examples - 1));
  }
  configured_ = true;
  num_examples_ = b.num_examples;
  dim_ = b.dim;
  seed_ = b.seed;
  w->begun = b.epoch;
  w->order = std::move(b.order);
  w->received = 0;
  std::vector<float>().swap(w->early);
  ctx->Respond(request, "");
  Update(ctx);
}

void OrderPlugin::Pairs(Worker* w, int rank, const SimpleData& request, PluginContext* ctx) {
  auto refuse = [&](const std::string& why) {
    ctx->RespondError(request, Status::InvalidArgument(WorkerName(rank) + ": " + why));
  };
  if (w->stopped) return refuse("it has finished its epochs");
  if (w->begun < 0) return refuse("pairs before its first kOrderBegin");
  OrderPairs p;
  Status s = DecodeOrderPairs(request.body, dim_, &p);
  if (!s.ok()) return refuse(s.message());
  if (p.epoch != w->begun) {
    return refuse("pairs of epoch " + std::to_string(p.epoch) + " but it is in epoch " +
                  std::to_string(w->begun));
  }
  const int num_pairs = num_examples_ / 2;
  if (p.first_pair != w->received || p.count > num_pairs - w->received) {
    return refuse("sent pairs " + std::to_string(p.first_pair) + ".." +
                  std::to_string(static_cast<int64_t>(p.first_pair) + p.count - 1) +
                  " but its next pair is " + std::to_string(w->received) + " of " +
                  std::to_string(num_pairs));
  }
  for (size_t j = 0; j < p.diffs.size(); ++j) {
    if (!std::isfinite(p.diffs[j])) {
      return refuse("pair " + std::to_string(p.first_pair + static_cast<int>(j / dim_)) +
                    " has a non-finite value");
    }
  }
  if (balancer_ && balancer_->epoch() == p.epoch) {
    for (int j = 0; j < p.count; ++j) {
      s = balancer_->AddPair(rank, p.first_pair + j, &p.diffs[static_cast<size_t>(j) * dim_], dim_);
      if (!s.ok()) {
        // Everything AddPair checks was checked above: a HerdPS bug, not the worker's.
        LOG(ERROR) << "order plugin: " << WorkerName(rank) << "'s checked pair refused: " << s;
        ctx->RespondError(request, Status::Internal("order plugin: " + s.message()));
        return;
      }
    }
  } else {
    // The epoch has not started: some worker has not finished the previous one.
    w->early.insert(w->early.end(), p.diffs.begin(), p.diffs.end());
  }
  w->received += p.count;
  ctx->Respond(request, "");
  Update(ctx);
}

void OrderPlugin::OnMembershipChange(const MembershipView& view, PluginContext* ctx) {
  for (size_t r = 0; r < workers_.size(); ++r) {
    Worker* w = &workers_[r];
    if (w->stopped || view.IsAlive(w->id)) continue;
    // Only news in a job that orders its examples through the plugin.
    LOG_IF(INFO, w->begun >= 0) << "order plugin: " << WorkerName(static_cast<int>(r))
                                << " died or left; the others go on without it";
    Stop(w, static_cast<int>(r));
  }
  Update(ctx);
}

void OrderPlugin::Stop(Worker* w, int rank) {
  w->stopped = true;
  if (balancer_ && balancer_->IsActive(rank) && w->begun == balancer_->epoch() &&
      w->received < num_examples_ / 2) {
    Status s = balancer_->RemoveWorker(rank);
    LOG_IF(ERROR, !s.ok()) << "order plugin: cannot remove " << WorkerName(rank) << ": " << s;
  }
  std::vector<int>().swap(w->order);
  std::vector<float>().swap(w->early);
}

void OrderPlugin::Update(PluginContext* ctx) {
  for (;;) {
    if (balancer_) {
      for (size_t r = 0; r < workers_.size(); ++r) {
        Worker* w = &workers_[r];
        const int rank = static_cast<int>(r);
        if (w->stopped || w->next_sent || !balancer_->OrderReady(rank)) continue;
        std::vector<int> next;
        Status s = balancer_->NextOrder(rank, &next);
        CHECK(s.ok()) << s;  // OrderReady said it is
        ctx->Notify(w->id, kOrderNext, EncodeOrderNext(balancer_->epoch() + 1, next));
        w->next_sent = true;
      }
      if (!balancer_->EpochDone()) return;
    }
    const int64_t next = epoch() + 1;
    bool anyone = false;
    for (const Worker& w : workers_) {
      if (w.stopped) continue;
      if (w.begun < next) return;  // waited for
      anyone = true;
    }
    if (!anyone) return;
    StartEpoch(next);
  }
}

void OrderPlugin::StartEpoch(int64_t epoch) {
  const int m = static_cast<int>(workers_.size());
  if (!balancer_) {
    balancer_ = std::make_unique<PairBalancer>(m, num_examples_, dim_, seed_);
    int taking_part = 0;
    for (const Worker& w : workers_) taking_part += !w.stopped;
    LOG(INFO) << "order plugin: CD-GraB over " << taking_part << " of " << m << " workers, "
              << num_examples_ << " examples each, pairs of " << dim_ << " floats";
  }
  std::vector<std::vector<int>> orders(m);
  for (int r = 0; r < m; ++r) {
    if (!workers_[r].stopped) orders[r] = std::move(workers_[r].order);
  }
  Status s = balancer_->BeginEpoch(std::move(orders));
  CHECK(s.ok()) << s;  // every order was checked on arrival, and the sizes agree
  CHECK_EQ(balancer_->epoch(), epoch);
  for (int r = 0; r < m; ++r) {
    Worker* w = &workers_[r];
    w->next_sent = false;
    std::vector<int>().swap(w->order);
    for (int k = 0; !w->stopped && k < w->received; ++k) {
      s = balancer_->AddPair(r, k, &w->early[static_cast<size_t>(k) * dim_], dim_);
      CHECK(s.ok()) << s;  // checked on arrival
    }
    std::vector<float>().swap(w->early);
  }
}

size_t OrderPlugin::buffered_pairs() const {
  size_t n = balancer_ ? balancer_->pending_pairs() : 0;
  for (const Worker& w : workers_) n += dim_ > 0 ? w.early.size() / dim_ : 0;
  return n;
}

}  // namespace ps
