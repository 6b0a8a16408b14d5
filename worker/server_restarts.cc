// What a worker counts and asks to tell what a server's restart lost (KVWorker::Restarts,
// docs/fault-tolerance.md): the pushes each server process acknowledged, and the
// restore report of the process that took a dead one's place.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ps/internal/postoffice.h"
#include "ps/internal/request_pipeline.h"
#include "ps/internal/restore_report.h"
#include "ps/internal/server_restarts.h"
#include "ps/simple_app.h"
#include "request_parts.h"

namespace ps {

std::string ServerRestart::DebugString() const {
  std::string text = "server " + std::to_string(server) + " restarted ";
  if (!status.ok()) return text + "(its report failed: " + status.message() + ")";
  text += from_replicas     ? std::string("from its replicas")
          : from_checkpoint ? "from " + checkpoint
                            : std::string("empty (no checkpoint)");
  text += ": " + std::to_string(acknowledged) + " pushes acknowledged before, " +
          std::to_string(kept) + " kept, " + std::to_string(lost()) + " lost";
  if (applied_unacknowledged()) {
    text += ", " + std::to_string(applied_unacknowledged()) + " applied though reported failed";
  }
  return text;
}

void RequestPipeline::CountAck(int rank, const std::string& identity) {
  if (rank < 0) return;
  if (static_cast<size_t>(rank) >= acks_.size()) acks_.resize(static_cast<size_t>(rank) + 1);
  ServerAcks& a = acks_[static_cast<size_t>(rank)];
  if (a.identity != identity) {
    if (!a.identity.empty()) {
      // Another process answers: what the ones before acknowledged waits for the report.
      a.restarted = true;
      a.before += a.acked;
      a.acked = 0;
    }
    a.identity = identity;
  }
  ++a.acked;
}

std::vector<std::pair<int, uint64_t>> RequestPipeline::RestartedServers(
    const std::vector<std::string>& identities) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<int, uint64_t>> restarted;
  for (size_t rank = 0; rank < acks_.size(); ++rank) {
    ServerAcks& a = acks_[rank];
    const std::string live = rank < identities.size() ? identities[rank] : std::string();
    // A new live process that has acknowledged nothing of ours yet.
    if (!a.identity.empty() && !live.empty() && live != a.identity) {
      a.restarted = true;
      a.before += a.acked;
      a.acked = 0;
      a.identity = live;
    }
    if (a.restarted && !live.empty()) restarted.emplace_back(static_cast<int>(rank), a.before);
  }
  return restarted;
}

void RequestPipeline::Restored(int rank, uint64_t kept) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank < 0 || static_cast<size_t>(rank) >= acks_.size()) return;
  ServerAcks& a = acks_[static_cast<size_t>(rank)];
  a.restarted = false;
  a.acked += kept;
  a.before = 0;
}

std::vector<ServerRestart> AskServerRestarts(SimpleApp* app, RequestPipeline* pipeline) {
  std::vector<std::string> identities;
  for (const Node& n : Postoffice::Get()->nodes()) {
    if (n.role != Node::kServerRole || !n.alive() || n.rank < 0) continue;
    if (static_cast<size_t>(n.rank) >= identities.size()) identities.resize(n.rank + 1);
    identities[static_cast<size_t>(n.rank)] = n.identity;
  }
  std::vector<ServerRestart> reports;
  for (const auto& restarted : pipeline->RestartedServers(identities)) {
    ServerRestart report;
    report.server = restarted.first;
    report.acknowledged = restarted.second;
    auto answers = std::make_shared<std::vector<SimpleData>>();
    int ts = app->RequestAnswers(kRestoreReportHead, "", Postoffice::ServerRankToID(report.server),
                                 answers);
    report.status = app->Wait(ts);
    RestoreReport restore;
    if (report.status.ok() &&
        (answers->size() != 1 || !ParseRestoreReport(answers->front().body, &restore))) {
      report.status = Status::Unimplemented(
          "its app does not answer restore reports (only OptimizerServer does)");
    }
    if (report.status.ok()) {
      report.from_checkpoint = restore.from_checkpoint;
      report.from_replicas = restore.from_replicas;
      report.checkpoint = restore.file;
      report.kept = restore.from_replicas ? report.acknowledged : restore.pushes;
      pipeline->Restored(report.server, report.kept);
    } else if (report.status.code() == Status::Code::kUnimplemented) {
      // The server cannot tell: reported once, as unknown. (Any other failure, such as
      // a server app that is still loading its checkpoint or a process gone again:
      // the next call asks again.)
      pipeline->Restored(report.server, 0);
    }
    reports.push_back(std::move(report));
  }
  return reports;
}

}  // namespace ps
