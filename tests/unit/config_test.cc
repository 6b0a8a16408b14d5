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

TEST(Config, PsLitePortVariablesSetTheNodePortPsPortFirst) {
  Env env = RequiredEnv();
  env["PORT"] = "7001";
  Config c;
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.node_port, 7001);
  env["DMLC_PORT"] = "7002";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.node_port, 7002);
  env["PS_PORT"] = "7003";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.node_port, 7003);
  env.erase("PS_PORT");
  env["DMLC_PORT"] = "http";
  Status bad = Load(env, &c);
  EXPECT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad, "DMLC_PORT")) << bad;
}

TEST(Config, DmlcLocalAnyNonZeroNumberMeansIpc) {
  for (const char* value : {"1", "2", "-1"}) {
    Env env = RequiredEnv();
    env["DMLC_LOCAL"] = value;
    Config c;
    ASSERT_TRUE(Load(env, &c).ok());
    EXPECT_EQ(c.transport, "ipc") << value;
  }
  Env env = RequiredEnv();
  env["DMLC_LOCAL"] = "0";
  Config c;
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.transport, "tcp");
}

TEST(Config, AVanTypeOtherThanZmqIsRefusedSayingWhatHerdpsHas) {
  Env env = RequiredEnv();
  env["DMLC_PS_VAN_TYPE"] = "zmq";
  Config c;
  EXPECT_TRUE(Load(env, &c).ok());
  env["DMLC_PS_VAN_TYPE"] = "ibverbs";
  Status s = Load(env, &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "DMLC_PS_VAN_TYPE='ibverbs'")) << s;
  EXPECT_TRUE(Contains(s, "ZeroMQ")) << s;
}

TEST(Config, PsLiteDropMsgIsAPercentOfPsDropRate) {
  Env env = RequiredEnv();
  env["PS_RESEND"] = "1";
  env["PS_DROP_MSG"] = "5";
  Config c;
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_DOUBLE_EQ(c.drop_rate, 0.05);
  env["PS_DROP_RATE"] = "0.2";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_DOUBLE_EQ(c.drop_rate, 0.2) << "PS_DROP_RATE wins";
  env.erase("PS_DROP_RATE");
  env["PS_DROP_MSG"] = "100";
  EXPECT_FALSE(Load(env, &c).ok());
}

TEST(Config, WaterMarkAndKubernetesAreHonouredAsInPsLite) {
  Env env = RequiredEnv();
  env["DMLC_PS_WATER_MARK"] = "50";
  env["DMLC_USE_KUBERNETES"] = "1";
  Config c;
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.send_high_water_mark, 50);
  EXPECT_EQ(c.bind_host, "") << "only the scheduler binds every address";
  env["PS_ROLE"] = "scheduler";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.bind_host, "0.0.0.0");
}

TEST(Config, TheSchedulerBindsANumericRootUriWhateverTheInterface) {
  Env env = RequiredEnv();
  env["PS_ROLE"] = "scheduler";
  env["DMLC_INTERFACE"] = "lo";
  env["PS_SCHEDULER_URI"] = "127.0.0.1";
  Config c;
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.node_host, "127.0.0.1");
  env["PS_SCHEDULER_URI"] = "127.0.0.5";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.node_host, "127.0.0.5") << "not lo's 127.0.0.1";
  env["PS_NODE_HOST"] = "127.0.0.9";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.node_host, "127.0.0.9") << "PS_NODE_HOST wins";
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

// The control plane's variables: liveness, request deadlines, reliable delivery, fault
// injection and the join token.

TEST(Config, ControlPlaneVariablesDefaultWhenUnset) {
  Config c;
  Status s = Load(RequiredEnv(), &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(c.heartbeat_interval_s, 1.0);
  EXPECT_EQ(c.heartbeat_timeout_s, 10.0);
  EXPECT_EQ(c.request_timeout_s, 300);
  EXPECT_FALSE(c.resend);
  EXPECT_EQ(c.resend_timeout_ms, 1000);
  EXPECT_EQ(c.drop_rate, 0.0);
  EXPECT_EQ(c.drop_seed, 0u);
  EXPECT_EQ(c.job_token, "");  // an open job
}

TEST(Config, ControlPlaneVariablesAreReadWhenSet) {
  Env env = RequiredEnv();
  env["PS_HEARTBEAT_INTERVAL"] = "0.25";
  env["PS_HEARTBEAT_TIMEOUT"] = "3.5";
  env["PS_REQUEST_TIMEOUT"] = "30";
  env["PS_RESEND"] = "1";
  env["PS_RESEND_TIMEOUT"] = "250";
  env["PS_DROP_RATE"] = "0.3";
  env["PS_DROP_SEED"] = "12345";
  env["PS_LOSE_PUSH_ANSWER"] = "50";
  env["PS_JOB_TOKEN"] = "0123abcd ; = $x";
  Config c;
  Status s = Load(env, &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(c.heartbeat_interval_s, 0.25);
  EXPECT_EQ(c.heartbeat_timeout_s, 3.5);
  EXPECT_EQ(c.request_timeout_s, 30);
  EXPECT_TRUE(c.resend);
  EXPECT_EQ(c.resend_timeout_ms, 250);
  EXPECT_EQ(c.drop_rate, 0.3);
  EXPECT_EQ(c.drop_seed, 12345u);
  EXPECT_EQ(c.lose_push_answer, 50u);
  EXPECT_EQ(c.job_token, "0123abcd ; = $x");  // verbatim
}

TEST(Config, ControlPortIsReadForNodesAndIgnoredByTheScheduler) {
  Env env = RequiredEnv();
  env["PS_CONTROL_PORT"] = "7001";
  Config c;
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.control_port, 7001);
  env["PS_CONTROL_PORT"] = "70000";
  EXPECT_NE(Load(env, &c).message().find("PS_CONTROL_PORT"), std::string::npos);
  env["PS_CONTROL_PORT"] = "7001";
  env["PS_ROLE"] = "scheduler";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.control_port, 0);  // the scheduler's control port is PS_SCHEDULER_PORT
}

TEST(Config, HeartbeatIntervalBelowTenMillisecondsIsRefused) {
  Env env = RequiredEnv();
  env["PS_HEARTBEAT_INTERVAL"] = "0.001";
  Config c;
  Status s = Load(env, &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("PS_HEARTBEAT_INTERVAL"), std::string::npos) << s;
}

TEST(Config, AJobTokenOver1024BytesIsRefused) {
  Env env = RequiredEnv();
  env["PS_JOB_TOKEN"] = std::string(1025, 'x');
  Config c;
  Status s = Load(env, &c);
  EXPECT_NE(s.message().find("PS_JOB_TOKEN"), std::string::npos) << s;
  env["PS_JOB_TOKEN"] = std::string(1024, 'x');
  EXPECT_TRUE(Load(env, &c).ok());
}

TEST(Config, HeartbeatTimeoutUnderTwoIntervalsIsRefusedSayingWhy) {
  const std::pair<const char*, const char*> refused[] = {
      {"1", "1.9"}, {"0.5", "0.99"}, {"2", "3"}, {"6", nullptr}};  // nullptr: default 10 s
  for (const auto& [interval, timeout] : refused) {
    Env env = RequiredEnv();
    env["PS_HEARTBEAT_INTERVAL"] = interval;
    if (timeout) env["PS_HEARTBEAT_TIMEOUT"] = timeout;
    Config c;
    Status s = Load(env, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << interval << " / " << timeout;
    EXPECT_TRUE(Contains(s, "PS_HEARTBEAT_TIMEOUT=")) << s;
    EXPECT_TRUE(Contains(s, "less than two PS_HEARTBEAT_INTERVALs")) << s;
  }
}

TEST(Config, HeartbeatTimeoutOfExactlyTwoIntervalsIsAccepted) {
  Env env = RequiredEnv();
  env["PS_HEARTBEAT_INTERVAL"] = "0.25";
  env["PS_HEARTBEAT_TIMEOUT"] = "0.5";
  Config c;
  Status s = Load(env, &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(c.heartbeat_timeout_s, 0.5);
}

TEST(Config, HeartbeatIntervalZeroTurnsLivenessOffWhateverTheTimeout) {
  Env env = RequiredEnv();
  env["PS_HEARTBEAT_INTERVAL"] = "0";
  env["PS_HEARTBEAT_TIMEOUT"] = "0.1";
  Config c;
  Status s = Load(env, &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(c.heartbeat_interval_s, 0.0);
}

TEST(Config, RequestTimeoutZeroMeansNoDeadline) {
  Env env = RequiredEnv();
  env["PS_REQUEST_TIMEOUT"] = "0";
  Config c;
  Status s = Load(env, &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(c.request_timeout_s, 0);
}

TEST(Config, ResendIsASwitchThatRefusesAnythingElse) {
  for (const char* on : {"1", "true", "yes", "on"}) {
    Env env = RequiredEnv();
    env["PS_RESEND"] = on;
    Config c;
    ASSERT_TRUE(Load(env, &c).ok()) << on;
    EXPECT_TRUE(c.resend) << on;
  }
  for (const char* off : {"0", "false", "no", "off"}) {
    Env env = RequiredEnv();
    env["PS_RESEND"] = off;
    Config c;
    c.resend = true;
    ASSERT_TRUE(Load(env, &c).ok()) << off;
    EXPECT_FALSE(c.resend) << off;
  }
  for (const char* bad : {"2", "enabled", "1 "}) {
    Env env = RequiredEnv();
    env["PS_RESEND"] = bad;
    Config c;
    Status s = Load(env, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_TRUE(Contains(s, std::string("PS_RESEND='") + bad + "' is not 0 or 1")) << s;
  }
}

TEST(Config, DropRateIsRefusedWithoutResendSayingHowToFixIt) {
  for (const char* resend : {"", "0"}) {  // "": unset
    Env env = RequiredEnv();
    env["PS_DROP_RATE"] = "0.1";
    if (*resend) env["PS_RESEND"] = resend;
    Config c;
    Status s = Load(env, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << resend;
    EXPECT_TRUE(Contains(s, "PS_DROP_RATE=")) << s;
    EXPECT_TRUE(Contains(s, "set PS_RESEND=1")) << s;
  }
  Env env = RequiredEnv();
  env["PS_DROP_RATE"] = "0";  // drops nothing: nothing to recover
  Config c;
  EXPECT_TRUE(Load(env, &c).ok());
}

TEST(Config, DropRateUpToZeroPointNineNineIsAccepted) {
  for (const char* rate : {"0", "0.5", "0.99"}) {
    Env env = RequiredEnv();
    env["PS_RESEND"] = "1";
    env["PS_DROP_RATE"] = rate;
    Config c;
    Status s = Load(env, &c);
    ASSERT_TRUE(s.ok()) << rate << ": " << s;
    EXPECT_EQ(c.drop_rate, std::stod(rate));
  }
}

TEST(Config, MalformedControlPlaneNumbersAreRefusedNamingTheVariable) {
  struct Bad {
    const char* name;
    const char* value;
    const char* why;
  };
  const char* kNumber = "is not a number in [";
  const char* kInteger = "is not an integer in [";
  const Bad bad[] = {
      {"PS_HEARTBEAT_INTERVAL", "-1", kNumber},
      {"PS_HEARTBEAT_INTERVAL", "fast", kNumber},
      {"PS_HEARTBEAT_INTERVAL", "1s", kNumber},
      {"PS_HEARTBEAT_INTERVAL", "3601", kNumber},
      {"PS_HEARTBEAT_INTERVAL", "nan", kNumber},
      {"PS_HEARTBEAT_INTERVAL", "inf", kNumber},
      {"PS_HEARTBEAT_TIMEOUT", "0", kNumber},
      {"PS_HEARTBEAT_TIMEOUT", "0.05", kNumber},
      {"PS_HEARTBEAT_TIMEOUT", "ten", kNumber},
      {"PS_HEARTBEAT_TIMEOUT", "86401", kNumber},
      {"PS_REQUEST_TIMEOUT", "-1", kInteger},
      {"PS_REQUEST_TIMEOUT", "1.5", kInteger},
      {"PS_REQUEST_TIMEOUT", "forever", kInteger},
      {"PS_REQUEST_TIMEOUT", "16777217", kInteger},
      {"PS_RESEND_TIMEOUT", "0", kInteger},
      {"PS_RESEND_TIMEOUT", "-5", kInteger},
      {"PS_RESEND_TIMEOUT", "100ms", kInteger},
      {"PS_RESEND_TIMEOUT", "3600001", kInteger},
      {"PS_DROP_RATE", "-0.1", kNumber},
      {"PS_DROP_RATE", "1", kNumber},
      {"PS_DROP_RATE", "0.995", kNumber},
      {"PS_DROP_RATE", "half", kNumber},
      {"PS_DROP_RATE", "nan", kNumber},
      {"PS_DROP_SEED", "-1", kInteger},
      {"PS_DROP_SEED", "seed", kInteger},
      {"PS_DROP_SEED", "99999999999999999999", kInteger},
      {"PS_LOSE_PUSH_ANSWER", "-1", kInteger},
      {"PS_LOSE_PUSH_ANSWER", "the 50th", kInteger},
  };
  for (const Bad& b : bad) {
    Env env = RequiredEnv();
    env["PS_RESEND"] = "1";  // so PS_DROP_RATE is refused for its value, not for PS_RESEND
    env[b.name] = b.value;
    Config c;
    Status s = Load(env, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << b.name << "=" << b.value;
    EXPECT_TRUE(Contains(s, std::string(b.name) + "='" + b.value + "' " + b.why)) << s;
  }
}

TEST(Config, AnEmptyJobTokenLeavesTheJobOpen) {
  Env env = RequiredEnv();
  env["PS_JOB_TOKEN"] = "";
  Config c;
  c.job_token = "stale";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.job_token, "");
}

TEST(Config, MemoryKnobsDefaultAndAreRead) {
  Config c;
  ASSERT_TRUE(Load(RequiredEnv(), &c).ok());
  EXPECT_FALSE(c.tune_malloc) << "malloc is the host process's, unless asked";
  EXPECT_EQ(c.idle_trim_ms, 1000);
  Env env = RequiredEnv();
  env["PS_TUNE_MALLOC"] = "1";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_TRUE(c.tune_malloc);
  env["PS_TUNE_MALLOC"] = "0";
  env["PS_IDLE_TRIM_MS"] = "250";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_FALSE(c.tune_malloc);
  EXPECT_EQ(c.idle_trim_ms, 250);
  env["PS_IDLE_TRIM_MS"] = "0";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.idle_trim_ms, 0);
}

TEST(Config, BadIdleTrimTimesAreRefusedNamingTheVariable) {
  struct Bad {
    const char* name;
    const char* value;
  };
  for (Bad b : {Bad{"PS_IDLE_TRIM_MS", "-1"}, Bad{"PS_IDLE_TRIM_MS", "1s"},
                Bad{"PS_IDLE_TRIM_MS", "86400001"}}) {
    Env env = RequiredEnv();
    env[b.name] = b.value;
    Config c;
    Status s = Load(env, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << b.name << "=" << b.value;
    EXPECT_TRUE(Contains(s, b.name)) << s.ToString();
  }
}

TEST(Config, ReceiveInWaitDefaultsOnIsReadAndRefusesGarbage) {
  Config c;
  ASSERT_TRUE(Load(RequiredEnv(), &c).ok());
  EXPECT_TRUE(c.receive_in_wait);
  Env env = RequiredEnv();
  env["PS_RECEIVE_IN_WAIT"] = "0";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_FALSE(c.receive_in_wait);
  env["PS_RECEIVE_IN_WAIT"] = "1";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_TRUE(c.receive_in_wait);
  env["PS_RECEIVE_IN_WAIT"] = "sometimes";
  Status s = Load(env, &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "PS_RECEIVE_IN_WAIT")) << s.ToString();
}

TEST(Config, CoalesceDefaultsOnIsReadAndRefusesGarbage) {
  Config c;
  ASSERT_TRUE(Load(RequiredEnv(), &c).ok());
  EXPECT_TRUE(c.coalesce);
  Env env = RequiredEnv();
  env["PS_COALESCE"] = "0";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_FALSE(c.coalesce);
  env["PS_COALESCE"] = "1";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_TRUE(c.coalesce);
  env["PS_COALESCE"] = "often";
  Status s = Load(env, &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "PS_COALESCE")) << s.ToString();
}

TEST(Config, CoalesceFirstDefaultsOnIsReadAndRefusesGarbage) {
  Config c;
  ASSERT_TRUE(Load(RequiredEnv(), &c).ok());
  EXPECT_TRUE(c.coalesce_first);
  Env env = RequiredEnv();
  env["PS_COALESCE_FIRST"] = "0";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_FALSE(c.coalesce_first);
  env["PS_COALESCE_FIRST"] = "1";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_TRUE(c.coalesce_first);
  env["PS_COALESCE_FIRST"] = "sometimes";
  Status s = Load(env, &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "PS_COALESCE_FIRST")) << s.ToString();
}

TEST(Config, ReplicationDefaultsToOneAndIsAtMostTheServers) {
  Config c;
  ASSERT_TRUE(Load(RequiredEnv(), &c).ok());
  EXPECT_EQ(c.replication, 1);
  EXPECT_FALSE(c.replication_set);
  Env env = RequiredEnv();  // 2 servers
  env["PS_REPLICATION"] = "2";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.replication, 2);
  EXPECT_TRUE(c.replication_set);
  for (const char* bad : {"3", "0", "two"}) {  // 3: over the 2 servers
    env["PS_REPLICATION"] = bad;
    Status s = Load(env, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_TRUE(Contains(s, "PS_REPLICATION")) << s.ToString();
  }
  env["PS_NUM_SERVER"] = "4";
  env["PS_REPLICATION"] = "3";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.replication, 3);
  env["PS_REPLICATION"] = "5";
  EXPECT_FALSE(Load(env, &c).ok());
}

TEST(Config, RoundCopiesAreOffByDefaultAndNeedTwoCopiesOfEachKey) {
  Config c;
  ASSERT_TRUE(Load(RequiredEnv(), &c).ok());
  EXPECT_FALSE(c.replicate_rounds);
  EXPECT_FALSE(c.replicate_rounds_set);
  Env env = RequiredEnv();  // 2 servers
  env["PS_REPLICATION"] = "2";
  env["PS_REPLICATE_ROUNDS"] = "1";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_TRUE(c.replicate_rounds);
  EXPECT_TRUE(c.replicate_rounds_set);
  env["PS_REPLICATE_ROUNDS"] = "0";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_FALSE(c.replicate_rounds);
  for (const char* bad : {"2", "yes", "-1"}) {
    env["PS_REPLICATE_ROUNDS"] = bad;
    Status s = Load(env, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_TRUE(Contains(s, "PS_REPLICATE_ROUNDS")) << s.ToString();
  }
  env["PS_REPLICATE_ROUNDS"] = "1";
  env["PS_REPLICATION"] = "1";  // one copy: nothing to copy rounds to
  Status s = Load(env, &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "needs PS_REPLICATION=2")) << s.ToString();
  env.erase("PS_REPLICATION");
  EXPECT_FALSE(Load(env, &c).ok()) << "the default, 1, is not 2";
}

TEST(Config, RingChangeTimeoutDefaultsToTenHeartbeatTimeoutsAtLeastAMinuteAndIsRead) {
  Config c;
  ASSERT_TRUE(Load(RequiredEnv(), &c).ok());
  EXPECT_LT(c.ring_change_timeout_s, 0);  // unset
  EXPECT_EQ(RingChangeTimeoutSeconds(c), 100);  // 10 heartbeat timeouts of 10 s
  Env env = RequiredEnv();
  env["PS_HEARTBEAT_TIMEOUT"] = "3";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(RingChangeTimeoutSeconds(c), 60);
  env["PS_RING_CHANGE_TIMEOUT"] = "2.5";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(RingChangeTimeoutSeconds(c), 2.5);
  env["PS_RING_CHANGE_TIMEOUT"] = "0";  // never
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(RingChangeTimeoutSeconds(c), 0);
  for (const char* bad : {"-1", "soon", "1e9"}) {
    env["PS_RING_CHANGE_TIMEOUT"] = bad;
    Status s = Load(env, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_TRUE(Contains(s, "PS_RING_CHANGE_TIMEOUT")) << s.ToString();
  }
}

TEST(Config, CatchUpRateDefaultsTo256MegabytesASecondAndIsRead) {
  Config c;
  ASSERT_TRUE(Load(RequiredEnv(), &c).ok());
  EXPECT_EQ(c.catch_up_rate_mb, 256);
  Env env = RequiredEnv();
  env["PS_CATCH_UP_RATE"] = "0.01";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.catch_up_rate_mb, 0.01);
  env["PS_CATCH_UP_RATE"] = "0";  // no bound
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.catch_up_rate_mb, 0);
  for (const char* bad : {"-1", "fast", "2000000", "1e-300", "0.0009"}) {
    env["PS_CATCH_UP_RATE"] = bad;
    Status s = Load(env, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_TRUE(Contains(s, "PS_CATCH_UP_RATE")) << s.ToString();
  }
}

TEST(Config, CheckpointsAreOffUnlessAFolderIsNamed) {
  Config c;
  ASSERT_TRUE(Load(RequiredEnv(), &c).ok());
  EXPECT_TRUE(c.checkpoint_dir.empty());
  EXPECT_EQ(c.checkpoint_every_seconds, 0);
  EXPECT_EQ(c.checkpoint_every_pushes, 0u);
}

TEST(Config, ACheckpointFolderAloneSavesEveryMinute) {
  Env env = RequiredEnv();
  env["PS_CHECKPOINT_DIR"] = "/tmp/ckpt";
  Config c;
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.checkpoint_dir, "/tmp/ckpt");
  EXPECT_EQ(c.checkpoint_every_seconds, Config::kDefaultCheckpointSeconds);
  EXPECT_EQ(c.checkpoint_every_pushes, 0u);
}

TEST(Config, CheckpointEveryTakesSecondsPushesOrBoth) {
  struct Case {
    const char* text;
    double seconds;
    uint64_t pushes;
  };
  for (Case k : {Case{"30", 30, 0}, Case{"2.5s", 2.5, 0}, Case{"1000pushes", 0, 1000},
                 Case{"10s,500pushes", 10, 500}, Case{"500pushes,10", 10, 500}}) {
    Env env = RequiredEnv();
    env["PS_CHECKPOINT_DIR"] = "ckpt";
    env["PS_CHECKPOINT_EVERY"] = k.text;
    Config c;
    Status s = Load(env, &c);
    ASSERT_TRUE(s.ok()) << k.text << ": " << s.ToString();
    EXPECT_EQ(c.checkpoint_every_seconds, k.seconds) << k.text;
    EXPECT_EQ(c.checkpoint_every_pushes, k.pushes) << k.text;
  }
}

TEST(Config, BadCheckpointSettingsAreRefusedSayingWhy) {
  struct Bad {
    const char* dir;  // null: unset
    const char* every;
    const char* expected;
  };
  for (Bad b : {Bad{nullptr, "60s", "PS_CHECKPOINT_DIR is not"},
                Bad{"ckpt", "0", "PS_CHECKPOINT_EVERY"}, Bad{"ckpt", "-5s", "PS_CHECKPOINT_EVERY"},
                Bad{"ckpt", "soon", "PS_CHECKPOINT_EVERY"},
                Bad{"ckpt", "0pushes", "PS_CHECKPOINT_EVERY"},
                Bad{"ckpt", "10s,,5pushes", "empty term"},
                Bad{"ckpt", "1.5pushes", "PS_CHECKPOINT_EVERY"}}) {
    Env env = RequiredEnv();
    if (b.dir) env["PS_CHECKPOINT_DIR"] = b.dir;
    env["PS_CHECKPOINT_EVERY"] = b.every;
    Config c;
    Status s = Load(env, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << b.every;
    EXPECT_TRUE(Contains(s, b.expected)) << b.every << ": " << s.ToString();
  }
}

TEST(Config, StallReportAndMetricsDefaultAndAreRead) {
  Config c;
  ASSERT_TRUE(Load(RequiredEnv(), &c).ok());
  EXPECT_EQ(c.stall_report_s, 30);
  EXPECT_EQ(c.metrics_port, 0);  // off
  Env env = RequiredEnv();
  env["PS_STALL_REPORT"] = "0";
  env["PS_METRICS_PORT"] = "9100";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.stall_report_s, 0);
  EXPECT_EQ(c.metrics_host, "127.0.0.1");
  EXPECT_EQ(c.metrics_port, 9100);
  env["PS_STALL_REPORT"] = "2.5";
  env["PS_METRICS_PORT"] = "0.0.0.0:9200";
  ASSERT_TRUE(Load(env, &c).ok());
  EXPECT_EQ(c.stall_report_s, 2.5);
  EXPECT_EQ(c.metrics_host, "0.0.0.0");
  EXPECT_EQ(c.metrics_port, 9200);
}

TEST(Config, BadStallReportAndMetricsSettingsAreRefusedNamingTheVariable) {
  struct Bad {
    const char* name;
    const char* value;
  };
  for (Bad b : {Bad{"PS_STALL_REPORT", "-1"}, Bad{"PS_STALL_REPORT", "soon"},
                Bad{"PS_METRICS_PORT", "0"}, Bad{"PS_METRICS_PORT", "70000"},
                Bad{"PS_METRICS_PORT", "http"}, Bad{"PS_METRICS_PORT", ":9100"},
                Bad{"PS_METRICS_PORT", "localhost:"}}) {
    Env env = RequiredEnv();
    env[b.name] = b.value;
    Config c;
    Status s = Load(env, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << b.name << "=" << b.value;
    EXPECT_TRUE(Contains(s, b.name)) << s.ToString();
  }
}

}  // namespace
}  // namespace ps
