// The untyped part of KVWorker::Restarts (worker/server_restarts.cc).
#ifndef PS_INTERNAL_SERVER_RESTARTS_H_
#define PS_INTERNAL_SERVER_RESTARTS_H_

#include <vector>

#include "ps/server_restart.h"

namespace ps {

class RequestPipeline;
class SimpleApp;

// Asks each server that answers from a new process since the last call (through `app`,
// the KVWorker's SimpleApp) what its restored state holds of this worker's pushes, and
// reports it against what `pipeline` saw acknowledged. Blocks for those answers.
std::vector<ServerRestart> AskServerRestarts(SimpleApp* app, RequestPipeline* pipeline);

}  // namespace ps

#endif  // PS_INTERNAL_SERVER_RESTARTS_H_
