// EarlyStop: a test hook that makes one worker of a linear job stop before the others
// (--stop_after_epoch RANK:E, --stop_how leave|kill), to check that the rest of the job
// (clocks, synchronous aggregation, the order plugin, barriers) does not wait for it.
//
//  - leave: after epoch E (its evaluation included) the worker finishes its clocks and
//    its order client and leaves the job (ps::Finalize without the closing barrier);
//  - kill: halfway through epoch E+1 (after position slots/2) it kills itself with
//    SIGKILL, as a crash would; the others go on once the scheduler declares it dead
//    (PS_HEARTBEAT_TIMEOUT). Under tracker/launch a killed node stops the whole job, so
//    kill needs nodes started by hand (tests/integration/orders_apps_test.py).
#pragma once

#include <gflags/gflags.h>

#include <string>

DECLARE_string(stop_after_epoch);
DECLARE_string(stop_how);

namespace linear {

struct EarlyStop {
  int rank = -1;  // -1: nobody stops early
  int epoch = 0;  // the epochs it completes
  bool kill = false;

  // Whether this worker leaves after completing `epoch`.
  bool LeavesAfter(int my_rank, int completed) const {
    return !kill && my_rank == rank && completed == epoch;
  }
  // Whether this worker kills itself at `position` of `epoch` (1-based) of `slots`.
  bool KillsAt(int my_rank, int current_epoch, int position, int slots) const {
    return kill && my_rank == rank && current_epoch == epoch + 1 && position == slots / 2;
  }
};

// Parses --stop_after_epoch and --stop_how. Throws std::invalid_argument naming the flag
// (a bad form, E outside 1..--epochs-1, kill without a next epoch).
EarlyStop EarlyStopFromFlags();
// Throws std::invalid_argument when the rank is not a worker of the job or is 0 (worker
// 0 evaluates and writes the outputs, so it runs to the end).
void CheckEarlyStopRank(const EarlyStop& stop, int num_workers);

}  // namespace linear
