#include "early_stop.h"

#include <cstdlib>
#include <stdexcept>

#include "training_options.h"

DEFINE_string(stop_after_epoch, "",
              "test hook: RANK:E makes worker RANK stop after E epochs while the others go "
              "on (see --stop_how); empty: nobody stops early");
DEFINE_string(stop_how, "leave",
              "leave (finish clocks and orders, leave the job) or kill (SIGKILL halfway "
              "through the next epoch)");

namespace linear {

EarlyStop EarlyStopFromFlags() {
  EarlyStop stop;
  if (FLAGS_stop_how != "leave" && FLAGS_stop_how != "kill") {
    throw std::invalid_argument("--stop_how must be leave or kill, not '" + FLAGS_stop_how + "'");
  }
  stop.kill = FLAGS_stop_how == "kill";
  if (FLAGS_stop_after_epoch.empty()) return stop;
  const std::string& text = FLAGS_stop_after_epoch;
  const size_t colon = text.find(':');
  char* end = nullptr;
  long rank = -1, epoch = -1;
  bool ok = colon != std::string::npos && colon > 0 && colon + 1 < text.size();
  if (ok) {
    rank = std::strtol(text.c_str(), &end, 10);
    ok = end == text.c_str() + colon && rank >= 0 && rank < 1000000;
  }
  if (ok) {
    epoch = std::strtol(text.c_str() + colon + 1, &end, 10);
    ok = *end == '\0' && epoch >= 1 && epoch < FLAGS_epochs;
  }
  if (!ok) {
    throw std::invalid_argument("--stop_after_epoch must be RANK:E with E in 1.." +
                                std::to_string(FLAGS_epochs - 1) +
                                " (an epoch before the last), not '" + text + "'");
  }
  stop.rank = static_cast<int>(rank);
  stop.epoch = static_cast<int>(epoch);
  return stop;
}

void CheckEarlyStopRank(const EarlyStop& stop, int num_workers) {
  if (stop.rank < 0) return;
  if (stop.rank == 0 || stop.rank >= num_workers) {
    throw std::invalid_argument("--stop_after_epoch " + FLAGS_stop_after_epoch +
                                ": the rank must be a worker of the job other than 0 (1.." +
                                std::to_string(num_workers - 1) + "): worker 0 evaluates");
  }
}

}  // namespace linear
