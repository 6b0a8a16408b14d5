#include "ps/consistency.h"

#include <cerrno>
#include <cstdlib>

namespace ps {
namespace {

const char kAccepted[] = "expected bsp, asp or ssp:S with S a whole number from 0 to 1000000";

}  // namespace

Status ConsistencyModel::Parse(const std::string& text, ConsistencyModel* out) {
  if (text == "bsp" || text == "BSP") {
    *out = ConsistencyModel{kBsp, 0};
    return Status::OK();
  }
  if (text == "asp" || text == "ASP") {
    *out = ConsistencyModel{kAsp, 0};
    return Status::OK();
  }
  if (text.size() > 4 && (text.compare(0, 4, "ssp:") == 0 || text.compare(0, 4, "SSP:") == 0)) {
    const char* digits = text.c_str() + 4;
    char* end = nullptr;
    errno = 0;
    long long s = std::strtoll(digits, &end, 10);
    if (!errno && end != digits && !*end && *digits >= '0' && *digits <= '9' && s >= 0 &&
        s <= kMaxStaleness) {
      // ssp:0 is BSP, and is BSP everywhere (synchronous aggregation accepts it).
      *out = s == 0 ? ConsistencyModel{kBsp, 0} : ConsistencyModel{kSsp, static_cast<int>(s)};
      return Status::OK();
    }
  }
  return Status::InvalidArgument("consistency '" + text + "': " + kAccepted);
}

Status ConsistencyModel::FromWire(int kind, int staleness, ConsistencyModel* out) {
  if (kind < kAsp || kind > kSsp || staleness < 0 || staleness > kMaxStaleness ||
      (kind != kSsp && staleness != 0)) {
    return Status::InvalidArgument("consistency model (" + std::to_string(kind) + ", " +
                                   std::to_string(staleness) + ") out of range");
  }
  // ssp:0 is bsp, as Parse has it, so that a model from the wire compares equal.
  *out = kind == kSsp && staleness == 0 ? ConsistencyModel{kBsp, 0}
                                        : ConsistencyModel{static_cast<Kind>(kind), staleness};
  return Status::OK();
}

std::string ConsistencyModel::ToString() const {
  switch (kind) {
    case kBsp:
      return "bsp";
    case kSsp:
      return "ssp:" + std::to_string(staleness);
    default:
      return "asp";
  }
}

}  // namespace ps
