// Errors are data: each collector counts them by reason for
// rdma_exporter_collector_errors_total{collector,reason} and logs a cause only the first time.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "sources/sysfs/read_result.h"

namespace rdma::exporter {

class ErrorReporter {
 public:
  explicit ErrorReporter(std::string collector) : collector_(std::move(collector)) {}

  // Counts one error of `reason`; logs `message` at warning level the first time `cause`
  // (typically the path or device) is seen with this reason.
  void report(std::string_view reason, std::string_view cause, std::string_view message);
  // Convenience for sysfs reads: reason = reason_label(error), cause = path.
  void report_read(sysfs::ReadError error, const std::string& path);

  std::map<std::string, std::uint64_t> counts() const;
  std::uint64_t total() const;
  const std::string& collector() const { return collector_; }

 private:
  std::string collector_;
  mutable std::mutex mu_;
  std::map<std::string, std::uint64_t, std::less<>> counts_;
  std::set<std::string, std::less<>> logged_;
};

}  // namespace rdma::exporter
