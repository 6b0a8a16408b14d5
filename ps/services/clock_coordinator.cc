#include "clock_coordinator.h"

#include <glog/logging.h>

#include <algorithm>
#include <string>

#include "ps/base.h"
#include "ps/internal/clock_client.h"

namespace ps {

void ClockCoordinator::OnStart(PluginContext* ctx) {
  for (int id : ctx->membership().Ids(kWorkerGroup, /*alive_only=*/true)) workers_[id];
  for (const Node& n : ctx->membership().nodes) {
    if (n.role == Node::kServerRole) server_identity_[n.id] = n.identity;
  }
  LOG(INFO) << "consistency " << model_.ToString() << ": clocks of " << workers_.size()
            << " workers coordinated by the scheduler";
  Update(ctx->membership(), ctx);
}

void ClockCoordinator::OnRequest(const SimpleData& request, PluginContext* ctx) {
  auto it = workers_.find(request.sender);
  if (it == workers_.end() || !ctx->membership().IsAlive(request.sender)) {
    ctx->RespondError(request, Status::InvalidArgument(
                                   "node " + std::to_string(request.sender) +
                                   " is not a live worker of this job"));
    return;
  }
  WorkerClock& w = it->second;
  if (request.head == kClockEnded) {
    int64_t ended = 0;
    if (!ParseClockText(request.body, &ended)) {
      ctx->RespondError(request, Status::InvalidArgument("malformed clock '" + request.body + "'"));
      return;
    }
    if (w.finished || ended != w.ended) {
      // A worker ends its clocks one by one, in order; anything else is a bug or a
      // forgery, and changes nothing.
      ctx->RespondError(request, Status::InvalidArgument(
                                     "worker ended clock " + request.body + " but is in clock " +
                                     std::to_string(w.ended) +
                                     (w.finished ? " and has finished its clocks" : "")));
      return;
    }
    w.ended = ended + 1;
  } else if (request.head == kClockFinished) {
    w.finished = true;
  } else {
    ctx->RespondError(request, Status::InvalidArgument("unknown clock command " +
                                                       std::to_string(request.head)));
    return;
  }
  Update(ctx->membership(), ctx);
  ctx->Respond(request, std::to_string(minimum_));
}

void ClockCoordinator::OnMembershipChange(const MembershipView& view, PluginContext* ctx) {
  Update(view, ctx);
  // A server that took a dead one's place has heard of no minimum: it gets the current
  // one (synchronous aggregation checks requests' clocks against it).
  for (const Node& n : view.nodes) {
    if (n.role != Node::kServerRole || !n.alive()) continue;
    std::string& known = server_identity_[n.id];
    if (known == n.identity) continue;
    known = n.identity;
    if (minimum_ > 0) ctx->Notify(n.id, kClockMinimum, std::to_string(minimum_));
  }
}

void ClockCoordinator::Update(const MembershipView& view, PluginContext* ctx) {
  int64_t minimum = kAllClocksEnded;
  for (const auto& kv : workers_) {
    if (kv.second.finished || !view.IsAlive(kv.first)) continue;
    minimum = std::min(minimum, kv.second.ended);
  }
  if (minimum <= minimum_) return;
  minimum_ = minimum;
  // Nobody answers anything but OK to this; the request just ends.
  ctx->Notify(kWorkerGroup + kServerGroup, kClockMinimum, std::to_string(minimum_));
}

}  // namespace ps
