// Status and Result<T>: the project-wide error type.
//
// Every function that can fail across a module boundary returns a Status (no value) or a
// Result<T> (a value or an error). Exceptions never cross module boundaries; code that calls
// libraries which throw (yaml-cpp, protobuf, Boost) catches at the edge and converts.
//
// Thread-safety: Status and Result are value types; distinct objects may be used from
// different threads freely, a single object needs external synchronisation.
#ifndef CRUX_CORE_BASE_STATUS_H_
#define CRUX_CORE_BASE_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace crux::core {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // The caller passed something malformed (NaN, negative, bad name).
  kNotFound,            // A named entity (host, link, job) does not exist.
  kAlreadyExists,       // A unique name was given twice.
  kFailedPrecondition,  // The request is well formed but the state does not allow it.
  kOutOfRange,          // A value is outside the supported range.
  kUnavailable,         // A peer or resource is temporarily unreachable; retrying may help.
  kInternal,            // A broken invariant: a bug in Crux.
};

// Returns the canonical upper-case name, e.g. "INVALID_ARGUMENT".
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK.
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "INVALID_ARGUMENT: jobs[0].compute_time_s: must be > 0" or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>". OK stays OK.
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string msg) {
  return Status(StatusCode::kInvalidArgument, std::move(msg));
}
inline Status NotFoundError(std::string msg) {
  return Status(StatusCode::kNotFound, std::move(msg));
}
inline Status AlreadyExistsError(std::string msg) {
  return Status(StatusCode::kAlreadyExists, std::move(msg));
}
inline Status FailedPreconditionError(std::string msg) {
  return Status(StatusCode::kFailedPrecondition, std::move(msg));
}
inline Status OutOfRangeError(std::string msg) {
  return Status(StatusCode::kOutOfRange, std::move(msg));
}
inline Status UnavailableError(std::string msg) {
  return Status(StatusCode::kUnavailable, std::move(msg));
}
inline Status InternalError(std::string msg) {
  return Status(StatusCode::kInternal, std::move(msg));
}

// A value of type T or a non-OK Status.
// REQUIRES: value() only when ok(); status() is OK exactly when a value is held.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(runtime/explicit): implicit by design.
  Result(Status status) : status_(std::move(status)) {  // NOLINT(runtime/explicit)
    assert(!status_.ok() && "Result constructed from an OK status without a value");
    if (status_.ok()) status_ = InternalError("Result constructed from OK status without value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T& value() & {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace crux::core

#define CRUX_STATUS_CONCAT_INNER_(a, b) a##b
#define CRUX_STATUS_CONCAT_(a, b) CRUX_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define CRUX_RETURN_IF_ERROR(expr)                       \
  do {                                                   \
    ::crux::core::Status crux_status_tmp_ = (expr);      \
    if (!crux_status_tmp_.ok()) return crux_status_tmp_; \
  } while (false)

// `CRUX_ASSIGN_OR_RETURN(auto x, F());` evaluates F() (a Result<T>), returns its status on
// error, and otherwise binds the value to the declaration.
#define CRUX_ASSIGN_OR_RETURN(decl, expr) \
  CRUX_ASSIGN_OR_RETURN_IMPL_(CRUX_STATUS_CONCAT_(crux_result_, __LINE__), decl, expr)
#define CRUX_ASSIGN_OR_RETURN_IMPL_(tmp, decl, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  decl = std::move(tmp).value()

#endif  // CRUX_CORE_BASE_STATUS_H_
