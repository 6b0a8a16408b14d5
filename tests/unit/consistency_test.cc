// ConsistencyModel (ps/consistency.h): parsing PS_CONSISTENCY and the wire fields.
#include "ps/consistency.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "ps/internal/config.h"

namespace ps {
namespace {

TEST(ConsistencyModel, ParsesEveryAcceptedSpelling) {
  ConsistencyModel m;
  ASSERT_TRUE(ConsistencyModel::Parse("bsp", &m).ok());
  EXPECT_EQ(m.kind, ConsistencyModel::kBsp);
  EXPECT_EQ(m.bound(), 0);
  EXPECT_TRUE(m.waits());
  ASSERT_TRUE(ConsistencyModel::Parse("asp", &m).ok());
  EXPECT_EQ(m.kind, ConsistencyModel::kAsp);
  EXPECT_FALSE(m.waits());
  ASSERT_TRUE(ConsistencyModel::Parse("ssp:3", &m).ok());
  EXPECT_EQ(m.kind, ConsistencyModel::kSsp);
  EXPECT_EQ(m.bound(), 3);
  ASSERT_TRUE(ConsistencyModel::Parse("SSP:1000000", &m).ok());
  EXPECT_EQ(m.bound(), 1000000);
  ASSERT_TRUE(ConsistencyModel::Parse("ssp:0", &m).ok());
  EXPECT_EQ(m.bound(), 0);
  EXPECT_EQ(m, (ConsistencyModel{ConsistencyModel::kBsp, 0})) << "ssp:0 is bsp";
}

TEST(ConsistencyModel, RefusesAnythingElseSayingWhatIsAccepted) {
  for (const char* bad : {"", "ssp", "ssp:", "ssp:-1", "ssp:+1", "ssp:1x", "ssp: 1",
                          "ssp:1000001", "ssp:99999999999999999999", "bsp ", "sync", "1"}) {
    ConsistencyModel m{ConsistencyModel::kBsp, 0};
    Status s = ConsistencyModel::Parse(bad, &m);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(s.message().find("expected bsp, asp or ssp:S"), std::string::npos) << s.message();
    EXPECT_EQ(m.kind, ConsistencyModel::kBsp) << "a refused value changes nothing";
  }
}

TEST(ConsistencyModel, ToStringParsesBackToTheSameModel) {
  for (const char* text : {"bsp", "asp", "ssp:0", "ssp:7"}) {
    ConsistencyModel m, again;
    ASSERT_TRUE(ConsistencyModel::Parse(text, &m).ok());
    ASSERT_TRUE(ConsistencyModel::Parse(m.ToString(), &again).ok()) << m.ToString();
    EXPECT_EQ(m, again);
  }
  EXPECT_EQ((ConsistencyModel{ConsistencyModel::kSsp, 7}).ToString(), "ssp:7");
}

TEST(ConsistencyModel, WireFieldsOutOfRangeAreRefused) {
  ConsistencyModel m;
  EXPECT_TRUE(ConsistencyModel::FromWire(2, 5, &m).ok());
  EXPECT_EQ(m.bound(), 5);
  EXPECT_FALSE(ConsistencyModel::FromWire(3, 0, &m).ok());
  EXPECT_FALSE(ConsistencyModel::FromWire(-1, 0, &m).ok());
  EXPECT_FALSE(ConsistencyModel::FromWire(2, -1, &m).ok());
  EXPECT_FALSE(ConsistencyModel::FromWire(2, 1000001, &m).ok());
  EXPECT_FALSE(ConsistencyModel::FromWire(1, 3, &m).ok()) << "bsp has no staleness";
}

Status LoadWith(const std::string& consistency, Config* config) {
  std::map<std::string, std::string> env = {{"PS_ROLE", "worker"},
                                            {"PS_NUM_WORKER", "2"},
                                            {"PS_NUM_SERVER", "1"},
                                            {"PS_SCHEDULER_URI", "127.0.0.1"},
                                            {"PS_SCHEDULER_PORT", "9000"},
                                            {"PS_CONSISTENCY", consistency}};
  return Config::FromEnvironment(config, [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(ConsistencyModel, ConfigReadsPsConsistencyAndNamesItOnError) {
  Config c;
  ASSERT_TRUE(LoadWith("ssp:2", &c).ok());
  EXPECT_TRUE(c.consistency_set);
  EXPECT_EQ(c.consistency.ToString(), "ssp:2");
  Status bad = LoadWith("ssp:x", &c);
  EXPECT_EQ(bad.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("PS_CONSISTENCY"), std::string::npos) << bad.message();
  Config fresh;
  ASSERT_TRUE(LoadWith("", &fresh).ok());
  EXPECT_FALSE(fresh.consistency_set);
  EXPECT_EQ(fresh.consistency.ToString(), "asp") << "asp is the default";
}

}  // namespace
}  // namespace ps
