#include "ipc_files.h"

#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace ps {
namespace {

bool IsIpcFileName(const char* name) {
  constexpr char kPrefix[] = "herdps-";
  constexpr char kSuffix[] = ".ipc";
  const size_t n = std::strlen(name), p = sizeof(kPrefix) - 1, s = sizeof(kSuffix) - 1;
  if (n <= p + s || std::strncmp(name, kPrefix, p) != 0 ||
      std::strcmp(name + n - s, kSuffix) != 0) {
    return false;
  }
  for (size_t i = p; i < n - s; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  return true;
}

// Whether nobody listens on the socket file `path` (a connect is refused).
bool NobodyListens(const std::string& path) {
  sockaddr_un address{};
  if (path.size() >= sizeof(address.sun_path)) return false;
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool refused = connect(fd, reinterpret_cast<const sockaddr*>(&address),
                               sizeof(address)) != 0 &&
                       errno == ECONNREFUSED;
  close(fd);
  return refused;
}

}  // namespace

int RemoveStaleIpcFiles(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  const time_t now = time(nullptr);
  while (dirent* entry = readdir(d)) {
    if (!IsIpcFileName(entry->d_name)) continue;
    const std::string path = dir + "/" + entry->d_name;
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != geteuid() ||
        now - st.st_mtime < kStaleIpcFileAge.count()) {
      continue;
    }
    if (NobodyListens(path) && unlink(path.c_str()) == 0) ++removed;
  }
  closedir(d);
  return removed;
}

}  // namespace ps
