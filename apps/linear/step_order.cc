#include "step_order.h"

#include <cstdio>
#include <stdexcept>

#include "training_options.h"

DEFINE_string(order, "none",
              "the order of each worker's steps within an epoch: none (block order every "
              "epoch), rr (D-RR: each worker reshuffles, seeded), idgrab (each worker balances "
              "its own gradients), cdgrab (CD-GraB: the scheduler's order plugin balances all "
              "workers' gradients together) or fixed (one shuffle, kept); docs/orders.md");
DEFINE_uint64(order_seed, 0, "seed of the orders (D-RR shuffles, epoch 0); 0: --seed");
DEFINE_int32(order_projection, 0,
             "idgrab, cdgrab: balance seeded random projections of the gradients to this many "
             "floats instead of the gradients (for large models); 0: off");

namespace linear {

std::string OrderChoice::name() const { return none ? "none" : ps::OrderAlgorithmName(algorithm); }

void ValidateOrderFlags() {
  if (FLAGS_order != "none") {
    ps::OrderAlgorithm algorithm;
    if (!ps::ParseOrderAlgorithm(FLAGS_order, &algorithm).ok()) {
      throw std::invalid_argument("--order must be none, rr, idgrab, cdgrab or fixed, not '" +
                                  FLAGS_order + "'");
    }
  }
  if (FLAGS_order_projection < 0) throw std::invalid_argument("--order_projection must be >= 0");
  if (FLAGS_order_projection > 0 && FLAGS_order != "idgrab" && FLAGS_order != "cdgrab") {
    throw std::invalid_argument("--order_projection goes with --order idgrab or cdgrab");
  }
}

OrderChoice OrderChoiceFromFlags() {
  OrderChoice c;
  c.none = FLAGS_order == "none";
  if (!c.none) ps::ParseOrderAlgorithm(FLAGS_order, &c.algorithm);
  return c;
}

uint64_t OrderSeedFromFlags() { return FLAGS_order_seed != 0 ? FLAGS_order_seed : FLAGS_seed; }

StepOrder::StepOrder(const OrderChoice& choice, int slots, int dim, uint64_t seed,
                     int projection_dim)
    : slots_(slots) {
  if (choice.none) return;
  gradients_ = choice.algorithm == ps::OrderAlgorithm::kIdGrab ||
               choice.algorithm == ps::OrderAlgorithm::kCdGrab;
  dense_.assign(static_cast<size_t>(dim), 0.0f);
  ps::OrderOptions o;
  o.algorithm = choice.algorithm;
  o.num_examples = slots;
  o.dim = dim;
  o.seed = seed;
  o.projection_dim = projection_dim;
  client_ = std::make_unique<ps::OrderClient>(o);
}

StepOrder::~StepOrder() = default;  // the client's destructor finishes it

void StepOrder::Check(const ps::Status& s, const char* what) const {
  if (s.ok()) return;
  throw std::runtime_error(std::string("example order: ") + what + ": " + s.ToString());
}

void StepOrder::Report(int position, const ps::SArray<ps::Key>& keys,
                       const ps::SArray<float>& values) {
  if (!client_) return;
  if (gradients_) {
    for (size_t i = 0; i < keys.size(); ++i) dense_[keys[i]] = values[i];
  }
  ps::Status s = client_->Report(position, dense_.data(), dense_.size());
  if (gradients_) {
    for (size_t i = 0; i < keys.size(); ++i) dense_[keys[i]] = 0.0f;
  }
  Check(s, "reporting a gradient");
}

void StepOrder::ReportEmpty(int position) {
  if (!client_) return;
  Check(client_->Report(position, dense_.data(), dense_.size()), "reporting an empty step");
}

void StepOrder::NextEpoch() {
  if (!client_) return;
  const std::vector<int> before = client_->order();
  Check(client_->NextEpoch(), "getting the next epoch's order");
  if (client_->order() != before) ++changes_;
}

void StepOrder::Finish() {
  if (!client_ || finished_) return;
  finished_ = true;
  Check(client_->Finish(), "finishing");
}

std::string StepOrder::Head(int count) const {
  std::string text;
  for (int p = 0; p < count && p < slots_; ++p) {
    if (p > 0) text += ' ';
    text += std::to_string(slot(p));
  }
  return text;
}

uint64_t StepOrder::Fingerprint() const {
  uint64_t h = 14695981039346656037ull;
  for (int p = 0; p < slots_; ++p) {
    uint32_t v = static_cast<uint32_t>(slot(p));
    for (int b = 0; b < 4; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h;
}

}  // namespace linear
