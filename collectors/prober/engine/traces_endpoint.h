// /prober/traces: every flow's path traces as JSON, for operators and tests (docs/prober.md,
// "Path tracing"), with the last window's answer they belong to: its number, the verdicts, each
// flow's state in it and the suspects named from them with their evidence -- one snapshot, so a
// reader never sets one window's suspects against another's flows. Same access rule as /probe: an authenticated caller (basic auth or a
// verified client certificate, exporter::request_identity()) or 403 -- the hop addresses map
// the fabric. Bounded: at most kMaxTraceRows flows, then "truncated": true.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "collectors/prober/engine/engine.h"
#include "exporter/http_handler.h"

namespace rdma::collectors::prober {

inline constexpr std::size_t kMaxTraceRows = 4096;
// Flow ids listed per suspect (its lossy_flows count them all).
inline constexpr std::size_t kMaxSuspectFlowIds = 64;

// `snap` null: the prober is not running (an empty list). `tracing` false: tracing is off.
// The hop addresses map the fabric's routers: the access rule of /probe
// (exporter::refuse_unauthenticated) first, anonymous callers only when `allow_unauthenticated`.
// `query` (the raw query string) under the one policy of exporter/query.h: the path takes no
// parameter, so any is a bad request (400).
exporter::HttpResponse traces_response(const Snapshot* snap, bool tracing, const exporter::RequestIdentity& who,
                                       bool allow_unauthenticated = false, std::string_view query = {});

}  // namespace rdma::collectors::prober
