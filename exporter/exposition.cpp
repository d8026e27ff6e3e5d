#include "exporter/exposition.h"

#include <zlib.h>

#include <charconv>
#include <stdexcept>
#include <cmath>

namespace rdma::exporter {
namespace {

// v with each character escape() gives a replacement for written as that replacement; runs
// without one appended in one piece. A plain loop: find_first_of calls memchr once per character
// of these short values.
template <class Escape>
void append_escaping(std::string& out, std::string_view v, Escape escape) {
  std::size_t start = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const char* replacement = escape(v[i]);
    if (!replacement) continue;
    out.append(v.data() + start, i - start);
    out += replacement;
    start = i + 1;
  }
  out.append(v.data() + start, v.size() - start);
}

// A help text is ~100 characters, and every family's is written at each scrape.
void append_help(std::string& out, std::string_view help) {
  append_escaping(out, help, [](char c) { return c == '\\' ? "\\\\" : c == '\n' ? "\\n" : nullptr; });
}

void append_labels(std::string& out, const Labels& labels, std::string_view extra_name = {},
                   std::string_view extra_value = {}) {
  if (labels.empty() && extra_name.empty()) return;
  out += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += k;
    out += "=\"";
    append_escaped_label_value(out, v);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!first) out += ',';
    out += extra_name;
    out += "=\"";
    append_escaped_label_value(out, extra_value);
    out += '"';
  }
  out += '}';
}

void append_u64(std::string& out, std::uint64_t v) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, p);
}

void write_histogram(std::string& out, std::string_view name, const Labels& labels, const HistogramValue& h) {
  std::string bound;
  for (std::size_t i = 0; i < h.upper_bounds.size(); ++i) {
    bound.clear();
    append_double(bound, h.upper_bounds[i]);
    out += name;
    out += "_bucket";
    append_labels(out, labels, "le", bound);
    out += ' ';
    append_u64(out, i < h.cumulative.size() ? h.cumulative[i] : h.count);
    out += '\n';
  }
  out += name;
  out += "_bucket";
  append_labels(out, labels, "le", "+Inf");
  out += ' ';
  append_u64(out, h.count);
  out += '\n';
  out += name;
  out += "_sum";
  append_labels(out, labels);
  out += ' ';
  append_double(out, h.sum);
  out += '\n';
  out += name;
  out += "_count";
  append_labels(out, labels);
  out += ' ';
  append_u64(out, h.count);
  out += '\n';
}

}  // namespace

void append_double(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[32];
    auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest exact round-trip
    out.append(buf, p);
  }
}

void append_value(std::string& out, const SampleValue& v) {
  if (auto* u = std::get_if<std::uint64_t>(&v)) append_u64(out, *u);
  else if (auto* d = std::get_if<double>(&v)) append_double(out, *d);
}

namespace {
void write_header(std::string& out, std::string_view name, std::string_view help, MetricType type) {
  out += "# HELP ";
  out += name;
  out += ' ';
  append_help(out, help);
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type_name(type);
  out += '\n';
}

// A sample's labels: the pre-rendered text of its set, its own, its extra one.
void append_sample_labels(std::string& out, const Sample& s) {
  const std::string_view set = s.set.text();
  if (set.empty()) return append_labels(out, s.labels, s.extra_name, s.extra_value);
  out += '{';
  out += set;
  for (const auto& [k, v] : s.labels) {
    out += ',';
    out += k;
    out += "=\"";
    append_escaped_label_value(out, v);
    out += '"';
  }
  if (!s.extra_name.empty()) {
    out += ',';
    out += s.extra_name;
    out += "=\"";
    append_escaped_label_value(out, s.extra_value);
    out += '"';
  }
  out += '}';
}

void write_samples(std::string& out, const MetricFamily& f) {
  for (const auto& s : f.samples) {
    if (auto* h = std::get_if<HistogramValue>(&s.value)) {
      if (s.set.text().empty() && s.extra_name.empty()) write_histogram(out, f.name, s.labels, *h);
      else write_histogram(out, f.name, s.all_labels(), *h);
      continue;
    }
    out += f.name;
    append_sample_labels(out, s);
    out += ' ';
    append_value(out, s.value);
    out += '\n';
  }
}
}  // namespace

void write_text(const std::vector<MetricFamily>& families, std::string& out) {
  for (const auto& f : families) {
    if (f.samples.empty()) continue;
    write_header(out, f.name, f.help, f.type);
    write_samples(out, f);
  }
}

void TextAccumulator::add(MetricSink&& part) {
  for (const auto& f : part.families()) {
    if (f.samples.empty()) continue;
    auto [it, inserted] = index_.try_emplace(f.name, families_.size());
    if (inserted) families_.push_back(Family{f.name, f.help, f.type, {}});
    Family& mine = families_[it->second];
    if (mine.type != f.type) throw std::logic_error("metric " + std::string(f.name) + " declared with two types");
    write_samples(mine.lines, f);
  }
  part = MetricSink();
}

std::string TextAccumulator::finish() && {
  std::size_t size = 0;
  for (const auto& f : families_) size += f.lines.size() + f.help.size() + 2 * f.name.size() + 32;
  std::string out;
  out.reserve(size);
  for (auto& f : families_) {
    write_header(out, f.name, f.help, f.type);
    out += f.lines;
    std::string().swap(f.lines);  // release as we go: the peak stays near one copy of the text
  }
  families_.clear();
  index_.clear();
  return out;
}

void write_text(const MetricSink& sink, std::string& out) {
  write_text(sink.families(), out);
  for (const auto& block : sink.rendered()) out += *block;
}

std::string gzip_compress(std::string_view data, int level) {
  z_stream zs{};
  // windowBits 15 + 16 selects the gzip wrapper.
  if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  std::string out;
  out.resize(deflateBound(&zs, static_cast<uLong>(data.size())));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return {};
  return out;
}

bool accepts_gzip(std::string_view header) {
  std::size_t pos = 0;
  while (pos <= header.size()) {
    auto comma = header.find(',', pos);
    auto item = header.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    auto semi = item.find(';');
    auto coding = item.substr(0, semi);
    while (!coding.empty() && coding.back() == ' ') coding.remove_suffix(1);
    if (coding == "gzip" || coding == "*") {
      bool zero_q = false;
      if (semi != std::string_view::npos) {
        auto params = item.substr(semi + 1);
        auto q = params.find("q=");
        if (q != std::string_view::npos) {
          auto val = params.substr(q + 2);
          double qv = 1;
          std::from_chars(val.data(), val.data() + val.size(), qv);
          zero_q = qv <= 0;
        }
      }
      if (!zero_q) return true;
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return false;
}

}  // namespace rdma::exporter
