// A PluginContext for driving a scheduler plugin from a fuzz input: a job of one
// scheduler, one server and 1..4 workers whose membership the input changes, and a
// record of what the plugin answered and sent.
#ifndef HERDPS_TESTS_FUZZ_RECORDING_CONTEXT_H_
#define HERDPS_TESTS_FUZZ_RECORDING_CONTEXT_H_

#include <string>
#include <vector>

#include "fuzz_input.h"
#include "ps/base.h"
#include "ps/internal/membership.h"
#include "ps/scheduler_plugin.h"
#include "ps/status.h"

namespace ps {
namespace fuzz {

class RecordingContext : public PluginContext {
 public:
  struct Sent {
    int to;
    int head;
    std::string body;
  };

  RecordingContext(int app_id, int workers) : app_id_(app_id) {
    view_.version = 1;
    view_.nodes.push_back(MakeNode(kScheduler, Node::kSchedulerRole, 0));
    view_.nodes.push_back(MakeNode(kServerId, Node::kServerRole, 0));
    for (int r = 0; r < workers; ++r) {
      view_.nodes.push_back(MakeNode(WorkerId(r), Node::kWorkerRole, r));
    }
  }

  static constexpr int kServerId = 8;
  static int WorkerId(int rank) { return 9 + 2 * rank; }

  // Worker `rank` dies (or leaves): a new membership version.
  void Drop(int rank, bool died) {
    for (Node& n : view_.nodes) {
      if (n.id == WorkerId(rank)) n.state = died ? Node::kDead : Node::kLeft;
    }
    ++view_.version;
  }

  void Respond(const SimpleData& /*request*/, const std::string& body) override {
    ++answers_;
    last_answer_ = body;
    last_ok_ = true;
  }
  void RespondError(const SimpleData& /*request*/, const Status& status) override {
    // A refusal is the plugin's verdict on bad input; Internal would be a HerdPS bug.
    FUZZ_EXPECT(!status.ok());
    FUZZ_EXPECT(status.code() != Status::Code::kInternal);
    FUZZ_EXPECT(!status.message().empty());
    ++answers_;
    last_ok_ = false;
  }
  int Notify(int node_or_group, int head, const std::string& body) override {
    sent_.push_back({node_or_group, head, body});
    return 0;
  }
  const MembershipView& membership() const override { return view_; }
  int app_id() const override { return app_id_; }

  // Answers given so far (Respond and RespondError alike), and how the last one went.
  int answers() const { return answers_; }
  bool last_ok() const { return last_ok_; }
  const std::string& last_answer() const { return last_answer_; }
  // What the plugin sent on its own (Notify), since the last TakeSent.
  std::vector<Sent> TakeSent() {
    std::vector<Sent> out;
    out.swap(sent_);
    return out;
  }
  bool IsWorkerAlive(int rank) const { return view_.IsAlive(WorkerId(rank)); }

 private:
  static Node MakeNode(int id, Node::Role role, int rank) {
    Node n;
    n.id = id;
    n.role = role;
    n.rank = rank;
    n.state = Node::kLive;
    return n;
  }

  const int app_id_;
  MembershipView view_;  // sorted by id, as the holder publishes it
  int answers_ = 0;
  bool last_ok_ = false;
  std::string last_answer_;
  std::vector<Sent> sent_;
};

}  // namespace fuzz
}  // namespace ps

#endif  // HERDPS_TESTS_FUZZ_RECORDING_CONTEXT_H_
