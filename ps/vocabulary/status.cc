#include "ps/status.h"

namespace ps {

Status Status::FromWire(int code, std::string message) {
  if (code < 0 || code > static_cast<int>(Code::kUnimplemented)) {
    return Status(Code::kInternal,
                  "unknown status code " + std::to_string(code) + ": " + message);
  }
  return Status(static_cast<Code>(code), std::move(message));
}

std::string Status::ToString() const {
  static const char* kNames[] = {"OK",      "InvalidArgument", "NotFound",
                                 "Unavailable", "Timeout",     "DataLoss",
                                 "Internal", "Unimplemented"};
  if (ok()) return "OK";
  return std::string(kNames[static_cast<int>(code_)]) + ": " + message_;
}

}  // namespace ps
