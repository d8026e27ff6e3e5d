#include "exporter/metrics.h"

#include "exporter/text.h"  // append_escaped_label_value: the model renders its label sets once

#include <iterator>
#include <mutex>
#include <stdexcept>
#include <unordered_set>

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

namespace {
// Metric names and help texts are few and fixed per driver and collector (never built from
// sample values), so keeping one copy of each for the process's life is bounded.
// Each thread remembers, by the address of the text it was asked with (collectors pass literals
// and static tables), what that text was interned as: a hit compares the text instead of hashing
// it under the lock (each scrape's sinks intern every family's name and help again: 2.3 % of the
// exporter's CPU under bench/port). The text is compared all the same: a reused buffer only misses.
std::string_view intern(std::string_view s) {
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view v) const { return std::hash<std::string_view>{}(v); }
  };
  struct Seen {
    const char* data = nullptr;
    std::string_view interned;
  };
  constexpr std::size_t kSeen = 256;
  // Allocated by the threads that intern (collectors' workers), not in every thread's TLS block:
  // the HTTP server's dozens of threads would each carry (and touch) 6 KiB.
  thread_local std::unique_ptr<std::array<Seen, kSeen>> seen;
  if (!seen) seen = std::make_unique<std::array<Seen, kSeen>>();
  Seen& hit = (*seen)[(reinterpret_cast<std::uintptr_t>(s.data()) >> 3) % kSeen];
  if (hit.data == s.data() && hit.interned == s) return hit.interned;
  static std::mutex mu;
  static std::unordered_set<std::string, Hash, std::equal_to<>> strings;  // nodes never move
  std::lock_guard lock(mu);
  auto it = strings.find(s);
  if (it == strings.end()) it = strings.emplace(s).first;
  hit = Seen{s.data(), *it};
  return *it;
}
}  // namespace

MetricFamily& MetricSink::family(std::string_view name, MetricType type, std::string_view help) {
  Recent& recent = recent_[(reinterpret_cast<std::uintptr_t>(name.data()) >> 3) % kRecent];
  std::size_t index = recent.index;
  if (recent.name != name.data() || index >= families_.size() || families_[index].name != name) {
    auto it = index_.find(name);
    index = it != index_.end() ? it->second : families_.size();
  }
  if (index < families_.size()) {
    recent = Recent{name.data(), index};
    auto& f = families_[index];
    if (f.type != type) throw std::logic_error("metric " + std::string(name) + " declared with two types");
    return f;
  }
  const std::string_view stable_name = intern(name);
  recent = Recent{name.data(), families_.size()};
  index_.emplace(stable_name, families_.size());
  families_.push_back(MetricFamily{stable_name, intern(help), type, {}});
  families_.back().samples.reserve(expect_per_family_);
  return families_.back();
}

void MetricSink::add(std::string_view name, MetricType type, std::string_view help, Labels labels,
                     SampleValue value) {
  Sample& s = family(name, type, help).samples.emplace_back();
  s.labels = std::move(labels);
  s.value = std::move(value);
}

LabelSet::LabelSet(Labels labels) {
  auto d = std::make_shared<Data>();
  for (const auto& [k, v] : labels) {
    if (!d->text.empty()) d->text += ',';
    d->text += k;
    d->text += "=\"";
    append_escaped_label_value(d->text, v);
    d->text += '"';
  }
  d->labels = std::move(labels);
  data_ = std::move(d);
}

namespace {
const Labels kNoLabels;
}

const Labels& LabelSet::labels() const { return data_ ? data_->labels : kNoLabels; }
const Labels& LabelSet::View::labels() const { return data_ ? data_->labels : kNoLabels; }

Labels Sample::all_labels() const {
  Labels all = set.labels();
  all.insert(all.end(), labels.begin(), labels.end());
  if (!extra_name.empty()) all.emplace_back(extra_name, extra_value);
  return all;
}

void MetricSink::add(const LabelSet& set, std::string_view name, MetricType type, std::string_view help,
                     SampleValue value, std::string_view extra_name, std::string_view extra_value) {
  // Made in place: a Sample is 144 bytes, and a temporary moved in and destroyed, at ~800 samples a
  // scrape of the port collector, showed in the profile under bench/port. Filled field by field:
  // clang 14 (the fuzz build) has no parenthesized aggregate initialization for emplace_back.
  if (sets_.empty() || !sets_.back().same(set)) sets_.push_back(set);
  Sample& s = family(name, type, help).samples.emplace_back();
  s.value = std::move(value);
  s.set = set.view();
  s.extra_name = extra_name;
  s.extra_value = extra_value;
}

void MetricSink::append(MetricSink&& other) {
  for (auto& f : other.families_) {
    auto& mine = family(f.name, f.type, f.help);
    if (mine.samples.empty()) {
      mine.samples = std::move(f.samples);
    } else {
      mine.samples.insert(mine.samples.end(), std::make_move_iterator(f.samples.begin()),
                          std::make_move_iterator(f.samples.end()));
    }
  }
  for (auto& r : other.rendered_) rendered_.push_back(std::move(r));
  for (auto& set : other.sets_) sets_.push_back(std::move(set));  // the moved samples' views point into these
  other.sets_.clear();
  other.families_.clear();
  other.index_.clear();
  other.recent_ = {};
  other.rendered_.clear();
}

std::size_t MetricSink::sample_count() const {
  std::size_t n = 0;
  for (const auto& f : families_) n += f.samples.size();
  return n;
}

}  // namespace rdma::exporter
