// Errors are data: each collector counts them by reason for
// rdma_exporter_collector_errors_total{collector,reason} and logs a cause only the first time.
// A capability the host simply lacks (no umad device node in the container, a driver without an
// ECN sysfs tree, a port whose PMA answers "N/A") is not an error: it is state, exported as
// rdma_exporter_collector_capability{collector,capability} and logged once when it goes missing.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "sources/common/result.h"

namespace rdma::exporter {

class ErrorReporter {
 public:
  explicit ErrorReporter(std::string collector) : collector_(std::move(collector)) {}

  // Counts one error of `reason`; logs `message` at warning level the first time `cause`
  // (typically the path or device) is seen with this reason.
  void report(std::string_view reason, std::string_view cause, std::string_view message);
  // Convenience for sysfs reads: reason = reason_label(error), cause = path.
  void report_read(ReadError error, const std::string& path);

  // Records whether `capability` is there for `cause` (a port, a netdev) in this scrape. Logs
  // `message` at info level when a cause loses it (or lacks it the first time); counts nothing.
  void capability(std::string_view capability, std::string_view cause, bool available, std::string_view message);

  std::map<std::string, std::uint64_t> counts() const;
  // Per capability ever reported: 1 when every cause has it as last reported, else 0.
  std::map<std::string, bool> capabilities() const;
  std::uint64_t total() const;
  const std::string& collector() const { return collector_; }

 private:
  std::string collector_;
  mutable std::mutex mu_;
  std::map<std::string, std::uint64_t, std::less<>> counts_;
  std::set<std::string, std::less<>> logged_;
  std::map<std::string, std::map<std::string, bool, std::less<>>, std::less<>> capabilities_;
};

}  // namespace rdma::exporter
