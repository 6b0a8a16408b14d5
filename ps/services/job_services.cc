#include "ps/internal/job_services.h"

#include <glog/logging.h>

#include "plugin_seat.h"
#include "ps/internal/postoffice.h"

namespace ps {

JobServices* JobServices::Get() {
  static JobServices* instance = [] {
    auto* services = new JobServices();  // never destroyed: used until exit
    Postoffice::Get()->SetServices(services);
    return services;
  }();
  return instance;
}

namespace {

// Installed when the library loads, too: a node started through Postoffice::Start
// directly rather than ps::Start has its clocks and plugins all the same.
[[maybe_unused]] const bool kInstalledAtLoad = JobServices::Get() != nullptr;

}  // namespace

JobServices::JobServices() : plugins_(std::make_unique<PluginSeat>(Postoffice::Get())) {}

JobServices::~JobServices() = default;

void JobServices::OnJoined(Postoffice* postoffice) {
  if (postoffice->is_scheduler()) {
    plugins_->Start();
    return;
  }
  owned_clocks_ = std::make_unique<ClockClient>(postoffice->consistency(),
                                                postoffice->is_worker());
  clocks_.store(owned_clocks_.get(), std::memory_order_release);
}

void JobServices::OnLeaving(Postoffice* postoffice) {
  // A worker on its way out ends no more clocks: nobody waits for it, also not while
  // it waits in the closing barrier for the others.
  ClockClient* clocks = this->clocks();
  if (clocks && postoffice->is_worker()) {
    Status s = clocks->Finish();
    LOG_IF(WARNING, !s.ok()) << "cannot tell the scheduler this worker's clocks are over: " << s;
  }
}

void JobServices::OnStopping() {
  clocks_.store(nullptr, std::memory_order_release);
  owned_clocks_.reset();
  plugins_->Stop();
}

void JobServices::OnMembershipChange(const MembershipView* view) {
  plugins_->OnMembershipChange(view);
}

}  // namespace ps
