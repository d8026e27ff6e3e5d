// Arbitrary bytes as label values (a device or node name, a NodeDescription) and JSON strings:
// the text writer's output must be valid UTF-8 that reads back, sample by sample, as the
// Prometheus text format, with each value as the writer's sanitised form of the input; the JSON
// escaper's output must be one valid JSON string (RFC 8259) of valid UTF-8.
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/exposition.h"
#include "exporter/text.h"

namespace {
using namespace rdma::exporter;

void require(bool ok) {
  if (!ok) __builtin_trap();
}

// The input as the writer means to keep it: invalid bytes as U+FFFD, cut at the bound.
std::string sanitised(std::string_view v, std::size_t limit) {
  if (v.size() > limit) {
    std::size_t cut = limit;
    while (cut > 0 && (static_cast<unsigned char>(v[cut]) & 0xC0) == 0x80) --cut;
    v = v.substr(0, cut);
  }
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    const std::size_t n = utf8_sequence_at(v, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(v.substr(i, n));
      i += n;
    }
  }
  return out;
}

// One label value of the text format starting after its opening quote: the unescaped value, and
// `pos` past the closing quote. Only \\, \" and \n are escapes; a raw newline cannot occur.
std::string read_label_value(std::string_view text, std::size_t& pos) {
  std::string v;
  for (;;) {
    require(pos < text.size());
    const char c = text[pos++];
    require(c != '\n');
    if (c == '"') return v;
    if (c != '\\') {
      v += c;
      continue;
    }
    require(pos < text.size());
    const char e = text[pos++];
    require(e == '\\' || e == '"' || e == 'n');
    v += e == 'n' ? '\n' : e;
  }
}

// A whole exposition: # lines, then `name{k="v",...} value` lines. Returns the label values in order.
std::vector<std::string> parse_text(std::string_view text) {
  std::vector<std::string> values;
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (text[pos] == '#') {
      const auto nl = text.find('\n', pos);
      require(nl != std::string_view::npos);
      pos = nl + 1;
      continue;
    }
    while (pos < text.size() && (std::isalnum(static_cast<unsigned char>(text[pos])) || text[pos] == '_')) ++pos;
    require(pos < text.size());
    if (text[pos] == '{') {
      ++pos;
      for (;;) {
        while (pos < text.size() && (std::isalnum(static_cast<unsigned char>(text[pos])) || text[pos] == '_')) ++pos;
        require(pos + 1 < text.size() && text[pos] == '=' && text[pos + 1] == '"');
        pos += 2;
        values.push_back(read_label_value(text, pos));
        require(pos < text.size());
        if (text[pos] == '}') break;
        require(text[pos] == ',');
        ++pos;
      }
      ++pos;
    }
    require(pos < text.size() && text[pos] == ' ');
    const auto nl = text.find('\n', pos);
    require(nl != std::string_view::npos && nl > pos + 1);
    pos = nl + 1;
  }
  return values;
}

// One JSON string (quotes included) as RFC 8259 defines it.
void check_json_string(std::string_view s) {
  require(s.size() >= 2 && s.front() == '"' && s.back() == '"');
  require(is_valid_utf8(s));
  for (std::size_t i = 1; i + 1 < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    require(c >= 0x20 && c != '"');
    if (c != '\\') continue;
    require(i + 2 < s.size());
    const char e = s[++i];
    if (e == 'u') {
      require(i + 4 < s.size());
      for (int k = 1; k <= 4; ++k) require(std::isxdigit(static_cast<unsigned char>(s[i + k])));
      i += 4;
    } else {
      require(std::string_view("\"\\/bfnrt").find(e) != std::string_view::npos);
    }
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  // Two values from one input (split at the first NUL, if any), through both label paths: a
  // registered set (a port's device, rendered once) and a sample's own labels (a node name).
  const auto nul = in.find('\0');
  const std::string device = in.substr(0, nul), name = nul == std::string::npos ? in : in.substr(nul + 1);
  MetricSink sink;
  const LabelSet set(Labels{{"device", device}, {"port", "1"}});
  sink.counter(set, "rdma_x_total", "help", 1);
  sink.info("rdma_node_info", "help", {{"node_name", name}, {"node_description", in}});
  std::string text;
  write_text(sink, text);
  require(is_valid_utf8(text));
  const auto values = parse_text(text);
  require(values.size() == 4);
  require(values[0] == sanitised(device, kMaxLabelValueBytes));
  require(values[1] == "1");
  require(values[2] == sanitised(name, kMaxLabelValueBytes));
  require(values[3] == sanitised(in, kMaxLabelValueBytes));
  std::string json;
  append_json_string(json, in);
  check_json_string(json);
  return 0;
}
