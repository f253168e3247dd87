#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>

namespace zen {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad input from the caller: dtype, shape, index out of range
  kOutOfRange,
  kFailedPrecondition,
  kTimeout,   // a bounded wait ran out
  kIoError,   // a transport or peer failed
  kAborted,   // shut down while the work was pending
  kInternal,  // a broken invariant: a bug in Zen
  kUnimplemented,
};

const char* statusCodeName(StatusCode code);

// A copyable error value that crosses threads, the controller and the bindings. Carries the
// call site so a message from rank 3's background thread still says where it came from.
class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message, const char* file = nullptr, int line = 0);

  static Status ok() { return Status(); }

  bool isOk() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: <message> [core/x.cc:12]"
  std::string toString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string location_;
};

// A value or the Status that explains why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool isOk() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace zen

#define ZEN_ERROR(code, ...) ::zen::Status((code), ::fmt::format(__VA_ARGS__), __FILE__, __LINE__)

#define ZEN_RETURN_IF_ERROR(expr)                \
  do {                                           \
    ::zen::Status zen_status_ = (expr);          \
    if (!zen_status_.isOk()) return zen_status_; \
  } while (0)

// Returns kInvalidArgument with a formatted message when cond is false.
#define ZEN_CHECK_ARG(cond, ...)                                                     \
  do {                                                                               \
    if (!(cond)) return ZEN_ERROR(::zen::StatusCode::kInvalidArgument, __VA_ARGS__); \
  } while (0)

#define ZEN_CONCAT_INNER_(a, b) a##b
#define ZEN_CONCAT_(a, b) ZEN_CONCAT_INNER_(a, b)
#define ZEN_ASSIGN_OR_RETURN(lhs, expr) \
  ZEN_ASSIGN_OR_RETURN_IMPL_(ZEN_CONCAT_(zen_result_, __LINE__), lhs, expr)
#define ZEN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.isOk()) return tmp.status();            \
  lhs = std::move(tmp).value()
