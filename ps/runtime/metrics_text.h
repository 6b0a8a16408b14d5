// The job's metrics in the Prometheus text format (version 0.0.4), from the scheduler's
// JobReports: what the metrics endpoint serves (docs/operability.md lists every
// metric). Internal to the runtime.
#ifndef HERDPS_PS_RUNTIME_METRICS_TEXT_H_
#define HERDPS_PS_RUNTIME_METRICS_TEXT_H_

#include <string>

#include "job_reports.h"

namespace ps {

std::string MetricsText(const JobReports::Snapshot& snapshot, JobReports::Clock::time_point now);

}  // namespace ps

#endif  // HERDPS_PS_RUNTIME_METRICS_TEXT_H_
