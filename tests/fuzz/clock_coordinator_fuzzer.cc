// The clock coordinator (ps/services/clock_coordinator.h) on the scheduler, driven by the clock
// requests of a small job's workers (bodies are decimal text, ParseClockText) while
// workers die or leave.
//
// Input: u8 model (bsp, or ssp:S with S = u8 mod 4), u8 workers (1 + mod 4), then up to
// 256 steps, each a u8 step kind (mod 4):
//   0  a request from the input: u8 sender (mod workers + 1; the last is the server, no
//      worker of the job), u8 head (mod 4), u8 body length, the body;
//   1  worker u8 (mod workers) ends its current clock (a valid kClockEnded);
//   2  worker u8 (mod workers) finishes (kClockFinished);
//   3  worker u8 (mod workers) dies (bit 7 set) or leaves.
//
// Properties: every request gets exactly one answer, never an Internal error; an answer
// to a clock request is the minimum in decimal; the minimum the coordinator pushes to
// every node grows strictly, and is always the minimum over the live workers that have
// not finished of the clocks they ended (kAllClocksEnded when there are none), as a
// model kept here from the requests the coordinator accepted says.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "clock_coordinator.h"
#include "fuzz_input.h"
#include "ps/base.h"
#include "ps/consistency.h"
#include "ps/internal/clock_client.h"
#include "ps/simple_app.h"
#include "recording_context.h"

namespace {

using ps::fuzz::RecordingContext;

constexpr int kMaxSteps = 256;

ps::ConsistencyModel ModelOf(uint8_t b) {
  ps::ConsistencyModel m;
  int s = b % 4;
  m.kind = s == 0 ? ps::ConsistencyModel::kBsp : ps::ConsistencyModel::kSsp;
  m.staleness = s;
  return m;
}

class Driver {
 public:
  Driver(const ps::ConsistencyModel& model, int workers)
      : ctx_(ps::kClockAppId, workers),
        coordinator_(model),
        ended_(workers, 0),
        finished_(workers, false) {
    coordinator_.OnStart(&ctx_);
    CheckMinimum();
  }

  void Step(ps::fuzz::InputReader& in) {
    const int workers = static_cast<int>(ended_.size());
    switch (in.Take<uint8_t>() % 4) {
      case 0: {
        const int sender = in.Take<uint8_t>() % (workers + 1);
        const int head = in.Take<uint8_t>() % 4;
        Request(sender, head, in.TakeChunk<uint8_t>());
        return;
      }
      case 1: {
        const int rank = in.Take<uint8_t>() % workers;
        Request(rank, ps::kClockEnded, std::to_string(ended_[rank]));
        return;
      }
      case 2:
        Request(in.Take<uint8_t>() % workers, ps::kClockFinished, "");
        return;
      default: {
        const uint8_t b = in.Take<uint8_t>();
        ctx_.Drop(b % workers, b & 0x80);
        coordinator_.OnMembershipChange(ctx_.membership(), &ctx_);
        CheckMinimum();
      }
    }
  }

 private:
  // rank == workers: the server, which is no worker of the job.
  void Request(int rank, int head, const std::string& body) {
    const bool worker = rank < static_cast<int>(ended_.size());
    ps::SimpleData req;
    req.head = head;
    req.body = body;
    req.sender = worker ? RecordingContext::WorkerId(rank) : RecordingContext::kServerId;
    req.app_id = ps::kClockAppId;
    req.customer_id = ps::kClockAppId;
    const int before = ctx_.answers();
    coordinator_.OnRequest(req, &ctx_);
    FUZZ_EXPECT(ctx_.answers() == before + 1);
    if (ctx_.last_ok()) {
      FUZZ_EXPECT(worker && ctx_.IsWorkerAlive(rank));
      if (head == ps::kClockEnded) {
        int64_t clock = -1;
        FUZZ_EXPECT(ps::ParseClockText(body, &clock));
        FUZZ_EXPECT(!finished_[rank] && clock == ended_[rank]);
        ended_[rank] = clock + 1;
      } else {
        FUZZ_EXPECT(head == ps::kClockFinished);
        finished_[rank] = true;
      }
    }
    CheckMinimum();
    if (ctx_.last_ok()) {
      int64_t answered = -1;
      FUZZ_EXPECT(ps::ParseClockText(ctx_.last_answer(), &answered));
      FUZZ_EXPECT(answered == pushed_);
    }
  }

  // Every push is a new, larger minimum, and the minimum is the model's.
  void CheckMinimum() {
    for (const RecordingContext::Sent& s : ctx_.TakeSent()) {
      FUZZ_EXPECT(s.to == ps::kWorkerGroup + ps::kServerGroup);
      FUZZ_EXPECT(s.head == ps::kClockMinimum);
      int64_t minimum = -1;
      FUZZ_EXPECT(ps::ParseClockText(s.body, &minimum));
      FUZZ_EXPECT(minimum > pushed_);
      pushed_ = minimum;
    }
    int64_t expected = ps::kAllClocksEnded;
    for (size_t r = 0; r < ended_.size(); ++r) {
      if (!finished_[r] && ctx_.IsWorkerAlive(static_cast<int>(r))) {
        expected = std::min(expected, ended_[r]);
      }
    }
    // The minimum never goes back: a worker that dies at a low clock does not lower it.
    highest_ = std::max(highest_, expected);
    FUZZ_EXPECT(pushed_ == highest_);
  }

  RecordingContext ctx_;
  ps::ClockCoordinator coordinator_;
  std::vector<int64_t> ended_;
  std::vector<bool> finished_;
  int64_t pushed_ = 0;   // the last minimum pushed; the coordinator starts at 0
  int64_t highest_ = 0;  // the highest minimum the model has had
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ps::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ps::fuzz::InputReader in(data, size);
  const ps::ConsistencyModel model = ModelOf(in.Take<uint8_t>());
  Driver driver(model, 1 + in.Take<uint8_t>() % 4);
  for (int step = 0; step < kMaxSteps && !in.empty(); ++step) driver.Step(in);
  return 0;
}
