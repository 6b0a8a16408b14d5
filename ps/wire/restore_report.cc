#include "ps/internal/restore_report.h"

#include <cstdlib>

namespace ps {

std::string FormatRestoreReport(const RestoreReport& report) {
  return "checkpoint=" +
         std::string(report.from_replicas ? "2" : report.from_checkpoint ? "1" : "0") +
         " pushes=" + std::to_string(report.pushes) + " file=" + report.file;
}

bool ParseRestoreReport(const std::string& body, RestoreReport* report) {
  const std::string checkpoint = "checkpoint=", pushes = " pushes=", file = " file=";
  if (body.compare(0, checkpoint.size(), checkpoint) != 0) return false;
  size_t at = checkpoint.size();
  if (at >= body.size() || body[at] < '0' || body[at] > '2') return false;
  RestoreReport parsed;
  parsed.from_checkpoint = body[at] == '1';
  parsed.from_replicas = body[at] == '2';
  ++at;
  if (body.compare(at, pushes.size(), pushes) != 0) return false;
  at += pushes.size();
  size_t digits_end = at;
  while (digits_end < body.size() && body[digits_end] >= '0' && body[digits_end] <= '9') {
    ++digits_end;
  }
  if (digits_end == at || digits_end - at > 20) return false;
  const std::string digits = body.substr(at, digits_end - at);
  char* end = nullptr;
  parsed.pushes = std::strtoull(digits.c_str(), &end, 10);
  if (body.compare(digits_end, file.size(), file) != 0) return false;
  parsed.file = body.substr(digits_end + file.size());
  *report = parsed;
  return true;
}

}  // namespace ps
