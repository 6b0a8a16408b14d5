// RegisterSchedulerPlugin (ps/scheduler_plugin.h): the registration contract, checked
// before ps::Start (no job runs here). What a plugin does in a job is tested end to end.
//
// The registry is process-wide and has no unregister, so every test registers app ids
// never used before in this process (tests may run repeatedly: --gtest_repeat).
#include "ps/scheduler_plugin.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "ps/internal/postoffice.h"

namespace ps {
namespace {

class NullPlugin : public SchedulerPlugin {
 public:
  void OnRequest(const SimpleData& /*request*/, PluginContext* /*ctx*/) override {}
};

// An app id no test has registered yet.
int FreshAppId() {
  static std::atomic<int> next{1000};
  return next++;
}

SchedulerPluginFactory NullFactory() {
  return [] { return std::make_unique<NullPlugin>(); };
}

// The message of the ps::Error `fn` throws, or "" if it throws none.
template <typename Fn>
std::string ErrorOf(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SchedulerPluginRegistration, PluginsOfDifferentAppIdsAreAccepted) {
  ASSERT_FALSE(Postoffice::Get()->started());
  int first = FreshAppId(), second = FreshAppId();
  EXPECT_EQ(ErrorOf([&] { RegisterSchedulerPlugin(first, NullFactory()); }), "");
  EXPECT_EQ(ErrorOf([&] { RegisterSchedulerPlugin(second, NullFactory()); }), "");
}

TEST(SchedulerPluginRegistration, ASecondPluginForAnAppIdIsRefusedNamingIt) {
  int app_id = FreshAppId();
  RegisterSchedulerPlugin(app_id, NullFactory());
  std::string error = ErrorOf([&] { RegisterSchedulerPlugin(app_id, NullFactory()); });
  EXPECT_NE(error.find("app id " + std::to_string(app_id) + " already has a plugin"),
            std::string::npos)
      << error;
}

TEST(SchedulerPluginRegistration, AnEmptyFactoryIsRefused) {
  int app_id = FreshAppId();
  std::string error = ErrorOf([&] { RegisterSchedulerPlugin(app_id, SchedulerPluginFactory()); });
  EXPECT_NE(error.find("empty factory"), std::string::npos) << error;
  // The refusal did not take the app id.
  EXPECT_EQ(ErrorOf([&] { RegisterSchedulerPlugin(app_id, NullFactory()); }), "");
}

TEST(SchedulerPluginRegistration, RegisteringDoesNotCreateThePlugin) {
  // Only the scheduler creates plugins, once its job has come together.
  auto created = std::make_shared<std::atomic<int>>(0);  // the registry outlives this test
  RegisterSchedulerPlugin(FreshAppId(), [created] {
    ++*created;
    return std::make_unique<NullPlugin>();
  });
  EXPECT_EQ(created->load(), 0);
}

}  // namespace
}  // namespace ps
