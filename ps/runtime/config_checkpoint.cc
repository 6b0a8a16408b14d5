#include <cstdlib>
#include <string>

#include "config_fields.h"

namespace ps {
namespace config_fields {
namespace {

// One term of PS_CHECKPOINT_EVERY: "<seconds>", "<seconds>s" or "<count>pushes".
Status ParseEveryTerm(const std::string& term, Config* cfg) {
  const std::string pushes = "pushes";
  if (term.size() > pushes.size() &&
      term.compare(term.size() - pushes.size(), pushes.size(), pushes) == 0) {
    const std::string count = term.substr(0, term.size() - pushes.size());
    int64_t v = 0;
    Status s = ParseInt("PS_CHECKPOINT_EVERY (pushes)", count.c_str(), 1, INT64_MAX, &v);
    if (!s.ok()) return s;
    cfg->checkpoint_every_pushes = static_cast<uint64_t>(v);
    return Status::OK();
  }
  std::string seconds = term;
  if (!seconds.empty() && seconds.back() == 's') seconds.pop_back();
  double d = 0;
  Status s = ParseDouble("PS_CHECKPOINT_EVERY (seconds)", seconds.c_str(), 0.001, 1e9, &d);
  if (!s.ok()) return s;
  cfg->checkpoint_every_seconds = d;
  return Status::OK();
}

}  // namespace

Status ReadCheckpointSettings(const Getenv& getenv, Config* cfg) {
  const char* dir = Lookup(getenv, "PS_CHECKPOINT_DIR", nullptr);
  const char* every = Lookup(getenv, "PS_CHECKPOINT_EVERY", nullptr);
  if (!dir) {
    if (every) {
      return Status::InvalidArgument("PS_CHECKPOINT_EVERY='" + std::string(every) +
                                     "' is set but PS_CHECKPOINT_DIR is not: set the folder "
                                     "the servers write their checkpoints to");
    }
    return Status::OK();
  }
  cfg->checkpoint_dir = dir;
  if (!every) {
    cfg->checkpoint_every_seconds = Config::kDefaultCheckpointSeconds;
    return Status::OK();
  }
  const std::string text = every;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t comma = text.find(',', begin);
    if (comma == std::string::npos) comma = text.size();
    std::string term = text.substr(begin, comma - begin);
    if (term.empty()) {
      return Status::InvalidArgument("PS_CHECKPOINT_EVERY='" + text +
                                     "' has an empty term; expected e.g. 60s, 1000pushes "
                                     "or 60s,1000pushes");
    }
    Status s = ParseEveryTerm(term, cfg);
    if (!s.ok()) return s;
    begin = comma + 1;
  }
  return Status::OK();
}

}  // namespace config_fields
}  // namespace ps
