#include "collectors/prober/engine/traces_endpoint.h"

#include <cstdio>
#include <string>
#include <utility>

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

}  // namespace

exporter::HttpResponse traces_response(const std::vector<FlowTrace>* traces, bool tracing,
                                       const exporter::RequestIdentity& who, bool allow_unauthenticated) {
  if (auto refusal = exporter::refuse_unauthenticated(who, allow_unauthenticated, "traces",
                                                      "collectors.prober.traces_allow_unauthenticated"))
    return std::move(*refusal);
  std::string out = "{\"tracing\":";
  out += tracing ? "true" : "false";
  out += ",\"flows\":[";
  std::size_t rows = 0;
  const std::size_t total = traces ? traces->size() : 0;
  for (std::size_t i = 0; i < total && rows < kMaxTraceRows; ++i, ++rows) {
    const auto& t = (*traces)[i];
    if (rows) out += ',';
    out += '{';
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
