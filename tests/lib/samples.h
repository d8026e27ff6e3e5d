// Sample lookup in a MetricSink, shared by the C++ tests: the family of a name, the one sample
// whose labels include some (find) or are exactly some in any order (exact, u64, dbl), and how
// many samples a family has.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>

#include "exporter/metrics.h"

namespace rdma::testing {

using exporter::Labels;
using exporter::MetricFamily;
using exporter::MetricSink;
using exporter::MetricType;
using exporter::SampleValue;

// A sample's value as a number (u64 or double; a histogram is not one).
inline double number(const SampleValue& v) {
  if (const auto* u = std::get_if<std::uint64_t>(&v)) return static_cast<double>(*u);
  return std::get<double>(v);
}

struct Found {
  MetricType type;
  SampleValue value;
  std::uint64_t u64() const { return std::get<std::uint64_t>(value); }
  double number() const { return testing::number(value); }
};

inline const MetricFamily* family(const MetricSink& s, const std::string& name) {
  for (const auto& f : s.families())
    if (f.name == name) return &f;
  return nullptr;
}

inline std::size_t count(const MetricSink& s, const std::string& name) {
  const auto* f = family(s, name);
  return f ? f->samples.size() : 0;
}

// The first sample of `name` whose labels include all of `want`; nullopt when none.
inline std::optional<Found> find(const MetricSink& s, const std::string& name, const Labels& want = {}) {
  const auto* f = family(s, name);
  if (!f) return std::nullopt;
  for (const auto& sample : f->samples) {
    const Labels have = sample.all_labels();
    const bool all = std::all_of(want.begin(), want.end(), [&](const auto& w) {
      return std::find(have.begin(), have.end(), w) != have.end();
    });
    if (all) return Found{f->type, sample.value};
  }
  return std::nullopt;
}

// The sample of `name` with exactly `labels`, in any order; nullopt when absent.
inline std::optional<Found> exact(const MetricSink& s, const std::string& name, Labels labels) {
  const auto* f = family(s, name);
  if (!f) return std::nullopt;
  std::sort(labels.begin(), labels.end());
  for (const auto& sample : f->samples) {
    Labels l = sample.all_labels();
    std::sort(l.begin(), l.end());
    if (l == labels) return Found{f->type, sample.value};
  }
  return std::nullopt;
}

// exact()'s value when it is a u64 (a counter) or a double (a gauge); nullopt otherwise.
inline std::optional<std::uint64_t> u64(const MetricSink& s, const std::string& name, Labels labels) {
  const auto found = exact(s, name, std::move(labels));
  if (!found) return std::nullopt;
  if (const auto* u = std::get_if<std::uint64_t>(&found->value)) return *u;
  return std::nullopt;
}
inline std::optional<double> dbl(const MetricSink& s, const std::string& name, Labels labels) {
  const auto found = exact(s, name, std::move(labels));
  if (!found) return std::nullopt;
  if (const auto* d = std::get_if<double>(&found->value)) return *d;
  return std::nullopt;
}

// Every u64 sample keyed "name,label=value,..." (labels in the sample's order), for tests that
// compare a whole sink against a table.
inline std::map<std::string, std::uint64_t> u64_table(const MetricSink& out) {
  std::map<std::string, std::uint64_t> got;
  for (const auto& fam : out.families())
    for (const auto& smp : fam.samples) {
      std::string key(fam.name);
      for (const auto& [k, val] : smp.labels) key += "," + k + "=" + val;
      if (const auto* u = std::get_if<std::uint64_t>(&smp.value)) got[key] = *u;
    }
  return got;
}

}  // namespace rdma::testing
