// The logging vocabulary ps-lite's apps use: glog's LOG / CHECK macros, LL (an
// error-level log line, ps-lite's shorthand) and PS_VLOG(level) (logged when PS_VERBOSE
// is at least `level`).
#ifndef PS_LOGGING_H_
#define PS_LOGGING_H_

#include <glog/logging.h>

#include "ps/environment.h"

namespace ps {

// PS_VERBOSE as a level (ps-lite's meaning: 0 quiet, 1 control messages, 2 every
// message); read once.
inline int VerboseLevel() {
  static const int level = GetEnv("PS_VERBOSE", 0);
  return level;
}

}  // namespace ps

#ifndef LL
#define LL LOG(ERROR)
#endif
#ifndef PS_VLOG
#define PS_VLOG(level) LOG_IF(INFO, (level) <= ::ps::VerboseLevel())
#endif

#endif  // PS_LOGGING_H_
