// Internal: the factory behind Optimizer::Create.
#ifndef HERDPS_SERVER_OPTIMIZER_RULES_H_
#define HERDPS_SERVER_OPTIMIZER_RULES_H_

#include <memory>

#include "ps/optimizer.h"

namespace ps {

std::unique_ptr<Optimizer> CreateOptimizer(const OptimizerOptions& options);

}  // namespace ps

#endif  // HERDPS_SERVER_OPTIMIZER_RULES_H_
