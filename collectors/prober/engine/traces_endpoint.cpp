#include "collectors/prober/engine/traces_endpoint.h"

#include <cstdio>
#include <string>
#include <utility>

#include "exporter/query.h"
#include "exporter/text.h"

namespace rdma::collectors::prober {
namespace {

void field(std::string& out, const char* name, const std::string& v) {
  out += '"';
  out += name;
  out += "\":";
  exporter::append_json_string(out, v);
  out += ',';
}
void number(std::string& out, const char* name, double v) {
  char text[64];
  std::snprintf(text, sizeof text, "\"%s\":%.17g,", name, v);
  out += text;
}
void hops(std::string& out, const char* name, const std::vector<std::string>& h) {
  out += '"';
  out += name;
  out += "\":[";
  for (std::size_t i = 0; i < h.size(); ++i) {
    if (i) out += ',';
    exporter::append_json_string(out, h[i]);
  }
  out += "],";
}

void strings(std::string& out, const char* name, const std::vector<std::string>& v, std::size_t max) {
  out += '"';
  out += name;
  out += "\":[";
  for (std::size_t i = 0; i < v.size() && i < max; ++i) {
    if (i) out += ',';
    exporter::append_json_string(out, v[i]);
  }
  out += "],";
}

void window_answer(std::string& out, const Snapshot& s) {
  number(out, "window", static_cast<double>(s.windows));
  out += "\"verdicts\":[";
  for (std::size_t i = 0; i < s.findings.size(); ++i) {
    if (i) out += ',';
    out += '{';
    field(out, "rail", s.findings[i].rail);
    field(out, "verdict", std::string(verdict_label(s.findings[i].verdict)));
    out.back() = '}';
  }
  out += "],";
  strings(out, "spraying", {s.spraying.begin(), s.spraying.end()}, s.spraying.size());
  out += "\"suspects\":[";
  for (std::size_t i = 0; i < s.evidence.size(); ++i) {
    const auto& e = s.evidence[i];
    if (i) out += ',';
    out += '{';
    field(out, "rail", e.link.group);
    field(out, "from", e.link.link.from);
    field(out, "to", e.link.link.to);
    number(out, "lossy_flows", static_cast<double>(e.link.lossy_flows));
    number(out, "clean_flows", static_cast<double>(e.link.clean_flows));
    // narrowed: fresh traces of lossy flows stopped right before it; intersection: only the
    // lossy flows' clean paths less the links clean flows cross.
    field(out, "basis", e.link.narrowed ? "narrowed" : "intersection");
    number(out, "named_unix", e.named_unix);
    strings(out, "flows", e.link.lossy_ids, kMaxSuspectFlowIds);
    out.back() = '}';
  }
  out += "],";
}

}  // namespace

exporter::HttpResponse traces_response(const Snapshot* snap, bool tracing, const exporter::RequestIdentity& who,
                                       bool allow_unauthenticated, std::string_view query) {
  if (auto refusal = exporter::refuse_unauthenticated(who, allow_unauthenticated, "traces",
                                                      "collectors.prober.traces_allow_unauthenticated"))
    return std::move(*refusal);
  // No parameter: one a caller believes filters the list would be silently ignored otherwise.
  std::string error;
  if (!exporter::parse_query(query, {}, error)) return exporter::bad_request(error);
  std::string out = "{\"tracing\":";
  out += tracing ? "true" : "false";
  out += ',';
  if (snap) window_answer(out, *snap);
  out += "\"flows\":[";
  std::size_t rows = 0;
  const std::size_t total = snap ? snap->traces.size() : 0;
  for (std::size_t i = 0; i < total && rows < kMaxTraceRows; ++i, ++rows) {
    const auto& t = snap->traces[i];
    if (rows) out += ',';
    out += '{';
    field(out, "id", flow_id(t.flow));
    field(out, "device", t.flow.device);
    number(out, "port", t.flow.port);
    field(out, "peer", t.flow.peer);
    field(out, "peer_device", t.flow.peer_device);
    number(out, "peer_port", t.flow.peer_port);
    field(out, "rail", t.flow.rail);
    number(out, "flow", t.flow.flow);
    number(out, "flow_label", t.flow_label);
    number(out, "udp_sport", t.sport);
    number(out, "dest_qpn", t.dest_qpn);
    field(out, "state", t.state);
    hops(out, "path", t.path);
    hops(out, "fresh", t.fresh);
    field(out, "result", t.result);
    number(out, "traced_unix", t.traced_unix);
    out.back() = '}';
  }
  out += "],\"truncated\":";
  out += total > rows ? "true" : "false";
  out += "}\n";
  return {200, "application/json", std::move(out)};
}

}  // namespace rdma::collectors::prober
