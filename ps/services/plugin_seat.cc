#include "plugin_seat.h"

#include <glog/logging.h>

#include <map>

#include "clock_coordinator.h"
#include "order_plugin.h"
#include "ps/internal/clock_client.h"
#include "ps/internal/order_protocol.h"
#include "ps/internal/postoffice.h"

namespace ps {
namespace {

std::mutex& RegistryMutex() {
  static std::mutex mu;
  return mu;
}

std::map<int, SchedulerPluginFactory>& Registry() {
  static std::map<int, SchedulerPluginFactory> registry;
  return registry;
}

}  // namespace

void RegisterSchedulerPlugin(int app_id, SchedulerPluginFactory factory) {
  if (!factory) throw Error("RegisterSchedulerPlugin: empty factory");
  if (app_id == kClockAppId || app_id == kOrderAppId) {
    throw Error("RegisterSchedulerPlugin: app id " + std::to_string(app_id) +
                " is reserved for the " +
                (app_id == kClockAppId ? "clock coordinator" : "order plugin"));
  }
  if (Postoffice::Get()->started()) {
    throw Error("RegisterSchedulerPlugin(" + std::to_string(app_id) +
                ") after ps::Start: register plugins first");
  }
  std::lock_guard<std::mutex> lock(RegistryMutex());
  if (!Registry().emplace(app_id, std::move(factory)).second) {
    throw Error("RegisterSchedulerPlugin: app id " + std::to_string(app_id) +
                " already has a plugin");
  }
}

// One plugin, its SimpleApp (whose thread is the plugin's executor) and its context.
class PluginSeat::Seat : public PluginContext {
 public:
  Seat(int app_id, std::unique_ptr<SchedulerPlugin> plugin)
      : plugin_(std::move(plugin)), app_(app_id, app_id) {
    app_.set_request_handle(
        [this](const SimpleData& req, SimpleApp*) { plugin_->OnRequest(req, this); });
  }
  void RunOnThread(std::function<void(Seat*)> fn) {
    app_.get_customer()->RunOnOwnThread([this, fn] { fn(this); });
  }
  SchedulerPlugin* plugin() { return plugin_.get(); }
  void Close() { app_.get_customer()->Close(); }

  void Respond(const SimpleData& request, const std::string& body) override {
    app_.Response(request, body);
  }
  void RespondError(const SimpleData& request, const Status& status) override {
    app_.ResponseError(request, status);
  }
  int Notify(int node_or_group, int head, const std::string& body) override {
    return app_.Request(head, body, node_or_group);
  }
  const MembershipView& membership() const override {
    return *Postoffice::Get()->membership();
  }
  int app_id() const override { return app_.app_id(); }

 private:
  std::unique_ptr<SchedulerPlugin> plugin_;
  SimpleApp app_;
};

PluginSeat::PluginSeat(Postoffice* postoffice) : postoffice_(postoffice) {}

PluginSeat::~PluginSeat() { Stop(); }

void PluginSeat::Start() {
  std::map<int, SchedulerPluginFactory> registry;
  {
    std::lock_guard<std::mutex> lock(RegistryMutex());
    registry = Registry();
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& kv : registry) {
    std::unique_ptr<SchedulerPlugin> plugin = kv.second();
    if (!plugin) {
      LOG(ERROR) << "the plugin factory of app " << kv.first << " returned nothing";
      continue;
    }
    seats_.push_back(std::make_unique<Seat>(kv.first, std::move(plugin)));
    seats_.back()->RunOnThread([](Seat* s) { s->plugin()->OnStart(s); });
  }
  // The built-in clock coordinator, when the job's workers ever wait for each other.
  const ConsistencyModel& model = postoffice_->consistency();
  if (model.waits()) {
    seats_.push_back(
        std::make_unique<Seat>(kClockAppId, std::make_unique<ClockCoordinator>(model)));
    seats_.back()->RunOnThread([](Seat* s) { s->plugin()->OnStart(s); });
  }
  // The built-in CD-GraB order plugin, always: it is passive until a worker talks to it.
  seats_.push_back(std::make_unique<Seat>(kOrderAppId, std::make_unique<OrderPlugin>()));
  seats_.back()->RunOnThread([](Seat* s) { s->plugin()->OnStart(s); });
}

void PluginSeat::OnMembershipChange(const MembershipView* view) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& seat : seats_) {
    seat->RunOnThread([view](Seat* s) { s->plugin()->OnMembershipChange(*view, s); });
  }
}

void PluginSeat::Stop() {
  std::vector<std::unique_ptr<Seat>> seats;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seats.swap(seats_);
  }
  for (auto& seat : seats) {
    seat->RunOnThread([](Seat* s) { s->plugin()->OnStop(s); });
    seat->Close();  // runs what is queued, OnStop included, then stops the thread
  }
}

}  // namespace ps
