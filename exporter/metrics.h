// The exposition model collectors write into. Counters keep their exact unsigned 64-bit value
// until the text is written (prometheus-cpp 1.0.1 keeps doubles and prints 16 significant
// digits, which turns 2^64-1 into 1.844674407370955e+19; we print the integer itself).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace rdma::exporter {

enum class MetricType : std::uint8_t { kCounter, kGauge, kHistogram, kUntyped };
std::string_view type_name(MetricType t);

using Labels = std::vector<std::pair<std::string, std::string>>;

struct HistogramValue {
  std::vector<double> upper_bounds;          // ascending, without +Inf
  std::vector<std::uint64_t> cumulative;     // same size as upper_bounds
  std::uint64_t count = 0;                   // the +Inf bucket
  double sum = 0;
};

using SampleValue = std::variant<std::uint64_t, double, HistogramValue>;

// A label set a collector registers once (a port's device and port, kept between scrapes) and
// emits samples against: its exposition text, `device="mlx5_0",port="1"` (values escaped, without
// braces), is rendered once, so that a scrape builds, escapes and allocates no labels per series.
// Copies share one rendering; an empty set has no labels.
class LabelSet {
  struct Data {
    Labels labels;
    std::string text;
  };

 public:
  LabelSet() = default;
  explicit LabelSet(Labels labels);
  const Labels& labels() const;
  std::string_view text() const { return data_ ? std::string_view(data_->text) : std::string_view(); }

  // A set as a sample holds it: without a share of its rendering, valid while a LabelSet that has
  // one lives (the sink the sample is in keeps one per set: see MetricSink::add).
  class View {
   public:
    const Labels& labels() const;
    std::string_view text() const { return data_ ? std::string_view(data_->text) : std::string_view(); }

   private:
    friend class LabelSet;
    const Data* data_ = nullptr;
  };
  View view() const {
    View v;
    v.data_ = data_.get();
    return v;
  }
  // Copies of one set compare equal.
  bool same(const LabelSet& o) const { return data_ == o.data_; }

 private:
  std::shared_ptr<const Data> data_;
};

// A sample's labels are, in this order: its set's, its own, and the one extra label. The extra
// label's name and value must outlive the sink's exposition (string literals, static tables).
struct Sample {
  Labels labels;
  SampleValue value;
  LabelSet::View set;
  std::string_view extra_name;
  std::string_view extra_value;

  // All of them as one vector, in exposition order (for tests and rare paths; allocates).
  Labels all_labels() const;
};

struct MetricFamily {
  // Interned (see MetricSink::family): valid for the life of the process, so that the many
  // short-lived sinks of a scrape do not each allocate every name and help text again.
  std::string_view name;
  std::string_view help;
  MetricType type = MetricType::kUntyped;
  std::vector<Sample> samples;
};

// Collects samples grouped by family, in first-declared order. Not thread-safe: each collector
// gets its own sink per scrape.
class MetricSink {
 public:
  // Finds or creates a family. Re-declaring a name with another type throws std::logic_error.
  MetricFamily& family(std::string_view name, MetricType type, std::string_view help);
  // Room for this many samples in each family created from now on: a collector that writes one
  // sample per port in each family sets the port count, so that the families' vectors are not
  // regrown (and their samples moved) log2(ports) times a scrape.
  void expect_per_family(std::size_t samples) { expect_per_family_ = samples; }

  void add(std::string_view name, MetricType type, std::string_view help, Labels labels, SampleValue value);
  void counter(std::string_view name, std::string_view help, Labels labels, std::uint64_t v) {
    add(name, MetricType::kCounter, help, std::move(labels), v);
  }
  void gauge(std::string_view name, std::string_view help, Labels labels, double v) {
    add(name, MetricType::kGauge, help, std::move(labels), v);
  }
  void gauge_u64(std::string_view name, std::string_view help, Labels labels, std::uint64_t v) {
    add(name, MetricType::kGauge, help, std::move(labels), v);
  }
  void info(std::string_view name, std::string_view help, Labels labels) {
    add(name, MetricType::kGauge, help, std::move(labels), std::uint64_t{1});
  }

  // Against a registered label set (first, so that no call with braced labels is ambiguous), with
  // at most one extra label of static lifetime (see Sample): no label is copied or escaped.
  void add(const LabelSet& set, std::string_view name, MetricType type, std::string_view help, SampleValue value,
           std::string_view extra_name = {}, std::string_view extra_value = {});
  void counter(const LabelSet& set, std::string_view name, std::string_view help, std::uint64_t v) {
    add(set, name, MetricType::kCounter, help, v);
  }
  void gauge(const LabelSet& set, std::string_view name, std::string_view help, double v,
             std::string_view extra_name = {}, std::string_view extra_value = {}) {
    add(set, name, MetricType::kGauge, help, v, extra_name, extra_value);
  }
  void gauge_u64(const LabelSet& set, std::string_view name, std::string_view help, std::uint64_t v,
                 std::string_view extra_name = {}, std::string_view extra_value = {}) {
    add(set, name, MetricType::kGauge, help, v, extra_name, extra_value);
  }

  // Exposition text rendered ahead of the scrape (a background snapshot: the fabric loop's tens
  // of thousands of samples are rendered once per refresh, not copied per scrape). Written after
  // the families; its families must not also be added here as samples.
  void append_rendered(std::shared_ptr<const std::string> text) { rendered_.push_back(std::move(text)); }
  const std::vector<std::shared_ptr<const std::string>>& rendered() const { return rendered_; }

  // Appends another sink's families and rendered texts (used to join the collectors' outputs).
  void append(MetricSink&& other);
  const std::vector<MetricFamily>& families() const { return families_; }
  std::size_t sample_count() const;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<MetricFamily> families_;
  std::size_t expect_per_family_ = 0;
  std::vector<std::shared_ptr<const std::string>> rendered_;
  // The label sets the samples' views point into, one share each, taken when a sample's set differs
  // from the last one kept: a collector writes a port's series together, so a scrape of the port
  // collector takes about two a device instead of one per sample (the atomic reference count of a
  // share per sample, and its release, showed in the profile under bench/port).
  std::vector<LabelSet> sets_;
  std::unordered_map<std::string_view, std::size_t, Hash, std::equal_to<>> index_;  // keys interned
  // Families by the address of the name they were last asked with (collectors pass literals and
  // static tables): a hit costs a compare instead of hashing the name; the name is compared all
  // the same, so a buffer reused for another name only misses.
  struct Recent {
    const char* name = nullptr;
    std::size_t index = 0;
  };
  static constexpr std::size_t kRecent = 128;
  std::array<Recent, kRecent> recent_{};
};

}  // namespace rdma::exporter
