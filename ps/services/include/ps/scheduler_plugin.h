// SchedulerPlugin: a seat on the scheduler for job-wide services (the clock
// coordinator, the CD-GraB order plugin, apps' own). A plugin owns an app id: nodes
// talk to it with a SimpleApp of that app id (requests to kScheduler), and it answers,
// and notifies nodes or groups, through its PluginContext.
//
// Threading: each plugin runs on its own thread (its SimpleApp's), one call at a
// time, so a slow plugin delays nothing else: not the scheduler's heartbeats,
// barriers or membership, nor other plugins. Requests from nodes are network input:
// a plugin must validate bodies and answer bad ones with RespondError.
//
// Registration: call RegisterSchedulerPlugin in every process of the job before
// ps::Start (typically at the top of main); only the scheduler creates the plugin,
// once the job has come together, and destroys it in Finalize.
#ifndef PS_SCHEDULER_PLUGIN_H_
#define PS_SCHEDULER_PLUGIN_H_

#include <functional>
#include <memory>
#include <string>

#include "ps/internal/membership.h"
#include "ps/simple_app.h"
#include "ps/status.h"

namespace ps {

// What the runtime gives a plugin to act with. Valid during the plugin's calls.
class PluginContext {
 public:
  virtual ~PluginContext() = default;
  // Answers a request from a node, once.
  virtual void Respond(const SimpleData& request, const std::string& body) = 0;
  virtual void RespondError(const SimpleData& request, const Status& status) = 0;
  // Sends (head, body) as a request to a node id or the live members of a group; on
  // each node it reaches the SimpleApp (app_id, app_id) of this plugin's app id. Returns
  // its timestamp (the request finishes when all have answered or died).
  virtual int Notify(int node_or_group, int head, const std::string& body) = 0;
  // The current membership (which workers are alive, their ranks).
  virtual const MembershipView& membership() const = 0;
  virtual int app_id() const = 0;
};

class SchedulerPlugin {
 public:
  virtual ~SchedulerPlugin() = default;
  // Once, when the job has come together.
  virtual void OnStart(PluginContext* /*ctx*/) {}
  // A request from a node's SimpleApp; answer it (now or later) with ctx->Respond.
  virtual void OnRequest(const SimpleData& request, PluginContext* ctx) = 0;
  // A node died, left or joined: stop waiting for the gone ones.
  virtual void OnMembershipChange(const MembershipView& /*view*/, PluginContext* /*ctx*/) {}
  // In Finalize, before the plugin is destroyed.
  virtual void OnStop(PluginContext* /*ctx*/) {}
};

using SchedulerPluginFactory = std::function<std::unique_ptr<SchedulerPlugin>()>;

// Registers the plugin of app_id. Throws ps::Error if app_id is taken or ps::Start
// has been called.
void RegisterSchedulerPlugin(int app_id, SchedulerPluginFactory factory);

}  // namespace ps

#endif  // PS_SCHEDULER_PLUGIN_H_
