// The server's part: HerdPS's OptimizerServer applies Adam to every pushed gradient.
// Other optimizers: ps/optimizer.h; your own update rule: OptimizerServerOptions::rule.
#include "app.h"

namespace myapp {

std::unique_ptr<ps::OptimizerServer> StartServer(const Settings& settings) {
  ps::OptimizerServerOptions options;
  options.optimizer.kind = ps::OptimizerKind::kAdam;
  options.optimizer.lr = settings.lr;
  return std::make_unique<ps::OptimizerServer>(/*app_id=*/0, options);
}

}  // namespace myapp
