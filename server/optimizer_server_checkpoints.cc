// OptimizerServer's checkpoints: where they go by the job's settings, periodic saves
// (a consistent cut taken on the receive thread, written on a writer thread), saving
// and loading, and what the server tells a worker about the state it resumed from (the
// restart path, docs/fault-tolerance.md).
#include <glog/logging.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>
#include <mutex>
#include <string>
#include <system_error>

#include "checkpoint.h"
#include "ps/internal/postoffice.h"
#include "shard_thread.h"
#include "ps/internal/restore_report.h"
#include "ps/optimizer_server.h"

namespace ps {
namespace {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace


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
  if (Postoffice::Get()->catching_up()) {
    app->ResponseError(request, Status::Unavailable("it is catching up from its replicas"));
    return;
  }
  if (caught_up_.load()) {
    report.from_replicas = true;
    app->Response(request, FormatRestoreReport(report));
    return;
  }
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

void OptimizerServer::MaybeCheckpoint() {
  if (options_.checkpoint_dir.empty()) return;
  if (Postoffice::Get()->catching_up()) return;  // its state is not whole yet
  uint64_t pushes = pushes_taken_.load();
  bool due = checkpoint_soon_.load() ||
             (options_.checkpoint_every_pushes &&
              pushes - last_checkpoint_pushes_ >= options_.checkpoint_every_pushes) ||
             (options_.checkpoint_every_seconds > 0 &&
              NowSeconds() - last_checkpoint_time_ >= options_.checkpoint_every_seconds);
  if (!due) return;
  if (writing_.load()) return;  // the last save is still being written: try later
  checkpoint_soon_.store(false);
  last_checkpoint_pushes_ = pushes;
  last_checkpoint_time_ = NowSeconds();
  // On the receive thread, after this request's parts were queued: the snapshot is
  // taken here (a consistent cut, at memory speed); writing and fsync-ing it happen on
  // a writer thread, so the node goes on reading meanwhile. Nothing may escape, or the
  // request would be answered a second time with the error.
  auto data = std::make_shared<CheckpointData>();
  try {
    std::lock_guard<std::mutex> lock(save_mu_);
    Snapshot(data.get());
  } catch (const std::exception& e) {
    LOG(ERROR) << "periodic checkpoint failed: " << e.what();
    return;
  } catch (...) {
    LOG(ERROR) << "periodic checkpoint failed: an exception that is not a std::exception";
    return;
  }
  if (writer_.joinable()) writer_.join();
  writing_ = true;
  std::string path = CheckpointPath();
  writer_ = std::thread([this, data, path] {
    Status s;
    {
      std::lock_guard<std::mutex> lock(save_mu_);
      try {
        s = WriteCheckpoint(path, *data);
      } catch (const std::exception& e) {
        s = Status::Internal(e.what());
      } catch (...) {
        s = Status::Internal("an exception that is not a std::exception");
      }
    }
    if (!s.ok()) LOG(ERROR) << "periodic checkpoint failed: " << s;
    writing_ = false;
  });
}

void OptimizerServer::Snapshot(CheckpointData* data) {
  data->state_width = static_cast<uint32_t>(optimizer_->StateWidth());
  data->optimizer = RuleText();
  // Each shard copies its keys after the work queued before this call, so the file is
  // a consistent cut of every request taken so far.
  data->pushes_taken = pushes_taken_.load();
  data->pushes_by_worker.resize(worker_ranks_);
  for (size_t r = 0; r < worker_ranks_; ++r) data->pushes_by_worker[r] = pushes_by_worker_[r].load();
  for (auto& shard : shards_) {
    shard->RunAndWait([&](ShardStore& store) { store.Snapshot(&data->records); });
  }
}

std::string OptimizerServer::RuleText() const {
  return options_.rule ? kRulePrefix + options_.rule_name : options_.optimizer.ToString();
}

std::string OptimizerServer::CheckpointPath() const {
  return options_.checkpoint_dir + "/server-" + std::to_string(Postoffice::Get()->my_rank()) +
         ".ckpt";
}

Status OptimizerServer::SaveCheckpoint() {
  if (options_.checkpoint_dir.empty()) {
    return Status::InvalidArgument("no checkpoint directory configured");
  }
  return SaveCheckpoint(CheckpointPath());
}

Status OptimizerServer::SaveCheckpoint(const std::string& path) {
  // One save at a time: two would share the temporary file.
  std::lock_guard<std::mutex> lock(save_mu_);
  CheckpointData data;
  Snapshot(&data);
  return WriteCheckpoint(path, data);
}

Status OptimizerServer::LoadCheckpoint(const std::string& path) {
  CheckpointData data;
  Status s = ReadCheckpoint(path, &data);
  if (!s.ok()) return s;
  s = CheckChunkPlacement(
      path, data, Postoffice::Get()->key_placement() == ConsistentHashRing::kRing);
  if (!s.ok()) return s;
  // An app's rule is recorded as "rule NAME"; a built-in optimizer as its options.
  const bool written_by_rule = data.optimizer.rfind(kRulePrefix, 0) == 0;
  std::string written_by;
  if (written_by_rule) {
    written_by = data.optimizer;
  } else {
    OptimizerOptions written;
    s = OptimizerOptions::Parse(data.optimizer, &written);
    if (!s.ok()) return Status::DataLoss("checkpoint " + path + ": " + s.message());
    written_by = OptimizerName(written.kind);
  }
  const std::string running = options_.rule ? RuleText() : OptimizerName(options_.optimizer.kind);
  if (written_by != running || data.state_width != optimizer_->StateWidth()) {
    return Status::InvalidArgument("checkpoint " + path + " was written by " + written_by +
                                   " (state width " + std::to_string(data.state_width) +
                                   ") and this server runs " + running + " (state width " +
                                   std::to_string(optimizer_->StateWidth()) + ")");
  }
  int threads = static_cast<int>(shards_.size());
  std::vector<std::vector<const CheckpointRecord*>> by_shard(threads);
  for (const CheckpointRecord& r : data.records) {
    by_shard[ShardOf(r.key, r.chunk, threads)].push_back(&r);
  }
  Status failed;
  for (int t = 0; t < threads; ++t) {
    shards_[t]->RunAndWait([&](ShardStore& store) {
      for (const CheckpointRecord* r : by_shard[t]) {
        Status rs = store.Restore(*r);
        if (!rs.ok() && failed.ok()) failed = rs;
      }
    });
  }
  if (!failed.ok()) return Status(failed.code(), "checkpoint " + path + ": " + failed.message());
  pushes_taken_.store(data.pushes_taken);
  for (size_t r = 0; r < worker_ranks_; ++r) {
    pushes_by_worker_[r].store(r < data.pushes_by_worker.size() ? data.pushes_by_worker[r] : 0);
  }
  std::lock_guard<std::mutex> lock(restored_mu_);
  restored_.checkpoint = path;
  restored_.pushes_taken = data.pushes_taken;
  restored_.pushes_by_worker = data.pushes_by_worker;
  return Status::OK();
}

}  // namespace ps
