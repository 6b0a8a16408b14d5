#include "ps/internal/message.h"

#include <sstream>

namespace ps {

size_t DataTypeSize(DataType type) {
  switch (type) {
    case DataType::kInt16:
    case DataType::kUInt16:
      return 2;
    case DataType::kInt32:
    case DataType::kUInt32:
    case DataType::kFloat:
      return 4;
    case DataType::kInt64:
    case DataType::kUInt64:
    case DataType::kDouble:
      return 8;
    default:
      return 1;
  }
}

const char* DataTypeName(DataType type) {
  static const char* kNames[] = {"char",   "int8",   "int16", "int32",  "int64", "uint8",
                                 "uint16", "uint32", "uint64", "float", "double", "other"};
  int i = static_cast<int>(type);
  return i >= 0 && i <= static_cast<int>(DataType::kOther) ? kNames[i] : "invalid";
}

const char* RoleName(Node::Role role) {
  switch (role) {
    case Node::kSchedulerRole:
      return "scheduler";
    case Node::kServerRole:
      return "server";
    case Node::kWorkerRole:
      return "worker";
  }
  return "unknown";
}

const char* StateName(Node::State state) {
  switch (state) {
    case Node::kJoining:
      return "joining";
    case Node::kLive:
      return "live";
    case Node::kDead:
      return "dead";
    case Node::kLeft:
      return "left";
    case Node::kEntering:
      return "entering";
    case Node::kLeaving:
      return "leaving";
  }
  return "unknown";
}

std::string Node::DebugString() const {
  std::ostringstream os;
  os << RoleName(role) << " " << rank << " (node " << id << ", " << endpoint;
  if (instance) os << ", instance " << instance;
  os << ")";
  return os.str();
}

std::string Meta::DebugString() const {
  std::ostringstream os;
  os << "{sender=" << sender << " recipient=" << recipient;
  if (!control.empty()) {
    os << " control=" << control.cmd << " nodes=" << control.nodes.size()
       << " group=" << control.barrier_group;
  } else {
    os << " app=" << app_id << " customer=" << customer_id << " ts=" << timestamp
       << (request ? " request" : " response") << (push ? " push" : "") << (pull ? " pull" : "")
       << " head=" << head;
  }
  if (status_code) os << " status=" << status_code << " '" << status_message << "'";
  os << " frames=" << data_type.size() << "}";
  return os.str();
}

std::string Message::DebugString() const {
  std::ostringstream os;
  os << meta.DebugString() << " bytes=" << DataBytes();
  return os.str();
}

}  // namespace ps
