#include "exporter/error_reporter.h"

#include <spdlog/spdlog.h>

#include <cstring>

namespace rdma::exporter {

void ErrorReporter::report(std::string_view reason, std::string_view cause, std::string_view message) {
  bool first;
  {
    std::lock_guard lock(mu_);
    auto it = counts_.find(reason);
    if (it == counts_.end()) it = counts_.emplace(std::string(reason), 0).first;
    ++it->second;
    std::string key = std::string(reason) + '\0' + std::string(cause);
    first = logged_.insert(std::move(key)).second;
    if (logged_.size() > 10000) logged_.clear();  // bound memory on pathological churn
  }
  if (first)
    spdlog::warn("collector={} reason={} cause=\"{}\" msg=\"{}\" (logged once per cause)", collector_, reason, cause,
                 message);
}

void ErrorReporter::report_read(ReadError error, const std::string& path) {
  std::string message = "read failed";
  report(reason_label(error), path, message);
}

void ErrorReporter::capability(std::string_view capability, std::string_view cause, bool available,
                               std::string_view message) {
  bool lost;
  {
    std::lock_guard lock(mu_);
    auto cap = capabilities_.find(capability);
    if (cap == capabilities_.end()) cap = capabilities_.emplace(std::string(capability), std::map<std::string, bool, std::less<>>{}).first;
    auto it = cap->second.find(cause);
    lost = !available && (it == cap->second.end() || it->second);
    if (it == cap->second.end()) {
      if (cap->second.size() >= 10000) cap->second.clear();  // bound memory on pathological churn
      cap->second.emplace(std::string(cause), available);
    } else {
      it->second = available;
    }
  }
  if (lost)
    spdlog::info("collector={} capability={} cause=\"{}\" msg=\"{}\" (not an error; logged when it goes missing)",
                 collector_, capability, cause, message);
}

std::map<std::string, bool> ErrorReporter::capabilities() const {
  std::lock_guard lock(mu_);
  std::map<std::string, bool> out;
  for (const auto& [name, causes] : capabilities_) {
    bool all = true;
    for (const auto& [cause, available] : causes) all &= available;
    out.emplace(name, all);
  }
  return out;
}

std::map<std::string, std::uint64_t> ErrorReporter::counts() const {
  std::lock_guard lock(mu_);
  return {counts_.begin(), counts_.end()};
}

std::uint64_t ErrorReporter::total() const {
  std::lock_guard lock(mu_);
  std::uint64_t n = 0;
  for (const auto& [r, c] : counts_) n += c;
  return n;
}

}  // namespace rdma::exporter
