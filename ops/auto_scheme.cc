#include "ops/auto_scheme.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "ops/sparse_allreduce.h"

namespace zen::ops {
namespace {

std::vector<Scheme> orZen(std::vector<Scheme> candidates) {
  if (candidates.empty()) candidates.push_back(Scheme::kZen);
  return candidates;
}

}  // namespace

AutoScheme::AutoScheme(std::vector<Scheme> candidates, int profileCalls, size_t maxKeys)
    : candidates_(orZen(std::move(candidates))),
      profileCalls_(std::max(profileCalls, 0)),
      maxKeys_(maxKeys) {}

std::string AutoScheme::key(const Response& response) {
  std::string k = fmt::format("{}|{}|", response.totalRows, static_cast<int>(response.dtype));
  for (const std::string& name : response.tensorNames) {
    k += name;
    k += '\0';  // names may hold any other character
  }
  return k;
}

Scheme AutoScheme::next(const std::string& key) const {
  if (!profiles()) return candidates_.front();
  auto it = profiles_.find(key);
  if (it == profiles_.end()) return candidates_.front();  // first call, or beyond maxKeys_
  const Profile& p = it->second;
  if (p.chosen) return *p.chosen;
  return candidates_[static_cast<size_t>(p.samples) % candidates_.size()];
}

Status AutoScheme::record(const std::string& key,
                          Scheme scheme,
                          double seconds,
                          Transport& transport) {
  if (!profiles() || transport.size() == 1) return Status::ok();
  auto it = profiles_.find(key);
  if (it == profiles_.end()) {
    if (profiles_.size() >= maxKeys_) return Status::ok();
    it = profiles_.emplace(key, Profile{0, std::vector<double>(candidates_.size()), {}}).first;
  }
  Profile& p = it->second;
  if (p.chosen) return Status::ok();
  const size_t k = candidates_.size();
  const size_t slot = static_cast<size_t>(p.samples) % k;
  ZEN_CHECK_ARG(scheme == candidates_[slot], "auto scheme: call {} of a bucket ran {}, expected {}",
                p.samples, schemeName(scheme), schemeName(candidates_[slot]));
  double& best = p.best[slot];
  best = static_cast<size_t>(p.samples) < k ? seconds : std::min(best, seconds);
  if (static_cast<size_t>(++p.samples) < k * static_cast<size_t>(profileCalls_)) {
    return Status::ok();
  }

  std::vector<double> sums = p.best;
  ZEN_RETURN_IF_ERROR(transport.allreduce(sums.data(), k, DataType::kFloat64));
  // The first minimum: a tie goes to the earlier candidate, on every rank alike.
  p.chosen =
      candidates_[static_cast<size_t>(std::min_element(sums.begin(), sums.end()) - sums.begin())];
  return Status::ok();
}

Status AutoScheme::record(const std::string& key, const SyncStats& stats, Transport& transport) {
  if (stats.totalNnz == 0) return Status::ok();
  return record(key, stats.scheme, stats.seconds, transport);
}

std::optional<Scheme> AutoScheme::chosen(const std::string& key) const {
  auto it = profiles_.find(key);
  if (it == profiles_.end()) return std::nullopt;
  return it->second.chosen;
}

}  // namespace zen::ops
