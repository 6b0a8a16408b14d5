// Timing helpers of apps/bench: rounds of requests with a window in flight, two
// transports measured in alternating rounds, medians and percentiles.
#ifndef HERDPS_APPS_BENCH_MEASURE_H_
#define HERDPS_APPS_BENCH_MEASURE_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace bench {

// The items of a comma-separated flag value, empty items skipped.
inline std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

using Clock = std::chrono::steady_clock;

struct Result {
  double mbps = 0;
  double p50_us = 0;
  double p99_us = 0;
  int requests = 0;
};

inline double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

// Accumulates one transport's requests over several rounds.
struct Tally {
  double bytes = 0;    // of the round in progress
  double seconds = 0;  // of the round in progress
  int requests = 0;
  std::vector<double> round_mbps;
  std::vector<double> latencies_us;
  void EndRound() {
    round_mbps.push_back(seconds > 0 ? bytes / seconds / 1e6 : 0);
    bytes = seconds = 0;
  }
  // Goodput is the median over rounds: a stall of the shared machine during one
  // round does not decide the figure.
  Result Summary() const {
    Result r;
    r.requests = requests;
    r.mbps = Percentile(round_mbps, 0.5);
    r.p50_us = Percentile(latencies_us, 0.5);
    r.p99_us = Percentile(latencies_us, 0.99);
    return r;
  }
};

// Runs `issue` / `complete` with up to `window` requests in flight for `seconds`.
template <typename Issue, typename Complete>
void MeasureRound(uint64_t size, int window, double seconds, int max_requests, Issue issue,
                  Complete complete, Tally* tally) {
  std::deque<std::pair<int, Clock::time_point>> in_flight;
  auto start = Clock::now();
  auto deadline = start + std::chrono::duration<double>(seconds);
  int issued = 0;
  while (true) {
    bool more = Clock::now() < deadline && issued < max_requests;
    if (more && static_cast<int>(in_flight.size()) < window) {
      in_flight.emplace_back(issue(), Clock::now());
      ++issued;
      continue;
    }
    if (in_flight.empty()) break;
    complete(in_flight.front().first);
    tally->latencies_us.push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - in_flight.front().second)
            .count());
    in_flight.pop_front();
  }
  tally->seconds += std::chrono::duration<double>(Clock::now() - start).count();
  tally->bytes += static_cast<double>(size) * issued;
  tally->requests += issued;
}

// Measures HerdPS and the raw transport in alternating rounds, so that whatever else
// the machine does in the meantime weighs on both alike.
// `budget`: rounds, total seconds and the cap on requests, each per transport.
struct Budget {
  int rounds = 7;
  double seconds = 1.5;
  int max_requests = 20000;
};

template <typename IssueA, typename CompleteA, typename IssueB, typename CompleteB>
std::pair<Result, Result> MeasurePair(const Budget& budget, uint64_t size, int window,
                                      IssueA issue_a, CompleteA complete_a, IssueB issue_b,
                                      CompleteB complete_b) {
  for (int i = 0; i < 3; ++i) complete_a(issue_a()), complete_b(issue_b());  // warm-up
  Tally a, b;
  int rounds = std::max(1, budget.rounds);
  double seconds = budget.seconds / rounds;
  int cap = std::max(1, budget.max_requests / rounds);
  for (int r = 0; r < rounds; ++r) {
    // Alternate which goes first, so neither always follows the other.
    for (int turn = 0; turn < 2; ++turn) {
      if ((turn == 0) == (r % 2 == 0)) {
        MeasureRound(size, window, seconds, cap, issue_a, complete_a, &a);
        a.EndRound();
      } else {
        MeasureRound(size, window, seconds, cap, issue_b, complete_b, &b);
        b.EndRound();
      }
    }
  }
  return {a.Summary(), b.Summary()};
}

}  // namespace bench

#endif  // HERDPS_APPS_BENCH_MEASURE_H_
