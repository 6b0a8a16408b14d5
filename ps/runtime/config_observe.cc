// PS_STALL_REPORT and PS_METRICS_PORT: what the scheduler tells about a running job
// (docs/operability.md).
#include <cstdlib>
#include <string>

#include "config_fields.h"

namespace ps {
namespace config_fields {

Status ReadObservability(const Getenv& getenv, Config* cfg) {
  const char* text = nullptr;
  if ((text = Lookup(getenv, "PS_STALL_REPORT", nullptr))) {
    Status s = ParseDouble("PS_STALL_REPORT", text, 0, 86400, &cfg->stall_report_s);
    if (!s.ok()) return s;
  }
  if ((text = Lookup(getenv, "PS_METRICS_PORT", nullptr))) {
    // "PORT" (on 127.0.0.1) or "ADDRESS:PORT".
    const std::string value = text;
    const size_t colon = value.rfind(':');
    std::string port = value;
    if (colon != std::string::npos) {
      cfg->metrics_host = value.substr(0, colon);
      port = value.substr(colon + 1);
      if (cfg->metrics_host.empty()) {
        return Status::InvalidArgument("PS_METRICS_PORT='" + value +
                                       "' has an empty address; expected PORT or ADDRESS:PORT");
      }
    }
    int64_t v = 0;
    Status s = ParseInt("PS_METRICS_PORT (port)", port.c_str(), 1, 65535, &v);
    if (!s.ok()) return s;
    cfg->metrics_port = static_cast<int>(v);
  }
  return Status::OK();
}

}  // namespace config_fields
}  // namespace ps
