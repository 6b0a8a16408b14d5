#include "stall_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "ps/base.h"

namespace ps {
namespace {

std::string GroupName(int group) {
  switch (group) {
    case kWorkerGroup: return "workers";
    case kServerGroup: return "servers";
    case kServerGroup + kWorkerGroup: return "servers and workers";
    case kScheduler + kServerGroup + kWorkerGroup: return "all nodes";
    default: break;
  }
  std::string name;
  if (group & kScheduler) name = "scheduler";
  if (group & kServerGroup) name += name.empty() ? "servers" : ", servers";
  if (group & kWorkerGroup) name += name.empty() ? "workers" : ", workers";
  return name;
}

std::string Seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", s);
  return text;
}

// Names nodes by role: "worker 1", "workers 1, 2", "server 0 and workers 1, 2".
class Namer {
 public:
  explicit Namer(const std::vector<Node>& nodes) {
    for (const Node& n : nodes) nodes_[n.id] = n;
  }
  const Node* Find(int id) const {
    auto it = nodes_.find(id);
    return it == nodes_.end() ? nullptr : &it->second;
  }
  std::string One(int id) const {
    const Node* n = Find(id);
    if (!n) return "node " + std::to_string(id);
    if (n->role == Node::kSchedulerRole) return "the scheduler";
    return std::string(RoleName(n->role)) + " " + std::to_string(n->rank);
  }
  // Also says whether the names are plural (for the verb).
  std::string Many(std::vector<int> ids, bool* plural = nullptr) const {
    std::map<std::string, std::vector<int>> ranks;  // by role name
    std::vector<std::string> others;
    bool scheduler = false;
    for (int id : ids) {
      const Node* n = Find(id);
      if (!n) {
        others.push_back("node " + std::to_string(id));
      } else if (n->role == Node::kSchedulerRole) {
        scheduler = true;
      } else {
        ranks[RoleName(n->role)].push_back(n->rank);
      }
    }
    std::vector<std::string> parts;
    if (scheduler) parts.push_back("the scheduler");
    for (auto& kv : ranks) {
      std::sort(kv.second.begin(), kv.second.end());
      std::string part = kv.first + (kv.second.size() > 1 ? "s " : " ");
      for (size_t i = 0; i < kv.second.size(); ++i) {
        part += (i ? ", " : "") + std::to_string(kv.second[i]);
      }
      parts.push_back(part);
    }
    parts.insert(parts.end(), others.begin(), others.end());
    std::string text;
    for (size_t i = 0; i < parts.size(); ++i) {
      text += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
    }
    if (plural) *plural = ids.size() > 1;
    return text;
  }

 private:
  std::map<int, Node> nodes_;
};

}  // namespace

std::vector<std::string> StallReport::Describe(const JobReports::Snapshot& snapshot,
                                               const std::vector<PendingBarrier>& barriers,
                                               const std::function<double(int)>& silent_s,
                                               double silent_after_s) {
  const Namer names(snapshot.nodes);
  auto live = [&](int id) {
    const Node* n = names.Find(id);
    return n && n->alive();
  };
  // (what, whom) -> waiters, in a stable order.
  std::map<std::pair<std::string, std::vector<int>>, std::vector<int>> waits;
  std::set<int> waiting;  // nodes that wait in something
  for (const PendingBarrier& b : barriers) {
    std::vector<int> missing;
    for (int id : b.members) {
      if (!b.arrived.count(id)) missing.push_back(id);
    }
    for (int id : b.arrived) {
      if (!live(id)) continue;
      waits[{"Barrier(" + GroupName(b.group) + ")", missing}].push_back(id);
      waiting.insert(id);
    }
  }
  for (const auto& kv : snapshot.reports) {
    const int id = kv.first;
    if (!live(id)) continue;
    for (const herdps::wire::NodeWait& w : kv.second.report.wait()) {
      std::vector<int> whom;
      if (w.clock_minimum() > 0) {
        // Workers whose ended clocks hold the job's minimum below what it needs.
        for (const auto& other : snapshot.reports) {
          const Node* n = names.Find(other.first);
          const herdps::wire::NodeReport& r = other.second.report;
          if (other.first != id && n && n->alive() && n->role == Node::kWorkerRole &&
              !r.clocks_finished() && r.clocks_ended() < w.clock_minimum()) {
            whom.push_back(other.first);
          }
        }
      } else {
        whom.assign(w.waiting_for().begin(), w.waiting_for().end());
      }
      std::sort(whom.begin(), whom.end());
      std::string what = w.what() + " (" + Seconds(w.seconds()) + " s so far)";
      waits[{what, whom}].push_back(id);
      waiting.insert(id);
    }
  }
  // Lines in the order of their first waiter's id (workers before the servers and the
  // scheduler that wait in Finalize, then by what).
  std::vector<std::pair<std::pair<std::string, std::vector<int>>, std::vector<int>>> ordered(
      waits.begin(), waits.end());
  std::stable_sort(ordered.begin(), ordered.end(), [&](const auto& a, const auto& b) {
    auto rank = [&](int id) {
      const Node* n = names.Find(id);
      int role = !n ? 3 : n->role == Node::kWorkerRole ? 0 : n->role == Node::kServerRole ? 1 : 2;
      return std::make_pair(role, id);
    };
    return rank(a.second.front()) < rank(b.second.front());
  });
  std::vector<std::string> lines;
  std::set<int> waited_for;
  for (const auto& kv : ordered) {
    bool plural = false;
    std::string who = names.Many(kv.second, &plural);
    std::string line = who + (plural ? " wait in " : " waits in ") + kv.first.first;
    if (!kv.first.second.empty()) {
      line += " for " + names.Many(kv.first.second);
      waited_for.insert(kv.first.second.begin(), kv.first.second.end());
    }
    lines.push_back(line);
  }
  for (int id : waited_for) {
    const Node* n = names.Find(id);
    std::string line;
    if (n && !n->alive()) {
      line = names.One(id) + " is " + StateName(n->state);
    } else {
      double silent = silent_s(id);
      if (silent > silent_after_s) {
        line = names.One(id) + " has been silent for " + Seconds(silent) +
               " s (stopped, cut off or starved of CPU?)";
      } else if (!waiting.count(id)) {
        line = names.One(id) + " waits in nothing HerdPS knows of (it runs app code)";
      }
    }
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

bool StallReport::Due(uint64_t progress, bool anyone_waits, Clock::time_point now,
                      double stall_s) {
  if (!started_ || progress != last_progress_) {
    started_ = true;
    last_progress_ = progress;
    since_ = now;
    reported_ = false;
    return false;
  }
  if (reported_ || !anyone_waits || stall_s <= 0) return false;
  if (std::chrono::duration<double>(now - since_).count() < stall_s) return false;
  reported_ = true;
  return true;
}

}  // namespace ps
