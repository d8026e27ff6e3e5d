// The Prometheus text format (version 0.0.4) and gzip. The only place that knows the format.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "exporter/metrics.h"
#include "exporter/text.h"  // append_escaped_label_value: valid UTF-8, bounded

namespace rdma::exporter {

inline constexpr std::string_view kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

// Appends the families to out. Families without samples are skipped.
void write_text(const std::vector<MetricFamily>& families, std::string& out);
// Appends the sink: its families, then its pre-rendered blocks.
void write_text(const MetricSink& sink, std::string& out);
// Renders a large snapshot piece by piece: each part's samples become text at once, kept per
// family so that every family's lines stay together (the format requires it). The peak is the
// text plus one part's samples, instead of all samples at once.
class TextAccumulator {
 public:
  void add(MetricSink&& part);  // part is emptied
  std::string finish() &&;      // HELP/TYPE and lines of every family, in first-seen order

 private:
  struct Family {
    std::string_view name, help;  // interned (MetricFamily)
    MetricType type;
    std::string lines;
  };
  std::vector<Family> families_;
  std::unordered_map<std::string_view, std::size_t> index_;
};

// Exact integer for u64, shortest round-trip decimal for doubles, NaN/+Inf/-Inf.
void append_value(std::string& out, const SampleValue& v);
void append_double(std::string& out, double v);

// gzip (RFC 1952) of data; empty on failure.
std::string gzip_compress(std::string_view data, int level = 5);
// True when an Accept-Encoding header value allows gzip (q=0 excluded).
bool accepts_gzip(std::string_view accept_encoding);

}  // namespace rdma::exporter
