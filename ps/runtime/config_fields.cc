#include "config_fields.h"

#include <cerrno>
#include <cstdlib>
#include <string>

namespace ps {
namespace config_fields {

// Value of `name`, else of its ps-lite alias, else nullptr.
const char* Lookup(const Getenv& getenv, const char* name, const char* alias) {
  const char* v = getenv(name);
  if ((!v || !*v) && alias) v = getenv(alias);
  return v && *v ? v : nullptr;
}

Status ParseInt(const char* name, const char* text, int64_t lo, int64_t hi, int64_t* out) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno || end == text || *end || v < lo || v > hi) {
    return Status::InvalidArgument(std::string(name) + "='" + text + "' is not an integer in [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = v;
  return Status::OK();
}

Status ParseDouble(const char* name, const char* text, double lo, double hi, double* out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno || end == text || *end || !(v >= lo && v <= hi)) {
    return Status::InvalidArgument(std::string(name) + "='" + text + "' is not a number in [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = v;
  return Status::OK();
}

Status ParseBool(const char* name, const char* text, bool* out) {
  std::string t = text;
  if (t == "1" || t == "true" || t == "yes" || t == "on") {
    *out = true;
  } else if (t == "0" || t == "false" || t == "no" || t == "off") {
    *out = false;
  } else {
    return Status::InvalidArgument(std::string(name) + "='" + t + "' is not 0 or 1");
  }
  return Status::OK();
}

}  // namespace config_fields
}  // namespace ps
