#include "ops/auto_scheme.h"

#include <fmt/format.h>

#include <algorithm>

namespace zen::ops {
namespace {

// The profiling plan: even calls run zen, odd ones hc (index 0 and 1 of Profile::best).
Scheme planned(int samples) {
  return samples % 2 == 0 ? Scheme::kZen : Scheme::kHc;
}

}  // namespace

AutoScheme::AutoScheme(int profileCalls, size_t maxKeys)
    : profileCalls_(std::max(profileCalls, 0)), maxKeys_(maxKeys) {}

std::string AutoScheme::key(const Response& response) {
  std::string k = fmt::format("{}|{}|", response.totalRows, static_cast<int>(response.dtype));
  for (const std::string& name : response.tensorNames) {
    k += name;
    k += '\0';  // names may hold any other character
  }
  return k;
}

Scheme AutoScheme::next(const std::string& key) const {
  if (profileCalls_ == 0) return Scheme::kZen;
  auto it = profiles_.find(key);
  if (it == profiles_.end()) return Scheme::kZen;  // first call, or beyond maxKeys_
  const Profile& p = it->second;
  if (p.chosen) return *p.chosen;
  return planned(p.samples);
}

Status AutoScheme::record(const std::string& key,
                          Scheme scheme,
                          double seconds,
                          Transport& transport) {
  if (profileCalls_ == 0 || transport.size() == 1) return Status::ok();
  auto it = profiles_.find(key);
  if (it == profiles_.end()) {
    if (profiles_.size() >= maxKeys_) return Status::ok();
    it = profiles_.emplace(key, Profile{}).first;
  }
  Profile& p = it->second;
  if (p.chosen) return Status::ok();
  const Scheme expected = planned(p.samples);
  ZEN_CHECK_ARG(scheme == expected, "auto scheme: call {} of a bucket ran {}, expected {}",
                p.samples, schemeName(scheme), schemeName(expected));
  double& best = p.best[p.samples % 2];
  best = p.samples < 2 ? seconds : std::min(best, seconds);
  if (++p.samples < 2 * profileCalls_) return Status::ok();

  double sums[2] = {p.best[0], p.best[1]};
  ZEN_RETURN_IF_ERROR(transport.allreduce(sums, 2, DataType::kFloat64));
  p.chosen = sums[1] < sums[0] ? Scheme::kHc : Scheme::kZen;
  return Status::ok();
}

std::optional<Scheme> AutoScheme::chosen(const std::string& key) const {
  auto it = profiles_.find(key);
  if (it == profiles_.end()) return std::nullopt;
  return it->second.chosen;
}

}  // namespace zen::ops
