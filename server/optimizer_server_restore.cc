// OptimizerServer: where its checkpoints go by the job's settings, and what it tells a
// worker about the state it resumed from (the restart path, docs/fault-tolerance.md).
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>

#include "ps/internal/postoffice.h"
#include "ps/internal/restore_report.h"
#include "ps/optimizer_server.h"

namespace ps {

void OptimizerServer::ApplyCheckpointSettings() {
  const Config& job = Postoffice::Get()->config();
  if (options_.checkpoint_dir.empty() && !job.checkpoint_dir.empty()) {
    options_.checkpoint_dir = job.checkpoint_dir;
    if (options_.checkpoint_every_seconds == 0 && options_.checkpoint_every_pushes == 0) {
      options_.checkpoint_every_seconds = job.checkpoint_every_seconds;
      options_.checkpoint_every_pushes = job.checkpoint_every_pushes;
    }
  }
  if (options_.checkpoint_dir.empty()) return;
  std::error_code error;
  std::filesystem::create_directories(options_.checkpoint_dir, error);
  if (error) {
    throw Error("OptimizerServer: cannot make the checkpoint folder '" + options_.checkpoint_dir +
                "': " + error.message());
  }
}

void OptimizerServer::CountPush(int sender) {
  if (!IsWorkerId(sender)) return;
  const size_t rank = static_cast<size_t>(Postoffice::IDtoRank(sender));
  if (rank < worker_ranks_) pushes_by_worker_[rank].fetch_add(1, std::memory_order_relaxed);
}

OptimizerServer::Restored OptimizerServer::restored() const {
  std::lock_guard<std::mutex> lock(restored_mu_);
  return restored_;
}

void OptimizerServer::AnswerSimpleRequest(const SimpleData& request, SimpleApp* app) {
  if (request.head != kRestoreReportHead) {
    app->Response(request);  // as SimpleApp's default handle does
    return;
  }
  RestoreReport report;
  {
    std::lock_guard<std::mutex> lock(restored_mu_);
    if (!restored_.checkpoint.empty() && restored_.pushes_by_worker.empty()) {
      app->ResponseError(request, Status::Unimplemented(
                                      "its checkpoint " + restored_.checkpoint +
                                      " predates push counts by worker (format 3): what the "
                                      "restart lost is unknown"));
      return;
    }
    report.from_checkpoint = !restored_.checkpoint.empty();
    report.file = restored_.checkpoint;
    if (IsWorkerId(request.sender)) {
      const size_t rank = static_cast<size_t>(Postoffice::IDtoRank(request.sender));
      if (rank < restored_.pushes_by_worker.size()) report.pushes = restored_.pushes_by_worker[rank];
    }
  }
  app->Response(request, FormatRestoreReport(report));
}

}  // namespace ps
