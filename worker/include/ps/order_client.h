// OrderClient: the order in which this worker visits its examples, epoch by epoch, for
// distributed SGD with CD-GraB (Cooper et al., NeurIPS 2023) or its baselines.
//
//   ps::OrderClient orders({ps::OrderAlgorithm::kCdGrab, n, dim, /*seed=*/1});
//   for (int epoch = 0; epoch < epochs; ++epoch) {
//     for (int pos = 0; pos < n; ++pos) {
//       int example = orders.order()[pos];
//       ...compute the gradient g (dim floats) of `example`, step...
//       orders.Report(pos, g.data(), g.size());
//     }
//     ps::Status s = orders.NextEpoch();   // the next order; may wait for slower workers
//   }
//   orders.Finish();                       // before ps::Finalize (the destructor does it)
//
// Algorithms (epoch 0 is DrrOrder(n, seed, rank, 0) for all four):
//  - rr (D-RR): each worker reshuffles independently, DrrOrder(n, seed, rank, epoch);
//  - fixed: the epoch-0 order forever;
//  - idgrab (ID-GraB): each worker balances its own pair differences with its own running
//    sum, locally (a PairBalancer of one worker); nothing is sent;
//  - cdgrab (CD-GraB): the pair differences go, batched and asynchronously, to the order
//    plugin on the scheduler, which balances every worker's pairs with one running sum
//    and sends each worker its next order (docs/orders.md has the exact rule).
// The example unit is the app's choice: n may count examples or micro-batches. Odd n: the
// last example of each order stays out of the balancing and stays last.
//
// With cdgrab every worker of the job must run an OrderClient with cdgrab and the same n,
// dim, seed and projection: the plugin waits for each live worker that has not finished
// before it starts an epoch.
//
// Thread safety: one thread (the app's) calls the methods; the plugin's messages arrive
// on the client's own thread.
#ifndef PS_ORDER_CLIENT_H_
#define PS_ORDER_CLIENT_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ps/status.h"

namespace ps {

class PairBalancer;
class RandomProjection;
class SimpleApp;

enum class OrderAlgorithm { kRr, kIdGrab, kCdGrab, kFixed };

// "rr", "idgrab", "cdgrab" or "fixed" into *out; InvalidArgument naming the choices.
Status ParseOrderAlgorithm(const std::string& text, OrderAlgorithm* out);
const char* OrderAlgorithmName(OrderAlgorithm algorithm);

struct OrderOptions {
  OrderAlgorithm algorithm = OrderAlgorithm::kRr;
  int num_examples = 0;  // n: this worker's examples (or micro-batches), >= 1
  int dim = 0;           // floats per gradient given to Report, >= 1
  uint64_t seed = 0;     // D-RR shuffles and the projection; the same on every worker
  // cdgrab: pair differences per message. A message costs no round trip; at most 8 are
  // unanswered at a time (the 9th waits for the oldest answer).
  int batch_pairs = 64;
  // > 0: balance seeded random projections of the gradients to this many floats
  // (RandomProjection, the same on every worker) instead of the gradients: for large
  // models. 0: off.
  int projection_dim = 0;
};

class OrderClient {
 public:
  // On a worker, after ps::Start. With cdgrab it tells the plugin that this worker begins
  // epoch 0 and waits for the answer. Throws ps::Error for options out of range, on a
  // node that is not a worker, when another OrderClient with cdgrab exists in the
  // process, and when the plugin refuses (options that differ from another worker's) or
  // cannot be reached.
  explicit OrderClient(const OrderOptions& options);
  // Finish(), then stops the client.
  ~OrderClient();
  OrderClient(const OrderClient&) = delete;
  OrderClient& operator=(const OrderClient&) = delete;

  const OrderOptions& options() const { return options_; }
  // This epoch's order: a permutation of 0..n-1. Changes only in NextEpoch.
  const std::vector<int>& order() const { return order_; }
  // 0 in the first epoch, +1 per successful NextEpoch.
  int64_t epoch() const { return epoch_; }

  // The gradient (options().dim floats) of the example at `position` of order(); the
  // positions of an epoch must come in order 0, 1, 2, ... The client keeps the gradient of
  // an even position and, at the odd one after it, balances the pair difference
  // g[2k] - g[2k+1] (idgrab) or queues it for the plugin (cdgrab: sent every batch_pairs
  // pairs and at the last pair, without waiting for the answer). rr and fixed only count.
  // InvalidArgument for a position out of turn, a wrong length or non-finite values (the
  // report is then ignored); with cdgrab, the first failure of a message to the plugin
  // (Unavailable when the scheduler is lost), after which the client only fails.
  Status Report(int position, const float* grad, size_t len);
  // Report for a sparse gradient: values[i] at index indices[i] (i < count, any order,
  // each index below options().dim and at most once), 0 everywhere else; the orders are
  // those of Report with that dense gradient. Costs O(count) besides what the algorithm
  // does with the gradient (rr and fixed: nothing); the first call allocates a zeroed
  // vector of dim floats and dim flags, kept for the client's life. InvalidArgument,
  // ignoring the report, for an index out of range or repeated, and as Report.
  Status ReportSparse(int position, const uint64_t* indices, const float* values,
                      size_t count);

  // Ends the epoch and makes the next order current. idgrab and cdgrab need every
  // position of the epoch reported first (else InvalidArgument, nothing changes). cdgrab
  // waits until the plugin has answered every message and has sent this worker's next
  // order, which needs the other workers' pairs up to this worker's last one: it waits for
  // slower workers, however slow, while they live (one that dies, leaves or finishes is
  // not waited for); then it tells the plugin that the next epoch begins. Unavailable if
  // the node gives up or the client is finished; a refusal by the plugin as its Status.
  Status NextEpoch();

  // This worker begins no more epochs: with cdgrab the plugin stops waiting for it. Call it
  // (or destroy the client) before ps::Finalize when the other workers may still be
  // running epochs. Later Report and NextEpoch calls fail. Idempotent; OK for rr, fixed
  // and idgrab.
  Status Finish();

 private:
  // Balances or queues even_ - odd, the difference of pair `pair`.
  Status ReportPair(int pair, const float* odd);
  // cdgrab: sends the queued pairs as one message.
  void SendBatch();
  // cdgrab: sends a message without waiting for its answer.
  void SendAsync(int head, const std::string& body);
  // cdgrab: waits for the oldest answers until at most max_in_flight are outstanding.
  void Drain(size_t max_in_flight);
  void Fail(const Status& s);
  // The plugin's kOrderNext, on the client's thread.
  Status OnNextOrder(const std::string& body);

  const OrderOptions options_;
  const int rank_;
  const int dim_;  // of the vectors balanced: projection_dim, or dim
  std::vector<int> order_;
  int64_t epoch_ = 0;
  int reported_ = 0;            // positions of this epoch reported
  std::vector<float> even_;     // the gradient kept from the last even position (dim_)
  std::vector<float> scratch_;  // the projection of the current gradient (dim_)
  std::vector<float> sparse_;   // ReportSparse's dense gradient (dim), zero between calls
  std::vector<bool> touched_;   // ReportSparse: indices set in sparse_, false between calls
  std::unique_ptr<RandomProjection> projection_;  // null unless projection_dim > 0
  std::unique_ptr<PairBalancer> local_;           // idgrab: this worker's own balancer

  // cdgrab. Owned by the app's thread: the batch and the messages in flight.
  std::vector<float> batch_;   // queued pair differences
  int batch_first_ = 0;        // the pair index of the first queued one
  std::deque<int> in_flight_;  // timestamps of unanswered messages, oldest first
  Status failed_;              // sticky: the first failure

  std::mutex mu_;  // guards next_order_, next_epoch_, aborted_
  std::condition_variable cv_;
  int64_t next_epoch_ = 1;          // the epoch whose order the plugin will send next
  std::vector<int> next_order_;     // its order, once it came; empty until then
  std::string aborted_;             // why waits end (the client is going away)
  bool finished_ = false;           // app thread only
  std::unique_ptr<SimpleApp> app_;  // last: destroyed first; null unless cdgrab
};

}  // namespace ps

#endif  // PS_ORDER_CLIENT_H_
