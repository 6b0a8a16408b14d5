#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "config_fields.h"

namespace ps {
namespace config_fields {
namespace {

// Whether `key` is a CURVE key in Z85: 40 characters of its alphabet, each group of 5
// encoding a 32-bit number.
bool IsZ85Key(const std::string& key) {
  static const char kAlphabet[] =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  if (key.size() != 40) return false;
  for (size_t group = 0; group < key.size(); group += 5) {
    uint64_t value = 0;
    for (size_t i = group; i < group + 5; ++i) {
      const char* digit = std::strchr(kAlphabet, key[i]);
      if (!key[i] || !digit) return false;
      value = value * 85 + static_cast<uint64_t>(digit - kAlphabet);
    }
    if (value > UINT32_MAX) return false;
  }
  return true;
}

// The key in the file `path`, which only its owner may read (the key is the job's
// whole secret). Errors name the file, never its content.
Status ReadKeyFile(const std::string& path, std::string* key) {
  const std::string what = "PS_CURVE_SECRET_KEY_FILE=" + path;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::InvalidArgument(what + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return Status::InvalidArgument(what + " is not a regular file");
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    close(fd);
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::InvalidArgument(what + " has mode " + mode +
                                   ": group or others may read the job's secret key; make it "
                                   "readable by its owner only (chmod 600)");
  }
  char buf[256];
  ssize_t n = read(fd, buf, sizeof(buf));
  close(fd);
  if (n < 0) return Status::InvalidArgument(what + ": cannot read: " + std::strerror(errno));
  key->assign(buf, static_cast<size_t>(n));
  std::fill(buf, buf + sizeof(buf), '\0');
  while (!key->empty() && std::isspace(static_cast<unsigned char>(key->back()))) {
    key->pop_back();
  }
  return Status::OK();
}

}  // namespace

Status ReadCurveSettings(const Getenv& getenv, Config* cfg) {
  const char* secure = Lookup(getenv, "PS_SECURE", nullptr);
  const char* key = Lookup(getenv, "PS_CURVE_SECRET_KEY", nullptr);
  const char* file = Lookup(getenv, "PS_CURVE_SECRET_KEY_FILE", nullptr);
  if (secure) {
    Status s = ParseBool("PS_SECURE", secure, &cfg->secure);
    if (!s.ok()) return s;
  } else if (key || file) {
    // A key given without the switch most likely means the switch was forgotten: say
    // so rather than run unencrypted.
    return Status::InvalidArgument(
        std::string(key ? "PS_CURVE_SECRET_KEY" : "PS_CURVE_SECRET_KEY_FILE") +
        " is set but PS_SECURE is not: set PS_SECURE=1 to encrypt with it (PS_SECURE=0 "
        "runs without it)");
  }
  if (!cfg->secure) return Status::OK();
  if (key && file) {
    return Status::InvalidArgument(
        "PS_CURVE_SECRET_KEY and PS_CURVE_SECRET_KEY_FILE are both set; set one");
  }
  if (!key && !file) {
    return Status::InvalidArgument(
        "PS_SECURE=1 needs the job's CURVE secret key: set PS_CURVE_SECRET_KEY (40 "
        "characters of Z85; tracker/launch --secure makes one per job) or "
        "PS_CURVE_SECRET_KEY_FILE (a file only its owner may read)");
  }
  std::string text;
  if (key) {
    text = key;
  } else {
    Status s = ReadKeyFile(file, &text);
    if (!s.ok()) return s;
  }
  if (!IsZ85Key(text)) {
    return Status::InvalidArgument(
        std::string(key ? "PS_CURVE_SECRET_KEY" : "the key in PS_CURVE_SECRET_KEY_FILE") +
        " is not a CURVE secret key: expected 40 characters of Z85 (got " +
        std::to_string(text.size()) + " characters)");
  }
  cfg->curve_secret_key = text;
  return Status::OK();
}

}  // namespace config_fields
}  // namespace ps
