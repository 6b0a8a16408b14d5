// The order plugin (ps/services/order_plugin.h) on the scheduler, driven through its protocol
// (ps/internal/order_protocol.h) by the workers of a small job: requests with bodies
// from the input, requests built to be valid so that a run gets past the first epoch,
// and workers that die or leave in between.
//
// Input: u8 workers (1 + mod 4), then up to 256 steps, each a u8 step kind (mod 4):
//   0  a request from the input: u8 sender (mod workers + 1; the last is the server, no
//      worker of the job), u8 head (mod 6), u16 body length, the body;
//   1  a valid kOrderBegin from worker u8 (mod workers): its next epoch, the job's n,
//      dim and seed (or, before the first: n = 1 + u8 mod 16, dim = 1 + u8 mod 4, seed
//      0), and the order the plugin sent it for that epoch (for epoch 0: 0..n-1 rotated
//      by u8);
//   2  a kOrderPairs from worker u8 (mod workers) with its next pair index: u8 count
//      (1 + mod the pairs left), then count * dim floats from the input (none above
//      2^16 floats in all);
//   3  worker u8 (mod workers) dies (bit 7 of that byte set) or leaves.
//
// Properties: every request gets exactly one answer, never an Internal error (that
// would be a HerdPS bug); whatever the plugin sends is a kOrderNext, to a live worker,
// whose body decodes to a permutation of the job's n examples for the epoch after the
// worker's current one; no CHECK in the plugin or its balancer fails.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "order_plugin.h"
#include "ps/internal/order_protocol.h"
#include "ps/simple_app.h"
#include "recording_context.h"

namespace {

using ps::fuzz::RecordingContext;

constexpr int kMaxSteps = 256;
constexpr size_t kMaxPairFloats = 1 << 16;

// What the fuzzer knows of a worker from the plugin's answers and notifications.
struct WorkerView {
  int64_t begun = -1;  // the last epoch the plugin let it begin
  int received = 0;    // pairs of that epoch the plugin took
  int64_t next_epoch = -1;
  std::vector<int> next;  // the order the plugin sent for next_epoch
};

// The job's settings, once the plugin took a first kOrderBegin.
struct JobView {
  bool configured = false;
  int num_examples = 0;
  int dim = 0;
  uint64_t seed = 0;
};

class Driver {
 public:
  explicit Driver(int workers)
      : ctx_(ps::kOrderAppId, workers), workers_(workers), views_(workers) {
    plugin_.OnStart(&ctx_);
    CheckSent();
  }

  void Step(ps::fuzz::InputReader& in) {
    switch (in.Take<uint8_t>() % 4) {
      case 0: {
        const int sender = in.Take<uint8_t>() % (workers_ + 1);
        const int head = in.Take<uint8_t>() % 6;
        Request(sender, head, in.TakeChunk<uint16_t>());
        return;
      }
      case 1:
        ValidBegin(in);
        return;
      case 2:
        ValidPairs(in);
        return;
      default: {
        const uint8_t b = in.Take<uint8_t>();
        ctx_.Drop(b % workers_, b & 0x80);
        plugin_.OnMembershipChange(ctx_.membership(), &ctx_);
        CheckSent();
      }
    }
  }

 private:
  // rank == workers_: the server, which is no worker of the job.
  void Request(int rank, int head, const std::string& body) {
    ps::SimpleData req;
    req.head = head;
    req.body = body;
    req.sender = rank < workers_ ? RecordingContext::WorkerId(rank) : RecordingContext::kServerId;
    req.app_id = ps::kOrderAppId;
    req.customer_id = ps::kOrderAppId;
    const int before = ctx_.answers();
    plugin_.OnRequest(req, &ctx_);
    FUZZ_EXPECT(ctx_.answers() == before + 1);
    if (ctx_.last_ok() && rank < workers_) Accepted(rank, head, body);
    CheckSent();
  }

  // Follows what the plugin accepted, decoding the body as it did.
  void Accepted(int rank, int head, const std::string& body) {
    WorkerView& w = views_[rank];
    if (head == ps::kOrderBegin) {
      ps::OrderBegin b;
      FUZZ_EXPECT(ps::DecodeOrderBegin(body, &b).ok());
      FUZZ_EXPECT(ps::IsPermutation(b.order, b.num_examples));
      FUZZ_EXPECT(b.epoch == w.begun + 1);
      if (job_.configured) {
        FUZZ_EXPECT(b.num_examples == job_.num_examples && b.dim == job_.dim &&
                    b.seed == job_.seed);
      }
      job_ = {true, b.num_examples, b.dim, b.seed};
      w.begun = b.epoch;
      w.received = 0;
    } else if (head == ps::kOrderPairs) {
      ps::OrderPairs p;
      FUZZ_EXPECT(job_.configured);
      FUZZ_EXPECT(ps::DecodeOrderPairs(body, job_.dim, &p).ok());
      FUZZ_EXPECT(p.epoch == w.begun && p.first_pair == w.received);
      w.received += p.count;
      FUZZ_EXPECT(w.received <= job_.num_examples / 2);
    }
  }

  void CheckSent() {
    for (const RecordingContext::Sent& s : ctx_.TakeSent()) {
      FUZZ_EXPECT(s.head == ps::kOrderNext);
      int rank = (s.to - 9) / 2;
      FUZZ_EXPECT(s.to == RecordingContext::WorkerId(rank) && rank >= 0 && rank < workers_);
      FUZZ_EXPECT(ctx_.IsWorkerAlive(rank));
      ps::OrderNext next;
      FUZZ_EXPECT(ps::DecodeOrderNext(s.body, &next).ok());
      FUZZ_EXPECT(job_.configured);
      FUZZ_EXPECT(ps::IsPermutation(next.order, job_.num_examples));
      FUZZ_EXPECT(next.epoch == views_[rank].begun + 1);
      views_[rank].next_epoch = next.epoch;
      views_[rank].next = next.order;
    }
  }

  void ValidBegin(ps::fuzz::InputReader& in) {
    const int rank = in.Take<uint8_t>() % workers_;
    const WorkerView& w = views_[rank];
    ps::OrderBegin b;
    b.epoch = w.begun + 1;
    if (job_.configured) {
      b.num_examples = job_.num_examples;
      b.dim = job_.dim;
      b.seed = job_.seed;
    } else {
      b.num_examples = 1 + in.Take<uint8_t>() % 16;
      b.dim = 1 + in.Take<uint8_t>() % 4;
    }
    const int rotate = in.Take<uint8_t>();
    if (b.epoch > 0 && w.next_epoch == b.epoch) {
      b.order = w.next;
    } else {
      for (int i = 0; i < b.num_examples; ++i) b.order.push_back((i + rotate) % b.num_examples);
    }
    Request(rank, ps::kOrderBegin, ps::EncodeOrderBegin(b));
  }

  void ValidPairs(ps::fuzz::InputReader& in) {
    const int rank = in.Take<uint8_t>() % workers_;
    const WorkerView& w = views_[rank];
    const int count_byte = in.Take<uint8_t>();
    if (!job_.configured) return;
    const int left = job_.num_examples / 2 - w.received;
    const int count = 1 + count_byte % (left > 0 ? left : 1);
    // The job's dim may come from a request with any dim: a body that big would test the
    // allocator, not the plugin.
    if (static_cast<size_t>(count) * job_.dim > kMaxPairFloats) return;
    std::vector<float> diffs(static_cast<size_t>(count) * job_.dim);
    for (float& d : diffs) d = in.Take<float>();
    Request(rank, ps::kOrderPairs,
            ps::EncodeOrderPairs(w.begun, w.received, count, diffs.data(), diffs.size()));
  }

  RecordingContext ctx_;
  ps::OrderPlugin plugin_;
  const int workers_;
  std::vector<WorkerView> views_;
  JobView job_;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ps::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ps::fuzz::InputReader in(data, size);
  Driver driver(1 + in.Take<uint8_t>() % 4);
  for (int step = 0; step < kMaxSteps && !in.empty(); ++step) driver.Step(in);
  return 0;
}
