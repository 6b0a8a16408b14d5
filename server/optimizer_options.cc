// OptimizerOptions: validation and the text form that travels to every server.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <utility>
#include <vector>

#include "optimizer_rules.h"
#include "ps/optimizer.h"

namespace ps {
namespace {

const char* kNames[] = {"sgd", "momentum", "nesterov", "adagrad",
                        "rmsprop", "adam", "amsgrad", "ftrl"};

// The numeric fields, by name, in the order ToString writes them.
std::vector<std::pair<const char*, double OptimizerOptions::*>> Fields() {
  return {{"lr", &OptimizerOptions::lr},
          {"momentum", &OptimizerOptions::momentum},
          {"beta1", &OptimizerOptions::beta1},
          {"beta2", &OptimizerOptions::beta2},
          {"eps", &OptimizerOptions::eps},
          {"adagrad_eps", &OptimizerOptions::adagrad_eps},
          {"rmsprop_alpha", &OptimizerOptions::rmsprop_alpha},
          {"ftrl_alpha", &OptimizerOptions::ftrl_alpha},
          {"ftrl_beta", &OptimizerOptions::ftrl_beta},
          {"ftrl_l1", &OptimizerOptions::ftrl_l1},
          {"ftrl_l2", &OptimizerOptions::ftrl_l2},
          {"weight_decay", &OptimizerOptions::weight_decay}};
}

Status OutOfRange(const char* field, double value, const char* range) {
  std::ostringstream os;
  os << "optimizer option " << field << "=" << value << " is out of range (" << range << ")";
  return Status::InvalidArgument(os.str());
}

}  // namespace

const char* OptimizerName(OptimizerKind kind) { return kNames[static_cast<int>(kind)]; }

Status ParseOptimizerKind(const std::string& name, OptimizerKind* kind) {
  for (int i = 0; i < 8; ++i) {
    if (name == kNames[i]) {
      *kind = static_cast<OptimizerKind>(i);
      return Status::OK();
    }
  }
  return Status::InvalidArgument("unknown optimizer '" + name +
                                 "' (sgd, momentum, nesterov, adagrad, rmsprop, adam, amsgrad, "
                                 "ftrl)");
}

Status OptimizerOptions::Validate() const {
  for (const auto& f : Fields()) {
    if (!std::isfinite(this->*(f.second))) return OutOfRange(f.first, this->*(f.second), "finite");
  }
  if (lr <= 0) return OutOfRange("lr", lr, "> 0");
  if (momentum < 0 || momentum >= 1) return OutOfRange("momentum", momentum, "[0, 1)");
  if (beta1 < 0 || beta1 >= 1) return OutOfRange("beta1", beta1, "[0, 1)");
  if (beta2 < 0 || beta2 >= 1) return OutOfRange("beta2", beta2, "[0, 1)");
  if (eps <= 0) return OutOfRange("eps", eps, "> 0");
  if (adagrad_eps <= 0) return OutOfRange("adagrad_eps", adagrad_eps, "> 0");
  if (rmsprop_alpha < 0 || rmsprop_alpha >= 1) {
    return OutOfRange("rmsprop_alpha", rmsprop_alpha, "[0, 1)");
  }
  if (ftrl_alpha <= 0) return OutOfRange("ftrl_alpha", ftrl_alpha, "> 0");
  if (ftrl_beta < 0) return OutOfRange("ftrl_beta", ftrl_beta, ">= 0");
  if (ftrl_l1 < 0) return OutOfRange("ftrl_l1", ftrl_l1, ">= 0");
  if (ftrl_l2 < 0) return OutOfRange("ftrl_l2", ftrl_l2, ">= 0");
  if (weight_decay < 0) return OutOfRange("weight_decay", weight_decay, ">= 0");
  return Status::OK();
}

std::string OptimizerOptions::ToString() const {
  std::string out = OptimizerName(kind);
  char buf[64];
  for (const auto& f : Fields()) {
    std::snprintf(buf, sizeof(buf), " %s=%.17g", f.first, this->*(f.second));
    out += buf;
  }
  return out;
}

Status OptimizerOptions::Parse(const std::string& text, OptimizerOptions* out) {
  std::istringstream in(text);
  std::string word;
  OptimizerOptions o;
  if (!(in >> word)) return Status::InvalidArgument("empty optimizer description");
  Status s = ParseOptimizerKind(word, &o.kind);
  if (!s.ok()) return s;
  const auto fields = Fields();
  while (in >> word) {
    size_t eq = word.find('=');
    std::string name = word.substr(0, eq);
    bool known = false;
    for (const auto& f : fields) {
      if (name != f.first) continue;
      known = true;
      // Before `value`: without '=', c_str() + eq would overflow the pointer (undefined).
      if (eq == std::string::npos) {
        return Status::InvalidArgument("optimizer option '" + word + "' is not name=number");
      }
      const char* value = word.c_str() + eq + 1;
      char* end = nullptr;
      errno = 0;
      double v = std::strtod(value, &end);
      if (errno || end == value || *end) {
        return Status::InvalidArgument("optimizer option '" + word + "' is not name=number");
      }
      o.*(f.second) = v;
    }
    if (!known) return Status::InvalidArgument("unknown optimizer option '" + name + "'");
  }
  s = o.Validate();
  if (!s.ok()) return s;
  *out = o;
  return Status::OK();
}

std::unique_ptr<Optimizer> Optimizer::Create(const OptimizerOptions& options) {
  return CreateOptimizer(options);
}

}  // namespace ps
