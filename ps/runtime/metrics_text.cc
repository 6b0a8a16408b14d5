#include "metrics_text.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>

#include "ps/internal/node_activity.h"

namespace ps {
namespace {

using herdps::wire::NodeReport;

// Whole numbers (counts, bytes) in full; others in the shortest form that reads back
// close enough for a metric.
// A node's report is network input: any double may come, NaN and infinities included.
std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char text[40];
  if (std::fabs(v) < 9e18 && v == std::floor(v)) {
    std::snprintf(text, sizeof(text), "%lld", static_cast<long long>(v));
  } else {
    std::snprintf(text, sizeof(text), "%.15g", v);
  }
  return text;
}

// Label values: backslash, quote and newline escaped.
std::string Escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string NodeLabels(const Node& n) {
  std::string role = RoleName(n.role);
  return "node=\"" + Escaped(n.role == Node::kSchedulerRole ? role : role + " " +
                                                                  std::to_string(n.rank)) +
         "\",role=\"" + Escaped(role) + "\",rank=\"" + std::to_string(n.rank) + "\"";
}

class Writer {
 public:
  explicit Writer(const JobReports::Snapshot& s) : s_(s) {
    for (const Node& n : s.nodes) nodes_[n.id] = n;
  }
  void Family(const std::string& name, const char* type, const std::string& help) {
    out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  }
  void Sample(const std::string& name, const std::string& labels, double value) {
    out_ << name;
    if (!labels.empty()) out_ << "{" << labels << "}";
    out_ << " " << Number(value) << "\n";
  }
  // One sample per reporting node, from `value` of its report; `roles` filters.
  void PerNode(const std::string& name, const char* type, const std::string& help,
               const std::function<double(const NodeReport&)>& value,
               const std::string& extra_labels = "", int role = 0) {
    bool any = false;
    for (const auto& kv : s_.reports) {
      auto n = nodes_.find(kv.first);
      if (n == nodes_.end() || (role && n->second.role != role)) continue;
      if (!any) Family(name, type, help);
      any = true;
      Sample(name, NodeLabels(n->second) + extra_labels, value(kv.second.report));
    }
  }
  // A counter by request kind: for each reporting node of `role`, a push and a pull
  // sample.
  void ByKind(const std::string& name, const std::string& help, int role,
              const std::function<uint64_t(const NodeReport&)>& push,
              const std::function<uint64_t(const NodeReport&)>& pull) {
    Family(name, "counter", help);
    for (bool is_push : {true, false}) {
      const std::string kind = is_push ? ",kind=\"push\"" : ",kind=\"pull\"";
      for (const auto& kv : s_.reports) {
        auto n = nodes_.find(kv.first);
        if (n == nodes_.end() || n->second.role != role) continue;
        const NodeReport& r = kv.second.report;
        Sample(name, NodeLabels(n->second) + kind,
               static_cast<double>(is_push ? push(r) : pull(r)));
      }
    }
  }
  const std::map<int, Node>& nodes() const { return nodes_; }
  std::string Text() const { return out_.str(); }

 private:
  const JobReports::Snapshot& s_;
  std::map<int, Node> nodes_;
  std::ostringstream out_;
};

}  // namespace

std::string MetricsText(const JobReports::Snapshot& s, JobReports::Clock::time_point now) {
  Writer w(s);
  w.Family("herdps_membership_version", "gauge",
           "Version of the scheduler's node table (grows with every join, death and leave).");
  w.Sample("herdps_membership_version", "", static_cast<double>(s.membership_version));
  w.Family("herdps_node_live", "gauge", "1 while the node is a live member of the job, else 0.");
  for (const auto& kv : w.nodes()) {
    if (kv.second.role == Node::kSchedulerRole) continue;
    w.Sample("herdps_node_live", NodeLabels(kv.second), kv.second.alive() ? 1 : 0);
  }
  w.Family("herdps_node_state", "gauge",
           "1 for the node's state in the membership (joining, live, dead, left).");
  for (const auto& kv : w.nodes()) {
    if (kv.second.role == Node::kSchedulerRole) continue;
    w.Sample("herdps_node_state",
             NodeLabels(kv.second) + ",state=\"" + StateName(kv.second.state) + "\"", 1);
  }
  w.Family("herdps_stalled", "gauge",
           "1 while a stall report stands: workers wait and nothing has moved for "
           "PS_STALL_REPORT s.");
  w.Sample("herdps_stalled", "", s.stalled ? 1 : 0);
  w.Family("herdps_barrier_releases_total", "counter", "Barriers the scheduler released.");
  w.Sample("herdps_barrier_releases_total", "", static_cast<double>(s.barrier_releases));

  w.Family("herdps_report_age_seconds", "gauge",
           "Seconds since the node's last report (it comes with every heartbeat).");
  for (const auto& kv : s.reports) {
    auto n = w.nodes().find(kv.first);
    if (n == w.nodes().end()) continue;
    w.Sample("herdps_report_age_seconds", NodeLabels(n->second),
             std::chrono::duration<double>(now - kv.second.at).count());
  }
  auto u = [](uint64_t v) { return static_cast<double>(v); };
  w.ByKind("herdps_requests_total",
           "Requests the worker issued (Push, Pull; a PushPull counts in both).",
           Node::kWorkerRole, [](const NodeReport& r) { return r.push_requests(); },
           [](const NodeReport& r) { return r.pull_requests(); });
  w.ByKind("herdps_served_requests_total",
           "Request messages the server's apps took (one per part of a request; "
           "replicas' copies count).",
           Node::kServerRole, [](const NodeReport& r) { return r.served_push_requests(); },
           [](const NodeReport& r) { return r.served_pull_requests(); });
  // The latency histogram, cumulative as Prometheus wants it.
  w.Family("herdps_request_latency_seconds", "histogram",
           "Time from issuing a request to its end, at the worker that issued it.");
  for (const auto& kv : s.reports) {
    auto n = w.nodes().find(kv.first);
    if (n == w.nodes().end() || n->second.role != Node::kWorkerRole) continue;
    const NodeReport& r = kv.second.report;
    const std::string labels = NodeLabels(n->second);
    uint64_t cumulative = 0;
    for (int b = 0; b < r.latency_bucket_size(); ++b) {
      cumulative += r.latency_bucket(b);
      const bool last = static_cast<size_t>(b) >= NodeActivity::kLatencyBounds.size();
      w.Sample("herdps_request_latency_seconds_bucket",
               labels + ",le=\"" + (last ? "+Inf" : Number(NodeActivity::kLatencyBounds[b])) + "\"",
               u(cumulative));
    }
    w.Sample("herdps_request_latency_seconds_sum", labels, r.latency_seconds_sum());
    w.Sample("herdps_request_latency_seconds_count", labels, u(cumulative));
  }
  w.PerNode("herdps_sent_bytes_total", "counter", "Bytes the node sent (every channel).",
            [&](const NodeReport& r) { return u(r.sent_bytes()); });
  w.PerNode("herdps_received_bytes_total", "counter", "Bytes the node received.",
            [&](const NodeReport& r) { return u(r.received_bytes()); });
  w.PerNode("herdps_sent_messages_total", "counter", "Messages the node sent.",
            [&](const NodeReport& r) { return u(r.sent_messages()); });
  w.PerNode("herdps_received_messages_total", "counter", "Messages the node received.",
            [&](const NodeReport& r) { return u(r.received_messages()); });
  w.PerNode("herdps_resent_messages_total", "counter",
            "Messages the node sent again for want of an acknowledgement (PS_RESEND).",
            [&](const NodeReport& r) { return u(r.resent_messages()); });
  w.PerNode("herdps_dropped_messages_total", "counter",
            "Received messages dropped: injected (PS_DROP_RATE) or rejected as malformed.",
            [&](const NodeReport& r) { return u(r.dropped_messages()); });
  w.PerNode("herdps_clock", "gauge", "Clocks the worker ended (BSP/SSP; 0 under ASP).",
            [&](const NodeReport& r) { return static_cast<double>(r.clocks_ended()); }, "",
            Node::kWorkerRole);
  w.PerNode("herdps_waits", "gauge",
            "Threads of the node waiting in a request or Clock() at its last report.",
            [&](const NodeReport& r) { return static_cast<double>(r.wait_size()); });
  bool depth_family = false;
  for (const auto& kv : s.reports) {
    auto n = w.nodes().find(kv.first);
    if (n == w.nodes().end()) continue;
    const NodeReport& r = kv.second.report;
    for (int i = 0; i < r.shard_queue_depth_size(); ++i) {
      if (!depth_family) {
        w.Family("herdps_shard_queue_depth", "gauge",
                 "Requests waiting in each shard thread's queue of an OptimizerServer.");
        depth_family = true;
      }
      w.Sample("herdps_shard_queue_depth",
               NodeLabels(n->second) + ",shard=\"" + std::to_string(i) + "\"",
               u(r.shard_queue_depth(i)));
    }
  }
  return w.Text();
}

}  // namespace ps
