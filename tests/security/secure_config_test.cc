// PS_SECURE and the job's CURVE key in Config::FromEnvironment: a key from the
// environment or from an owner-only file; every mistake is a clear error at start that
// never repeats the key.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "ps/internal/config.h"

namespace ps {
namespace {

using Env = std::map<std::string, std::string>;

// A valid key (Z85 of 32 bytes) and, for the file cases, the same with a newline.
const char kKey[] = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6";

Status Load(Env env, Config* config) {
  env.insert({{"PS_ROLE", "worker"},
              {"PS_NUM_WORKER", "1"},
              {"PS_NUM_SERVER", "1"},
              {"PS_SCHEDULER_URI", "127.0.0.1"},
              {"PS_SCHEDULER_PORT", "9000"}});
  return Config::FromEnvironment(config, [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

bool Says(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

// A key file in a fresh directory, removed with it.
class KeyFile {
 public:
  KeyFile(const std::string& content, mode_t mode) {
    char dir[] = "/tmp/herdps-key-test-XXXXXX";
    dir_ = mkdtemp(dir);
    path_ = dir_ + "/job.key";
    std::ofstream(path_) << content;
    chmod(path_.c_str(), mode);
  }
  ~KeyFile() {
    std::remove(path_.c_str());
    rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
};

TEST(SecureConfig, CurveIsOffByDefault) {
  Config c;
  ASSERT_TRUE(Load({}, &c).ok());
  EXPECT_FALSE(c.secure);
  EXPECT_TRUE(c.curve_secret_key.empty());
}

TEST(SecureConfig, KeyFromTheEnvironmentTurnsCurveOn) {
  Config c;
  Status s = Load({{"PS_SECURE", "1"}, {"PS_CURVE_SECRET_KEY", kKey}}, &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(c.secure);
  EXPECT_EQ(c.curve_secret_key, kKey);
}

TEST(SecureConfig, KeyFromAnOwnerOnlyFileTurnsCurveOn) {
  KeyFile file(std::string(kKey) + "\n", 0600);
  Config c;
  Status s = Load({{"PS_SECURE", "1"}, {"PS_CURVE_SECRET_KEY_FILE", file.path()}}, &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(c.curve_secret_key, kKey);
}

TEST(SecureConfig, SecureWithoutAKeyIsAnErrorNamingBothWaysToGiveOne) {
  Config c;
  Status s = Load({{"PS_SECURE", "1"}}, &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Says(s, "PS_CURVE_SECRET_KEY")) << s;
  EXPECT_TRUE(Says(s, "PS_CURVE_SECRET_KEY_FILE")) << s;
}

TEST(SecureConfig, KeyWithoutSecureIsAnErrorUnlessSecureIsExplicitlyOff) {
  Config c;
  Status s = Load({{"PS_CURVE_SECRET_KEY", kKey}}, &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Says(s, "PS_SECURE=1")) << s;
  EXPECT_FALSE(Says(s, kKey));
  s = Load({{"PS_SECURE", "0"}, {"PS_CURVE_SECRET_KEY", kKey}}, &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(c.secure);
  EXPECT_TRUE(c.curve_secret_key.empty());
}

TEST(SecureConfig, MalformedKeysAreRefusedWithoutRepeatingThem) {
  const std::string overflow(40, '%');  // Z85 digits whose groups exceed 32 bits
  const std::string bad_digit = std::string(kKey).substr(0, 39) + "~";
  for (const std::string& key : {std::string("short"), overflow, bad_digit}) {
    Config c;
    Status s = Load({{"PS_SECURE", "1"}, {"PS_CURVE_SECRET_KEY", key}}, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << key;
    EXPECT_TRUE(Says(s, "40 characters of Z85")) << s;
    EXPECT_FALSE(Says(s, key)) << s;
  }
}

TEST(SecureConfig, KeyFileReadableByGroupOrOthersIsRefused) {
  for (mode_t mode : {0640, 0604, 0644}) {
    KeyFile file(kKey, mode);
    Config c;
    Status s = Load({{"PS_SECURE", "1"}, {"PS_CURVE_SECRET_KEY_FILE", file.path()}}, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_TRUE(Says(s, "chmod 600")) << s;
    EXPECT_FALSE(Says(s, kKey)) << s;
  }
}

TEST(SecureConfig, MissingKeyFileAndBothKindsOfKeyAreErrors) {
  Config c;
  Status s = Load({{"PS_SECURE", "1"}, {"PS_CURVE_SECRET_KEY_FILE", "/nonexistent/key"}}, &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Says(s, "/nonexistent/key")) << s;
  KeyFile file(kKey, 0600);
  s = Load({{"PS_SECURE", "1"},
            {"PS_CURVE_SECRET_KEY", kKey},
            {"PS_CURVE_SECRET_KEY_FILE", file.path()}},
           &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Says(s, "set one")) << s;
}

TEST(SecureConfig, KNamesListsTheSecurityVariables) {
  int found = 0;
  for (const char* const* name = Config::kNames; *name; ++name) {
    std::string n = *name;
    found += n == "PS_SECURE" || n == "PS_CURVE_SECRET_KEY" || n == "PS_CURVE_SECRET_KEY_FILE";
  }
  EXPECT_EQ(found, 3);
}

}  // namespace
}  // namespace ps
