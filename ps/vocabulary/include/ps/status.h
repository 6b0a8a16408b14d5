// Status: the outcome of an operation that can fail for reasons outside HerdPS's
// control (the network, a peer, an app's arguments).
//
// A Status is a small value type; copying it is cheap. Thread safety: a Status object
// is not synchronised, share copies rather than references across threads.
#ifndef PS_STATUS_H_
#define PS_STATUS_H_

#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>

namespace ps {

class Status {
 public:
  // Codes travel on the wire (meta.status_code): append only, never renumber.
  enum class Code : int {
    kOk = 0,
    kInvalidArgument = 1,  // the caller's input is wrong; retrying will not help
    kNotFound = 2,         // e.g. a pull of a key that was never pushed
    kUnavailable = 3,      // a peer is gone or not reachable
    kTimeout = 4,
    kDataLoss = 5,         // corrupt or truncated data (checkpoints, frames)
    kInternal = 6,         // a HerdPS bug; please report it
    kUnimplemented = 7,
  };

  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status Timeout(std::string m) { return {Code::kTimeout, std::move(m)}; }
  static Status DataLoss(std::string m) { return {Code::kDataLoss, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {Code::kUnimplemented, std::move(m)}; }

  // Maps a wire code back to a Status; unknown codes become kInternal so that a
  // newer peer can never make an older one misread a failure as success.
  static Status FromWire(int code, std::string message);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "OK", or "<CodeName>: <message>".
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

// The exception type HerdPS throws for API misuse by an app (unsorted keys, lengths that
// do not add up, calls before Start) and for a node that cannot join its job. The
// message says what was wrong and what to do.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ps

#endif  // PS_STATUS_H_
