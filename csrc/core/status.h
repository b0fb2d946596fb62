// Status and Result<T>: setup and API errors inside the core.
//
//   Result<SessionId> id = manager.start(options);
//   if (!id.ok()) return id.status();
//
// The binding layer turns a non-ok Status into one proton.ProfilerError subclass,
// chosen by the code. Value types; not shared between threads.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "core/check.h"

namespace proton {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad option, bad metric value      -> ConfigError (ValueError)
  kNotFound,         // unknown session                    -> SessionError (RuntimeError)
  kScopeMismatch,    // exit without enter, name mismatch  -> ScopeError (ValueError)
  kMetricType,       // metric changes type                -> MetricTypeError (TypeError)
  kUnavailable,      // backend or library missing         -> BackendUnavailableError
  kBusy,             // another tool holds the vendor layer -> BackendUnavailableError
  kIo,               // output cannot be written           -> OutputError (OSError)
  kInternal,         // anything else                      -> ProfilerError
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool isOk() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status notFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}
  Result(Status status) : status_(std::move(status)) { PROTON_CHECK(!status_.isOk()); }

  bool isOk() const { return status_.isOk(); }
  const Status &status() const { return status_; }
  T &value() {
    PROTON_CHECK(value_.has_value());
    return *value_;
  }
  const T &value() const {
    PROTON_CHECK(value_.has_value());
    return *value_;
  }

 private:
  Status status_;
  std::optional<T> value_;
};

#define PROTON_RETURN_IF_ERROR(expr)     \
  do {                                   \
    ::proton::Status status_ = (expr);   \
    if (!status_.isOk()) return status_; \
  } while (0)

}  // namespace proton
