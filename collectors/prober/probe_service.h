// GET /probe for the prober collector: one request = parse, resolve the target, take the local
// port (one probe per port at a time; a second request fails at once with reason busy), snapshot
// the port's counters, run the ProbeSession, snapshot again, render the result as a scrape.
// Counts requests by module and result for rdma_probe_requests_total on /metrics.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "collectors/prober/probe_module.h"
#include "collectors/prober/probe_session.h"
#include "exporter/http_handler.h"
#include "exporter/metrics.h"

namespace rdma::collectors::prober {

class ProbeService {
 public:
  ProbeService(std::map<std::string, ProbeModule> modules, SessionOptions session, std::uint16_t default_tcp_port,
               std::string sysfs_root)
      : modules_(std::move(modules)), session_(std::move(session)), default_port_(default_tcp_port), sysfs_(std::move(sysfs_root)) {}

  bool enabled() const { return !modules_.empty(); }
  exporter::HttpResponse handle(std::string_view query);
  // rdma_probe_requests_total{module,result}
  void write_metrics(exporter::MetricSink& out) const;

 private:
  ProbeResult probe(const ProbeModule& m, const ProbeQuery& q);
  void count(const std::string& module, const std::string& result);

  std::map<std::string, ProbeModule> modules_;
  SessionOptions session_;
  std::uint16_t default_port_;
  std::string sysfs_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> requests_;  // (module, result)
};

}  // namespace rdma::collectors::prober
