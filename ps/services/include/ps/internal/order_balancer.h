// Example orders for distributed SGD: CD-GraB's pair balancing (Cooper et al., NeurIPS
// 2023), its baselines ID-GraB and D-RR, and an optional random projection. Pure
// computation, no networking: the scheduler's order plugin and the apps both use it.
//
// The rule. Worker i visits its n local examples in the order pi_i. For pair k it sends
// d = g(pi_i[2k]) - g(pi_i[2k+1]). One running sum h (float64, zero at the start of every
// epoch) takes the pairs pair index outer, worker rank inner:
//
//   s = +1 if <h, d> <= 0 else -1      (dot product in float64, left to right; ties: +1)
//   h = h + s * d
//   s = +1: next_i[k] = pi_i[2k],   next_i[n-1-k] = pi_i[2k+1]
//   s = -1: next_i[k] = pi_i[2k+1], next_i[n-1-k] = pi_i[2k]
//
// so the next order holds the "+1" examples in visiting order, then the "-1" examples in
// reverse. Odd n: the last visited example, pi_i[n-1], stays out of the balancing and keeps
// its place at the end (next_i[n-1] = pi_i[n-1]); the pairs fill slots 0..n-2 (read n-1 for
// n in the rule above).
//
// ID-GraB (each worker balances its own pairs with its own h) is a PairBalancer with one
// worker, one per worker. D-RR (each worker reshuffles independently) is DrrOrder.
#ifndef PS_INTERNAL_ORDER_BALANCER_H_
#define PS_INTERNAL_ORDER_BALANCER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "ps/status.h"

namespace ps {

// D-RR: worker `worker`'s order of its `num_examples` examples in epoch `epoch`, a uniformly
// random permutation of 0..num_examples-1 that depends only on (seed, worker, epoch).
// Identical on every platform: std::mt19937_64 with HerdPS's own Fisher-Yates and bounded
// draws (std::shuffle and std::uniform_int_distribution differ between libstdc++ and
// libc++). An empty vector when num_examples <= 0.
std::vector<int> DrrOrder(int num_examples, uint64_t seed, int worker, int64_t epoch);

// CD-GraB's balancer: one running sum h shared by `num_workers` workers with
// `num_examples` local examples each and gradients of `dim` floats.
//
// Pairs may arrive in any interleaving across workers (a fast worker's pair 3 before a slow
// one's pair 0), but each worker's own pairs in order 0, 1, 2, ... The balancer processes a
// pair as soon as every pair before it in the processing order (pair index outer, worker
// rank inner) has been processed, and buffers it until then. Memory: h (dim doubles), the
// orders and signs (O(num_workers * num_examples) ints), plus the buffered pairs, which are
// exactly those waiting for a slower worker: if no live worker has sent more than `a` pairs
// beyond the slowest live one, at most (num_workers - 1) * a pairs are buffered (under BSP,
// a <= 1). pending_pairs() reports the count.
//
// A worker that dies or leaves is removed (RemoveWorker, or an empty order in BeginEpoch):
// nobody waits for it any more, its buffered pairs are dropped, the pairs it already sent
// stay in h, and its next order is DrrOrder(num_examples, seed, worker, epoch() + 1).
//
// Errors: input that comes from the network or an app (a wrong worker index, a pair out of
// order for its worker, a wrong length, non-finite values, an order that is not a
// permutation) is refused with a Status and changes nothing. Sizes that make no sense at
// construction throw ps::Error.
//
// Thread safety: none. One thread (the order plugin's, or the app's) owns a balancer.
class PairBalancer {
 public:
  // Throws ps::Error unless num_workers >= 1, num_examples >= 0 and dim >= 1. `seed` picks
  // the D-RR orders of removed workers.
  PairBalancer(int num_workers, int num_examples, int dim, uint64_t seed = 0);

  int num_workers() const { return num_workers_; }
  int num_examples() const { return num_examples_; }
  int num_pairs() const { return num_examples_ / 2; }
  int dim() const { return dim_; }
  // 0 during the first epoch, +1 per BeginEpoch; -1 before the first BeginEpoch.
  int64_t epoch() const { return epoch_; }

  // Starts an epoch: h = 0, no pairs, no signs. orders[i] is worker i's order pi_i this
  // epoch, a permutation of 0..num_examples-1, or empty for a worker that is not taking
  // part (removed from the start). An unfinished epoch is discarded. On error (wrong count
  // of orders, an order that is not a permutation) the balancer is left as it was.
  Status BeginEpoch(std::vector<std::vector<int>> orders);

  // Worker `worker`'s pair `pair`: diff[0..len) = g(pi[2*pair]) - g(pi[2*pair+1]), copied
  // if it must wait (the caller keeps ownership). `pair` must be the worker's next one
  // (0, then 1, ...), `len` must equal dim(), and every value must be finite. Refused
  // (InvalidArgument) outside an epoch, for a removed worker, or for bad input.
  Status AddPair(int worker, int pair, const float* diff, size_t len);

  // Stops waiting for `worker` this epoch (it died or left); see the class comment. Pairs
  // of other workers that were waiting for it are processed now. Removing a removed worker
  // again is OK; a worker index out of range is InvalidArgument.
  Status RemoveWorker(int worker);

  // Whether `worker` still takes part in this epoch (false after removal or outside an
  // epoch).
  bool IsActive(int worker) const;
  // Whether worker's next order is known: all its pairs are processed, or it was removed.
  bool OrderReady(int worker) const;
  // Whether every worker's next order is known.
  bool EpochDone() const;

  // Worker's next order into *order (a permutation of 0..num_examples-1). InvalidArgument
  // for a bad index or outside an epoch, Unavailable while OrderReady(worker) is false.
  Status NextOrder(int worker, std::vector<int>* order) const;

  // The sign chosen for worker's pair `pair` this epoch: +1 or -1; 0 while not processed,
  // for a pair dropped by a removal, or for indices out of range.
  int Sign(int worker, int pair) const;

  // Pairs received and waiting for a slower worker now, and the most at any time this epoch.
  size_t pending_pairs() const { return pending_; }
  size_t peak_pending_pairs() const { return peak_pending_; }

 private:
  struct WorkerState {
    bool active = false;
    int received = 0;                        // pairs accepted so far this epoch
    std::vector<int> order;                  // pi_i
    std::vector<int> next;                   // next_i, filled as pairs are processed
    std::vector<int8_t> signs;               // per pair: +1, -1, or 0 (not processed)
    std::deque<std::vector<float>> waiting;  // pairs [received - waiting.size(), received)
  };

  // Balances worker's pair `pair` (the one at the cursor) and records sign and slots.
  void Process(int worker, int pair, const float* diff);
  // Moves the cursor past processed pairs and removed workers, processing buffered pairs
  // that have become next.
  void Advance();

  int num_workers_;
  int num_examples_;
  int dim_;
  uint64_t seed_;
  int64_t epoch_ = -1;
  std::vector<double> h_;
  std::vector<WorkerState> workers_;
  // The next pair to process: (cursor_pair_, cursor_worker_); cursor_pair_ == num_pairs()
  // once the epoch is done. Everything before it in processing order is processed.
  int cursor_pair_ = 0;
  int cursor_worker_ = 0;
  size_t pending_ = 0;  // sum of waiting.size() over workers
  size_t peak_pending_ = 0;
};

// A seeded random projection from `in_dim` to `out_dim` floats, for balancing large models
// on sketches of their gradients (optional: the orders then follow the sketches). Entries
// are +-1/sqrt(out_dim) (Achlioptas), so inner products are preserved in expectation. The
// matrix is a function of (seed, row, column) computed on the fly, never stored: every
// worker with the same seed projects identically, on any platform, in O(out_dim) memory.
// Being linear, it commutes with pair differences (up to rounding). Thread safety: const
// methods only, so any number of threads may use one.
class RandomProjection {
 public:
  // Throws ps::Error unless in_dim >= 1 and out_dim >= 1.
  RandomProjection(int in_dim, int out_dim, uint64_t seed);
  int in_dim() const { return in_dim_; }
  int out_dim() const { return out_dim_; }
  // out[0..out_dim) = P * in[0..in_len); InvalidArgument unless in_len == in_dim and
  // out_len == out_dim. Accumulates in float64.
  Status Project(const float* in, size_t in_len, float* out, size_t out_len) const;

 private:
  int in_dim_;
  int out_dim_;
  uint64_t seed_;
};

}  // namespace ps

#endif  // PS_INTERNAL_ORDER_BALANCER_H_
