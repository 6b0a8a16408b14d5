// Config::FromEnvironment (ps/internal/config.h), fed from a fake environment.
#include "ps/internal/config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace ps {
namespace {

using Env = std::map<std::string, std::string>;

Status Load(const Env& env, Config* config) {
  return Config::FromEnvironment(config, [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// The variables every node needs; the scheduler is on loopback, so no interface lookup.
Env RequiredEnv() {
  return {{"PS_ROLE", "worker"},
          {"PS_NUM_WORKER", "4"},
          {"PS_NUM_SERVER", "2"},
          {"PS_SCHEDULER_URI", "127.0.0.1"},
          {"PS_SCHEDULER_PORT", "9000"}};
}

bool Contains(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST(Config, FullEnvironmentFillsEveryField) {
  Env env = {{"PS_ROLE", "server"},           {"PS_NUM_WORKER", "8"},
             {"PS_NUM_SERVER", "3"},          {"PS_SCHEDULER_URI", "10.0.0.1"},
             {"PS_SCHEDULER_PORT", "9091"},   {"PS_NODE_HOST", "10.0.0.7"},
             {"PS_INTERFACE", "eth9"},        {"PS_PORT", "9100"},
             {"PS_TRANSPORT", "ipc"},         {"PS_RANK", "5"},
             {"PS_RING_VIRTUAL_NODES", "64"}, {"PS_START_TIMEOUT", "30"},
             {"PS_MAX_MESSAGE_BYTES", "1048576"}, {"PS_VERBOSE", "1"}};
  Config c;
  Status s = Load(env, &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(c.role, Node::kServerRole);
  EXPECT_EQ(c.num_workers, 8);
  EXPECT_EQ(c.num_servers, 3);
  EXPECT_EQ(c.scheduler_host, "10.0.0.1");
  EXPECT_EQ(c.scheduler_port, 9091);
  EXPECT_EQ(c.node_host, "10.0.0.7");  // PS_NODE_HOST wins over the interface's address
  EXPECT_EQ(c.interface, "eth9");
  EXPECT_EQ(c.node_port, 9100);
  EXPECT_EQ(c.transport, "ipc");
  EXPECT_EQ(c.rank_hint, 5);
  EXPECT_EQ(c.ring_virtual_nodes, 64);
  EXPECT_EQ(c.start_timeout_s, 30);
  EXPECT_EQ(c.max_message_bytes, 1048576);
  EXPECT_TRUE(c.verbose);
}

TEST(Config, OptionalVariablesDefaultWhenUnset) {
  Config c;
  Status s = Load(RequiredEnv(), &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(c.role, Node::kWorkerRole);
  EXPECT_EQ(c.node_host, "127.0.0.1");  // a loopback scheduler means a loopback job
  EXPECT_EQ(c.node_port, 0);
  EXPECT_EQ(c.transport, "tcp");
  EXPECT_EQ(c.rank_hint, -1);
  EXPECT_EQ(c.ring_virtual_nodes, 128);
  EXPECT_EQ(c.start_timeout_s, 300);
  EXPECT_EQ(c.max_message_bytes, int64_t{4} << 30);
  EXPECT_FALSE(c.verbose);
}

TEST(Config, EachMissingRequiredVariableIsNamedInTheError) {
  for (const char* name :
       {"PS_ROLE", "PS_NUM_WORKER", "PS_NUM_SERVER", "PS_SCHEDULER_URI", "PS_SCHEDULER_PORT"}) {
    for (bool empty : {false, true}) {
      Env env = RequiredEnv();
      if (empty) {
        env[name] = "";  // set but empty counts as unset
      } else {
        env.erase(name);
      }
      Config c;
      Status s = Load(env, &c);
      EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << name;
      EXPECT_TRUE(Contains(s, name)) << s;
      EXPECT_TRUE(Contains(s, "not set")) << s;
    }
  }
}

TEST(Config, UnknownRoleIsRejectedListingTheAcceptedOnes) {
  Env env = RequiredEnv();
  env["PS_ROLE"] = "master";
  Config c;
  Status s = Load(env, &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "PS_ROLE='master'")) << s;
  EXPECT_TRUE(Contains(s, "scheduler, server or worker")) << s;
}

TEST(Config, NumbersThatAreNotIntegersOrOutOfRangeAreRejectedNamingTheVariable) {
  const std::pair<const char*, const char*> bad[] = {
      {"PS_NUM_WORKER", "four"},
      {"PS_NUM_WORKER", "4x"},
      {"PS_NUM_WORKER", "0"},
      {"PS_NUM_SERVER", "-1"},
      {"PS_NUM_SERVER", "99999999999999999999"},
      {"PS_SCHEDULER_PORT", "0"},
      {"PS_SCHEDULER_PORT", "65536"},
      {"PS_SCHEDULER_PORT", "90.5"},
      {"PS_PORT", "-1"},
      {"PS_PORT", "70000"},
      {"PS_RANK", "-2"},
      {"PS_RANK", "first"},
      {"PS_RING_VIRTUAL_NODES", "0"},
      {"PS_START_TIMEOUT", "0"},
      {"PS_MAX_MESSAGE_BYTES", "100"},
  };
  for (const auto& [name, value] : bad) {
    Env env = RequiredEnv();
    env[name] = value;
    Config c;
    Status s = Load(env, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << name << "=" << value;
    EXPECT_TRUE(Contains(s, std::string(name) + "='" + value + "'")) << s;
    EXPECT_TRUE(Contains(s, "not an integer in [")) << s;
  }
}

TEST(Config, PsLiteDmlcNamesAreAccepted) {
  Env env = {{"DMLC_ROLE", "server"},           {"DMLC_NUM_WORKER", "6"},
             {"DMLC_NUM_SERVER", "2"},          {"DMLC_PS_ROOT_URI", "10.1.2.3"},
             {"DMLC_PS_ROOT_PORT", "8000"},     {"DMLC_NODE_HOST", "10.1.2.4"},
             {"DMLC_INTERFACE", "eth3"},        {"DMLC_LOCAL", "1"}};
  Config c;
  Status s = Load(env, &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(c.role, Node::kServerRole);
  EXPECT_EQ(c.num_workers, 6);
  EXPECT_EQ(c.num_servers, 2);
  EXPECT_EQ(c.scheduler_host, "10.1.2.3");
  EXPECT_EQ(c.scheduler_port, 8000);
  EXPECT_EQ(c.node_host, "10.1.2.4");
  EXPECT_EQ(c.interface, "eth3");
  EXPECT_EQ(c.transport, "ipc");
}

TEST(Config, PsNameWinsOverItsDmlcAlias) {
  Env env = RequiredEnv();
  env["DMLC_ROLE"] = "scheduler";
  env["DMLC_NUM_WORKER"] = "9";
  env["DMLC_NUM_SERVER"] = "9";
  env["DMLC_PS_ROOT_URI"] = "10.9.9.9";
  env["DMLC_PS_ROOT_PORT"] = "9999";
  env["PS_NODE_HOST"] = "10.0.0.2";
  env["DMLC_NODE_HOST"] = "10.9.9.8";
  env["PS_TRANSPORT"] = "tcp";
  env["DMLC_LOCAL"] = "1";
  Config c;
  Status s = Load(env, &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(c.role, Node::kWorkerRole);
  EXPECT_EQ(c.num_workers, 4);
  EXPECT_EQ(c.num_servers, 2);
  EXPECT_EQ(c.scheduler_host, "127.0.0.1");
  EXPECT_EQ(c.scheduler_port, 9000);
  EXPECT_EQ(c.node_host, "10.0.0.2");
  EXPECT_EQ(c.transport, "tcp");
}

TEST(Config, TransportMustBeTcpOrIpc) {
  for (const char* ok : {"tcp", "ipc"}) {
    Env env = RequiredEnv();
    env["PS_TRANSPORT"] = ok;
    Config c;
    ASSERT_TRUE(Load(env, &c).ok()) << ok;
    EXPECT_EQ(c.transport, ok);
  }
  Env env = RequiredEnv();
  env["PS_TRANSPORT"] = "udp";
  Config c;
  Status s = Load(env, &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "PS_TRANSPORT='udp'")) << s;
  EXPECT_TRUE(Contains(s, "tcp or ipc")) << s;
}

TEST(Config, SchedulerListensOnTheSchedulerPortWhateverPsPortSays) {
  Env env = RequiredEnv();
  env["PS_ROLE"] = "scheduler";
  env["PS_PORT"] = "1234";
  Config c;
  Status s = Load(env, &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(c.role, Node::kSchedulerRole);
  EXPECT_EQ(c.node_port, 9000);
}

TEST(Config, OtherRolesTakeTheirPortFromPsPort) {
  Env env = RequiredEnv();
  env["PS_PORT"] = "1234";
  Config c;
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.node_port, 1234);
}

TEST(Config, RankHintIsParsedFromPsRank) {
  Env env = RequiredEnv();
  env["PS_RANK"] = "0";
  Config c;
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.rank_hint, 0);
  env["PS_RANK"] = "17";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.rank_hint, 17);
}

TEST(Config, InterfaceWithoutAnAddressIsRejectedSuggestingPsNodeHost) {
  Env env = RequiredEnv();
  env["PS_INTERFACE"] = "herdps-none0";
  Config c;
  Status s = Load(env, &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "PS_INTERFACE='herdps-none0'")) << s;
  EXPECT_TRUE(Contains(s, "PS_NODE_HOST")) << s;
}

TEST(Config, VerboseIsOnForAnyValueButZero) {
  Env env = RequiredEnv();
  Config c;
  env["PS_VERBOSE"] = "0";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_FALSE(c.verbose);
  env["PS_VERBOSE"] = "yes";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_TRUE(c.verbose);
}

}  // namespace
}  // namespace ps
