// The Prometheus text format (version 0.0.4) and gzip. The only place that knows the format.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "exporter/metrics.h"

namespace rdma::exporter {

inline constexpr std::string_view kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

// Appends the families to out. Families without samples are skipped.
void write_text(const std::vector<MetricFamily>& families, std::string& out);
// Exact integer for u64, shortest round-trip decimal for doubles, NaN/+Inf/-Inf.
void append_value(std::string& out, const SampleValue& v);
void append_double(std::string& out, double v);
void append_escaped_label_value(std::string& out, std::string_view v);

// gzip (RFC 1952) of data; empty on failure.
std::string gzip_compress(std::string_view data, int level = 5);
// True when an Accept-Encoding header value allows gzip (q=0 excluded).
bool accepts_gzip(std::string_view accept_encoding);

}  // namespace rdma::exporter
