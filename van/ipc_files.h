// The socket files of ipc endpoints ($TMPDIR/herdps-<n>.ipc). A node removes its own when
// it stops (Van::Stop) or gives up (Van::RemoveEndpointFiles); a process killed outright
// cannot, so every node that binds ipc endpoints first removes the files that such
// processes left behind.
#ifndef HERDPS_VAN_IPC_FILES_H_
#define HERDPS_VAN_IPC_FILES_H_

#include <chrono>
#include <string>

namespace ps {

// Files this old at least may be stale: younger ones may belong to a node that is
// binding right now (the file exists a moment before it listens).
constexpr std::chrono::seconds kStaleIpcFileAge(60);

// Removes from `dir` the socket files named herdps-<digits>.ipc that belong to this
// user, are older than kStaleIpcFileAge and that nobody listens on any more (a connect
// is refused). Returns how many it removed.
int RemoveStaleIpcFiles(const std::string& dir);

}  // namespace ps

#endif  // HERDPS_VAN_IPC_FILES_H_
