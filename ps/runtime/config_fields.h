// The pieces Config::FromEnvironment is made of (ps/runtime/config*.cc): reading one
// variable with its ps-lite alias, parsing a field with its bounds into a message that
// names the variable, and the readers of the settings that need more than one field.
// Internal to the runtime.
#ifndef HERDPS_PS_RUNTIME_CONFIG_FIELDS_H_
#define HERDPS_PS_RUNTIME_CONFIG_FIELDS_H_

#include <cstdint>
#include <functional>

#include "ps/internal/config.h"
#include "ps/status.h"

namespace ps {
namespace config_fields {

using Getenv = std::function<const char*(const char*)>;

// Value of `name`, else of its ps-lite alias (may be null), else nullptr; an empty
// value counts as unset.
const char* Lookup(const Getenv& getenv, const char* name, const char* alias);
// `text` as a number in [lo, hi], else InvalidArgument naming `name` and the bounds.
Status ParseInt(const char* name, const char* text, int64_t lo, int64_t hi, int64_t* out);
Status ParseDouble(const char* name, const char* text, double lo, double hi, double* out);
// 1/0, true/false, yes/no, on/off.
Status ParseBool(const char* name, const char* text, bool* out);

// Where this node listens and is reached (config_address.cc): PS_NODE_HOST,
// PS_INTERFACE, the ports, PS_RANK. Needs the role and the scheduler's address read.
Status ReadNodeAddress(const Getenv& getenv, Config* cfg);
// PS_SECURE and the job's CURVE key (config_curve.cc).
Status ReadCurveSettings(const Getenv& getenv, Config* cfg);
// PS_CHECKPOINT_DIR and PS_CHECKPOINT_EVERY (config_checkpoint.cc).
Status ReadCheckpointSettings(const Getenv& getenv, Config* cfg);
// PS_STALL_REPORT and PS_METRICS_PORT (config_observe.cc).
Status ReadObservability(const Getenv& getenv, Config* cfg);

}  // namespace config_fields
}  // namespace ps

#endif  // HERDPS_PS_RUNTIME_CONFIG_FIELDS_H_
