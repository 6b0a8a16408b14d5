// Resident memory of this process, from /proc/self/status (Linux).
#ifndef HERDPS_APPS_BENCH_NODE_MEMORY_H_
#define HERDPS_APPS_BENCH_NODE_MEMORY_H_

#include <fstream>
#include <string>

namespace bench {

// The value in MiB of a "VmRSS:" / "VmHWM:" style line, or -1 if absent.
inline double ProcStatusMiB(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  }
  return -1;
}
inline double CurrentRssMiB() { return ProcStatusMiB("VmRSS"); }
inline double PeakRssMiB() { return ProcStatusMiB("VmHWM"); }

}  // namespace bench

#endif  // HERDPS_APPS_BENCH_NODE_MEMORY_H_
