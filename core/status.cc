#include "core/status.h"

namespace zen {
namespace {

// "/src/zen/core/status.cc" -> "core/status.cc": the layer and file, without the build host.
const char* shortPath(const char* file) {
  const char* last = nullptr;
  const char* before = file;
  for (const char* p = file; *p != '\0'; ++p) {
    if (*p == '/') {
      before = last == nullptr ? file : last + 1;
      last = p;
    }
  }
  return last == nullptr ? file : before;
}

}  // namespace

const char* statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "Ok";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kOutOfRange:
      return "OutOfRange";
    case StatusCode::kFailedPrecondition:
      return "FailedPrecondition";
    case StatusCode::kTimeout:
      return "Timeout";
    case StatusCode::kIoError:
      return "IoError";
    case StatusCode::kAborted:
      return "Aborted";
    case StatusCode::kInternal:
      return "Internal";
    case StatusCode::kUnimplemented:
      return "Unimplemented";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string message, const char* file, int line)
    : code_(code), message_(std::move(message)) {
  if (file != nullptr) location_ = fmt::format("{}:{}", shortPath(file), line);
}

std::string Status::toString() const {
  if (isOk()) return "Ok";
  if (location_.empty()) return fmt::format("{}: {}", statusCodeName(code_), message_);
  return fmt::format("{}: {} [{}]", statusCodeName(code_), message_, location_);
}

}  // namespace zen
