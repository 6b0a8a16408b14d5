// The node reports a scheduler receives with heartbeats and leaves
// (proto/node_report.proto) through what it makes of them: JobReports::Update, the
// stall report (StallReport::Describe) and the metrics page (MetricsText).
//
// Input: u8 node-state bits (bit i set: node i of the job below is dead), u8 barrier
// arrivals (bit i: node i is in a pending worker barrier), then up to 8 reports, each
// a u8 node index (mod 5) and a u16-length chunk: the serialized report.
// The job: the scheduler (id 1), servers 0, 1 (ids 8, 10), workers 0, 1 (9, 11).
//
// Properties: nothing crashes; a report that Update keeps has a latency histogram of
// the scheduler's shape or none; every line of the metrics page is a comment or
// `name{labels} value` with a number value and no raw newline in a label; no stall line
// is empty.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "job_reports.h"
#include "metrics_text.h"
#include "ps/base.h"
#include "ps/internal/node_activity.h"
#include "stall_report.h"

namespace {

constexpr int kIds[] = {1, 8, 10, 9, 11};

ps::Node NodeOf(int index, bool dead) {
  ps::Node n;
  n.id = kIds[index];
  n.role = index == 0 ? ps::Node::kSchedulerRole
                      : index <= 2 ? ps::Node::kServerRole : ps::Node::kWorkerRole;
  n.rank = index == 0 ? 0 : (index - 1) % 2;
  n.state = dead ? ps::Node::kDead : ps::Node::kLive;
  return n;
}

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "node_report_fuzzer: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ps::fuzz::InputReader in(data, size);
  const uint8_t dead = in.Take<uint8_t>();
  const uint8_t arrived = in.Take<uint8_t>();
  ps::JobReports reports;
  std::vector<ps::Node> nodes;
  for (int i = 0; i < 5; ++i) nodes.push_back(NodeOf(i, i > 0 && (dead >> i) & 1));
  reports.SetMembership(nodes, 3);
  const auto now = ps::JobReports::Clock::now();
  for (int r = 0; r < 8 && !in.empty(); ++r) {
    const int index = in.Take<uint8_t>() % 5;
    reports.Update(kIds[index], in.TakeChunk<uint16_t>(), now);
  }
  const ps::JobReports::Snapshot snapshot = reports.Get();
  for (const auto& kv : snapshot.reports) {
    const int buckets = kv.second.report.latency_bucket_size();
    Check(buckets == 0 ||
              static_cast<size_t>(buckets) == ps::NodeActivity::kLatencyBounds.size() + 1,
          "a kept report has a histogram of another shape");
  }
  ps::StallReport::PendingBarrier barrier;
  barrier.group = ps::kWorkerGroup;
  barrier.members = {9, 11};
  for (int i = 0; i < 5; ++i) {
    if ((arrived >> i) & 1) barrier.arrived.insert(kIds[i]);
  }
  for (const std::string& line :
       ps::StallReport::Describe(snapshot, {barrier}, [](int id) { return id * 0.5; }, 2.5)) {
    Check(!line.empty(), "an empty stall line");
  }
  std::istringstream page(ps::MetricsText(snapshot, now));
  std::string line;
  while (std::getline(page, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    Check(space != std::string::npos && space + 1 < line.size(), "a sample without a value");
    const std::string value = line.substr(space + 1);
    char* end = nullptr;
    std::strtod(value.c_str(), &end);
    Check(value == "NaN" || value == "+Inf" || value == "-Inf" || (end && *end == '\0'),
          "a sample value that is not a number");
    const size_t brace = line.find('{');
    if (brace != std::string::npos) Check(line.rfind('}') > brace, "unclosed labels");
  }
  return 0;
}
