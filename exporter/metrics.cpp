#include "exporter/metrics.h"

#include <stdexcept>

namespace rdma::exporter {

std::string_view type_name(MetricType t) {
  switch (t) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
    case MetricType::kUntyped: break;
  }
  return "untyped";
}

MetricFamily& MetricSink::family(std::string_view name, MetricType type, std::string_view help) {
  auto it = index_.find(name);
  if (it != index_.end()) {
    auto& f = families_[it->second];
    if (f.type != type) throw std::logic_error("metric " + std::string(name) + " declared with two types");
    return f;
  }
  index_.emplace(std::string(name), families_.size());
  families_.push_back(MetricFamily{std::string(name), std::string(help), type, {}});
  return families_.back();
}

void MetricSink::add(std::string_view name, MetricType type, std::string_view help, Labels labels,
                     SampleValue value) {
  family(name, type, help).samples.push_back(Sample{std::move(labels), std::move(value)});
}

void MetricSink::append(MetricSink&& other) {
  for (auto& f : other.families_) {
    auto& mine = family(f.name, f.type, f.help);
    if (mine.samples.empty()) mine.samples = std::move(f.samples);
    else
      for (auto& s : f.samples) mine.samples.push_back(std::move(s));
  }
  other.families_.clear();
  other.index_.clear();
}

std::size_t MetricSink::sample_count() const {
  std::size_t n = 0;
  for (const auto& f : families_) n += f.samples.size();
  return n;
}

}  // namespace rdma::exporter
