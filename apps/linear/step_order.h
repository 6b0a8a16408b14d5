// StepOrder: the order in which a linear worker visits the step slots of an epoch
// (--order). A slot is one mini-batch of --batch_size consecutive rows of the worker's
// block (slot j: rows [j*B, (j+1)*B) of the block), so with --batch_size 1 it is one
// example. `none` visits the slots in block order every epoch, as linear always did;
// rr, idgrab, cdgrab and fixed hand the permutation to a ps::OrderClient
// (docs/orders.md) and report each step's gradient to it, densely (one float per model
// key, the bias last).
//
// Every worker has the same number of slots (the trainer pads the shorter blocks: a
// slot past a block's end is an empty step), as cdgrab requires; an empty step reports
// a zero gradient.
//
// Not thread-safe: the worker's training thread owns it. Errors of the order client
// (the plugin refused, the scheduler is lost) throw std::runtime_error; construction
// throws ps::Error as OrderClient's does.
#pragma once

#include <gflags/gflags.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ps/base.h"
#include "ps/order_client.h"
#include "ps/sarray.h"

DECLARE_string(order);
DECLARE_uint64(order_seed);
DECLARE_int32(order_projection);

namespace linear {

// --order: `none` (block order, no client) or one of ps::OrderAlgorithm's names.
struct OrderChoice {
  bool none = true;
  ps::OrderAlgorithm algorithm = ps::OrderAlgorithm::kRr;
  std::string name() const;
};

// Checks --order, --order_projection. Throws std::invalid_argument naming the flag.
void ValidateOrderFlags();
// --order; valid once ValidateOrderFlags passed.
OrderChoice OrderChoiceFromFlags();
// --order_seed, or --seed when it is 0.
uint64_t OrderSeedFromFlags();

class StepOrder {
 public:
  // On a worker after ps::Start. `slots`: step slots per epoch, the same on every worker;
  // `dim`: the model's keys (features and bias). With cdgrab it waits for the plugin to
  // accept epoch 0 (see OrderClient).
  StepOrder(const OrderChoice& choice, int slots, int dim, uint64_t seed, int projection_dim);
  ~StepOrder();
  StepOrder(const StepOrder&) = delete;
  StepOrder& operator=(const StepOrder&) = delete;

  bool none() const { return client_ == nullptr; }
  int slots() const { return slots_; }
  // The slot to run at `position` (0..slots-1) of this epoch.
  int slot(int position) const { return client_ ? client_->order()[position] : position; }

  // The step at `position` pushed `values` for `keys` (a key is its index in the dense
  // gradient). Positions come in order 0, 1, ... within an epoch.
  void Report(int position, const ps::SArray<ps::Key>& keys, const ps::SArray<float>& values);
  // The slot at `position` has no rows on this worker: a zero gradient.
  void ReportEmpty(int position);
  // Ends the epoch; the next order becomes current (cdgrab: may wait for slower workers).
  void NextEpoch();
  // This worker runs no more epochs (the plugin stops waiting for it). Idempotent.
  void Finish();

  // The first `count` slots of this epoch's order, space-separated.
  std::string Head(int count) const;
  // A 64-bit FNV-1a hash of this epoch's order.
  uint64_t Fingerprint() const;
  // Epoch ends after which the order differed from the one before.
  int changes() const { return changes_; }

 private:
  void Check(const ps::Status& s, const char* what) const;

  const int slots_;
  bool gradients_ = false;    // idgrab and cdgrab balance gradients; rr and fixed count
  std::vector<float> dense_;  // all zeros between reports
  std::unique_ptr<ps::OrderClient> client_;  // null for `none`
  int changes_ = 0;
  bool finished_ = false;
};

}  // namespace linear
