// PS_SHM and PS_SHM_BYTES (ps/internal/config.h), which the runtime hands to the van as
// VanOptions::shm and shm_bytes.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ps/internal/config.h"
#include "ps/internal/van.h"

namespace ps {
namespace {

Status Load(std::map<std::string, std::string> extra, Config* config) {
  std::map<std::string, std::string> env = {{"PS_ROLE", "worker"},
                                            {"PS_NUM_WORKER", "1"},
                                            {"PS_NUM_SERVER", "1"},
                                            {"PS_SCHEDULER_URI", "127.0.0.1"},
                                            {"PS_SCHEDULER_PORT", "9000"}};
  for (auto& kv : extra) env[kv.first] = kv.second;
  return Config::FromEnvironment(config, [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(ShmConfig, SharedMemoryIsOnWithA64MiBRingByDefault) {
  Config c;
  ASSERT_TRUE(Load({}, &c).ok());
  EXPECT_TRUE(c.shm);
  EXPECT_EQ(c.shm_bytes, uint64_t{64} << 20);
  EXPECT_EQ(VanOptions().zmq.shm, c.shm) << "the van's default is the runtime's";
  EXPECT_EQ(VanOptions().zmq.shm_bytes, c.shm_bytes);
}

TEST(ShmConfig, PsShmZeroTurnsItOffAndPsShmBytesSizesTheRings) {
  Config c;
  ASSERT_TRUE(Load({{"PS_SHM", "0"}, {"PS_SHM_BYTES", "8388608"}}, &c).ok());
  EXPECT_FALSE(c.shm);
  EXPECT_EQ(c.shm_bytes, 8388608u);
}

TEST(ShmConfig, MalformedValuesAreErrorsNamingTheVariable) {
  Config c;
  for (auto bad : std::vector<std::pair<std::string, std::string>>{
           {"PS_SHM", "maybe"}, {"PS_SHM_BYTES", "1000"}, {"PS_SHM_BYTES", "lots"},
           {"PS_SHM_BYTES", "68719476737"}}) {
    Status s = Load({bad}, &c);
    EXPECT_FALSE(s.ok()) << bad.first << "=" << bad.second;
    EXPECT_NE(s.message().find(bad.first), std::string::npos) << s.message();
  }
  Status s = Load({{"PS_SHM_BYTES", "1000"}}, &c);
  EXPECT_NE(s.message().find("1048576"), std::string::npos) << "says the smallest: " << s.message();
}

TEST(ShmConfig, KNamesListsBothVariables) {
  bool shm = false, bytes = false;
  for (const char* const* n = Config::kNames; *n; ++n) {
    shm = shm || std::string(*n) == "PS_SHM";
    bytes = bytes || std::string(*n) == "PS_SHM_BYTES";
  }
  EXPECT_TRUE(shm && bytes);
}

}  // namespace
}  // namespace ps
