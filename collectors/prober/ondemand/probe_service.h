// GET /probe for the prober collector: one request = check the caller and the target
// (probe_policy.h), parse, resolve the target, take the local port (one probe per port at a time;
// a second request fails at once with reason busy) and its memory, snapshot the port's counters,
// run the ProbeSession, snapshot again, render the result as a scrape.
// Counts requests by module and result for rdma_probe_requests_total on /metrics, in the
// process-wide ProbeRequestCounts so that a reload of the collector keeps them.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "collectors/prober/ondemand/probe_module.h"
#include "collectors/prober/ondemand/probe_policy.h"
#include "collectors/prober/ondemand/probe_session.h"
#include "exporter/http_handler.h"
#include "exporter/metrics.h"

namespace rdma::collectors::prober {

class ProbeService {
 public:
  ProbeService(std::map<std::string, ProbeModule> modules, SessionOptions session, std::uint16_t default_tcp_port,
               std::string sysfs_root, ProbeAccess access, PeerEndpoints known_peers)
      : modules_(std::move(modules)),
        session_(std::move(session)),
        default_port_(default_tcp_port),
        sysfs_(std::move(sysfs_root)),
        access_(std::move(access)),
        known_(std::move(known_peers)) {}

  bool enabled() const { return !modules_.empty(); }
  // `who`: how the HTTP server authenticated the request; `client_timeout`: the scraper's
  // timeout header less the offset (exporter/http_handler.h), which bounds the whole probe.
  exporter::HttpResponse handle(std::string_view query, const exporter::RequestIdentity& who,
                                std::optional<std::chrono::milliseconds> client_timeout);
  // The peers the prober resolved (static and DNS): targets /probe may use at their port.
  void set_known_peers(PeerEndpoints peers);
  // rdma_probe_requests_total{module,result}
  void write_metrics(exporter::MetricSink& out) const;

 private:
  ProbeResult probe(const ProbeModule& m, const ProbeQuery& q, const ProbeTarget& t,
                    std::chrono::steady_clock::time_point deadline);

  std::map<std::string, ProbeModule> modules_;
  SessionOptions session_;
  std::uint16_t default_port_;
  std::string sysfs_;
  ProbeAccess access_;
  mutable std::mutex mu_;
  PeerEndpoints known_;  // under mu_
};

}  // namespace rdma::collectors::prober
