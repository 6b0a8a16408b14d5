#include "ps/simple_app.h"

#include <glog/logging.h>

#include "ps/internal/postoffice.h"

namespace ps {

SimpleApp::SimpleApp(int app_id, int customer_id) : SimpleApp() {
  owned_ = std::make_unique<Customer>(app_id, customer_id,
                                      [this](Message& msg) { Process(msg); },
                                      /*open_now=*/false);
  customer_ = owned_.get();
  customer_->set_abort_handle([this](int ts, uint64_t id, const Status& s) { Abort(ts, id, s); });
  customer_->Open();
}

SimpleApp::SimpleApp() : created_(std::chrono::steady_clock::now()) {
  request_handle_ = [](const SimpleData& req, SimpleApp* app) { app->Response(req); };
  response_handle_ = [](const SimpleData&, SimpleApp*) {};
}

void SimpleApp::AttachCustomer(Customer* customer) {
  customer_ = customer;
  created_ = std::chrono::steady_clock::now();
}

void SimpleApp::Deliver(Message& msg) {
  customer_->RunOnOwnThread([this, m = std::move(msg)]() mutable { Process(m); });
}

bool SimpleApp::AbortIfMine(int timestamp, uint64_t request_id, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.erase(request_id) == 0) return false;
  }
  customer_->FinishRequest(timestamp, status);
  return true;
}

SimpleApp::~SimpleApp() {
  if (owned_) owned_->Close();
}

void SimpleApp::set_request_handle(const Handle& request_handle) {
  if (!request_handle) throw Error("SimpleApp::set_request_handle: empty handle");
  {
    std::lock_guard<std::mutex> lock(mu_);
    request_handle_ = request_handle;
    request_handle_set_ = true;
  }
  handle_set_cv_.notify_all();
}

void SimpleApp::set_response_handle(const Handle& response_handle) {
  if (!response_handle) throw Error("SimpleApp::set_response_handle: empty handle");
  std::lock_guard<std::mutex> lock(mu_);
  response_handle_ = response_handle;
}

int SimpleApp::Request(int req_head, const std::string& req_body, int recv_id) {
  return Send(req_head, req_body, recv_id, nullptr);
}

int SimpleApp::RequestAnswers(int req_head, const std::string& req_body, int recv_id,
                              std::shared_ptr<std::vector<SimpleData>> answers) {
  if (!answers) throw Error("SimpleApp::RequestAnswers: no vector for the answers");
  return Send(req_head, req_body, recv_id, std::move(answers));
}

int SimpleApp::Send(int req_head, const std::string& req_body, int recv_id,
                    std::shared_ptr<std::vector<SimpleData>> answers) {
  Postoffice* po = Postoffice::Get();
  std::vector<int> recipients = po->GetNodeIDs(recv_id);
  uint64_t id = 0;
  int ts = customer_->NewRequest(recipients, &id);
  if (recipients.empty()) {
    customer_->FinishRequest(
        ts, Status::Unavailable("no live node in group " + std::to_string(recv_id)));
    return ts;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_[id] = Pending{ts, std::set<int>(recipients.begin(), recipients.end()), Status(),
                           std::move(answers)};
  }
  for (int to : recipients) {
    Message msg;
    msg.meta.app_id = app_id();
    msg.meta.customer_id = customer_id();
    msg.meta.timestamp = ts;
    msg.meta.request_id = id;
    msg.meta.incarnation = customer_->incarnation();
    msg.meta.request = true;
    msg.meta.simple_app = true;
    msg.meta.head = req_head;
    msg.meta.body = req_body;
    msg.meta.recipient = to;
    Status s = po->Send(msg);
    if (!s.ok()) {
      // Counts as that recipient's failed answer.
      Message failed;
      failed.meta = msg.meta;
      failed.meta.body.clear();
      failed.meta.request = false;
      failed.meta.sender = to;
      failed.meta.status_code = static_cast<int>(s.code());
      failed.meta.status_message = s.message();
      Process(failed);
    }
  }
  return ts;
}

Status SimpleApp::Wait(int timestamp) { return customer_->WaitRequest(timestamp); }

void SimpleApp::Response(const SimpleData& recv_req, const std::string& res_body) {
  Answer(recv_req, res_body, Status::OK());
}

void SimpleApp::ResponseError(const SimpleData& recv_req, const Status& status) {
  Answer(recv_req, "", status);
}

void SimpleApp::Answer(const SimpleData& req, const std::string& body, const Status& status) {
  Message msg;
  msg.meta.app_id = app_id();
  msg.meta.customer_id = req.customer_id;
  msg.meta.timestamp = req.timestamp;
  msg.meta.request_id = req.request_id;
  msg.meta.incarnation = req.incarnation;
  msg.meta.request = false;
  msg.meta.simple_app = true;
  msg.meta.head = req.head;
  msg.meta.body = body;
  msg.meta.recipient = req.sender;
  msg.meta.status_code = static_cast<int>(status.code());
  msg.meta.status_message = status.message();
  Status s = Postoffice::Get()->Send(msg);
  LOG_IF(WARNING, !s.ok() && answer_log_.ShouldLog())
      << "SimpleApp " << app_id() << ": cannot answer node " << req.sender
                           << ": " << s;
}

void SimpleApp::Process(Message& msg) {
  const Meta& meta = msg.meta;
  SimpleData data;
  data.head = meta.head;
  data.body = meta.body;
  data.sender = meta.sender;
  data.timestamp = meta.timestamp;
  data.customer_id = meta.customer_id;
  data.app_id = meta.app_id;
  data.request_id = meta.request_id;
  data.incarnation = meta.incarnation;
  data.status = Status::FromWire(meta.status_code, meta.status_message);
  if (!meta.simple_app || !msg.data.empty()) {
    if (meta.request) ResponseError(data, Status::InvalidArgument("not a SimpleApp request"));
    return;
  }
  if (meta.request) {
    Handle handle;
    {
      // An app sets its handle right after constructing the SimpleApp, while other
      // nodes may already send to it (ps-lite's apps do, right after Start): a request
      // that comes first waits for the handle, up to kHandleGrace after construction,
      // instead of being answered by the default handle behind the app's back.
      std::unique_lock<std::mutex> lock(mu_);
      handle_set_cv_.wait_until(lock, created_ + kHandleGrace,
                                [this] { return request_handle_set_; });
      handle = request_handle_;
    }
    handle(data, this);
    return;
  }
  if (meta.incarnation != customer_->incarnation()) return;  // for an earlier app
  Handle handle;
  bool finished = false;
  int ts = 0;
  Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(meta.request_id);
    if (it == pending_.end() || !it->second.waiting.erase(meta.sender)) return;
    if (!data.status.ok() && it->second.status.ok()) it->second.status = data.status;
    if (it->second.answers) {
      it->second.answers->push_back(data);
    } else {
      handle = response_handle_;
    }
    ts = it->second.timestamp;
    if (it->second.waiting.empty()) {
      finished = true;
      status = it->second.status;
      pending_.erase(it);
    }
  }
  if (handle) handle(data, this);
  if (finished) customer_->FinishRequest(ts, status);
}

void SimpleApp::Abort(int timestamp, uint64_t request_id, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.erase(request_id);
  }
  customer_->FinishRequest(timestamp, status);
}

}  // namespace ps
