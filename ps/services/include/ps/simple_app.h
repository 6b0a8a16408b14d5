// SimpleApp: a generic request/response app, in the shape of ps-lite's: a request is
// an int head and a string body sent to a node or a group; each recipient's request
// handle answers it with Response. Clients of scheduler plugins use it (see
// ps/scheduler_plugin.h), and apps may use it for their own control messages.
//
// A request finishes when every recipient has answered, or when one of them dies or
// leaves (Wait returns Unavailable naming it), or at PS_REQUEST_TIMEOUT (Timeout). A
// recipient's ResponseError makes Wait return that error.
//
// Threading: both handles run on the app's own thread, one message at a time, in
// arrival order; never on the runtime's threads. Request, Wait and Response are
// thread-safe and may be called from the handles.
//
// Messages to (app_id, customer_id == app_id) are requests; a SimpleApp that should
// receive requests (a plugin client that the plugin notifies) therefore uses
// customer_id == app_id, as in ps-lite.
#ifndef PS_SIMPLE_APP_H_
#define PS_SIMPLE_APP_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ps/internal/customer.h"
#include "ps/internal/log_limiter.h"
#include "ps/status.h"

namespace ps {

// A request or a response as a handle sees it.
struct SimpleData {
  int head = 0;
  std::string body;
  int sender = 0;       // node id
  int timestamp = 0;    // the requester's timestamp
  int customer_id = 0;  // the requester's customer id
  int app_id = 0;
  Status status;        // a response: how the recipient answered
  // Identity of the request, echoed by Response; not for apps to change.
  uint64_t request_id = 0;
  uint64_t incarnation = 0;
};

class SimpleApp {
 public:
  using Handle = std::function<void(const SimpleData& received, SimpleApp* app)>;

  // May be made before ps::Start (requests are sent after it). Throws ps::Error if
  // (app_id, customer_id) is taken.
  SimpleApp(int app_id, int customer_id);
  virtual ~SimpleApp();
  SimpleApp(const SimpleApp&) = delete;
  SimpleApp& operator=(const SimpleApp&) = delete;

  // Sends (head, body) to recv_id: a node id, or a group (kScheduler, kServerGroup,
  // kWorkerGroup, or a sum of them; its live members). Returns the timestamp to Wait
  // on. A recipient that cannot be reached fails the request at once.
  virtual int Request(int req_head, const std::string& req_body, int recv_id);
  // Like Request, but the answers are the caller's: each recipient's (failures too)
  // is appended to *answers, in arrival order, instead of going to the response
  // handle. Read it once Wait(timestamp) returned; the app keeps it alive till then.
  int RequestAnswers(int req_head, const std::string& req_body, int recv_id,
                     std::shared_ptr<std::vector<SimpleData>> answers);
  // Blocks until the request finished; OK, or the first failure.
  virtual Status Wait(int timestamp);
  // Answers a request received by the request handle, once.
  virtual void Response(const SimpleData& recv_req, const std::string& res_body = "");
  void ResponseError(const SimpleData& recv_req, const Status& status);

  // The default request handle answers every request with an empty body (a request
  // that arrives within 1 s of construction, before set_request_handle, waits for the
  // handle to be set); the default response handle does nothing.
  virtual void set_request_handle(const Handle& request_handle);
  virtual void set_response_handle(const Handle& response_handle);

  Customer* get_customer() { return customer_; }
  int app_id() const { return customer_->app_id(); }
  int customer_id() const { return customer_->customer_id(); }

 protected:
  // For KVWorker and KVServer, which are SimpleApps too (as in ps-lite; MXNet sends
  // its commands through them): the derived class makes the customer, attaches it,
  // hands its SimpleApp messages to Deliver and its aborted requests to AbortIfMine,
  // and closes it in its own destructor.
  SimpleApp();
  void AttachCustomer(Customer* customer);
  // A SimpleApp message for this app: runs on the customer's own thread.
  void Deliver(Message& msg);
  // Ends request `request_id` if it is one of this SimpleApp's; false otherwise.
  bool AbortIfMine(int timestamp, uint64_t request_id, const Status& status);

 private:
  struct Pending {
    int timestamp;
    std::set<int> waiting;  // node ids that have not answered
    Status status;
    std::shared_ptr<std::vector<SimpleData>> answers;  // RequestAnswers: the caller's
  };
  int Send(int req_head, const std::string& req_body, int recv_id,
           std::shared_ptr<std::vector<SimpleData>> answers);
  void Process(Message& msg);
  void Abort(int timestamp, uint64_t request_id, const Status& status);
  void Answer(const SimpleData& req, const std::string& body, const Status& status);

  // How long a request that arrives before set_request_handle waits for it.
  static constexpr std::chrono::milliseconds kHandleGrace{1000};

  std::chrono::steady_clock::time_point created_;
  std::mutex mu_;  // guards the handles and pending_
  std::condition_variable handle_set_cv_;
  bool request_handle_set_ = false;
  Handle request_handle_;
  Handle response_handle_;
  std::unordered_map<uint64_t, Pending> pending_;
  LogLimiter answer_log_;  // answers that could not be sent
  Customer* customer_ = nullptr;  // owned_, or the derived class's
  std::unique_ptr<Customer> owned_;  // last: destroyed first, so no handle runs after
};

}  // namespace ps

#endif  // PS_SIMPLE_APP_H_
