#include "exporter/text.h"

namespace rdma::exporter {
namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Copies v to out with escape(c) for each ASCII byte that has one (nullptr: none), well-formed
// multi-byte sequences as they are and U+FFFD for every other byte; stops after `limit` input
// bytes, at a character boundary. Runs that need nothing are appended in one piece.
template <class Escape>
void append_checked(std::string& out, std::string_view v, std::size_t limit, Escape escape) {
  if (v.size() > limit) {
    std::size_t cut = limit;
    while (cut > 0 && continuation(static_cast<unsigned char>(v[cut]))) --cut;  // not inside a sequence
    v = v.substr(0, cut);
  }
  std::size_t start = 0;
  for (std::size_t i = 0; i < v.size();) {
    const auto c = static_cast<unsigned char>(v[i]);
    if (c < 0x80) {
      const char* replacement = escape(c);
      if (replacement) {
        out.append(v.data() + start, i - start);
        out += replacement;
        start = i + 1;
      }
      ++i;
      continue;
    }
    if (const std::size_t n = utf8_sequence_at(v, i)) {
      i += n;
      continue;
    }
    out.append(v.data() + start, i - start);
    out += kReplacement;
    start = ++i;
  }
  out.append(v.data() + start, v.size() - start);
}
}  // namespace

std::size_t utf8_sequence_at(std::string_view v, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(v[i + k]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte (shortest form, no surrogates)
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;
  else if (c == 0xED) n = 3, hi = 0x9F;
  else if (c >= 0xE1 && c <= 0xEF) n = 3;
  else if (c == 0xF0) n = 4, lo = 0x90;
  else if (c == 0xF4) n = 4, hi = 0x8F;
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else return 0;
  if (v.size() - i < n || b(1) < lo || b(1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (!continuation(b(k))) return 0;
  return n;
}

bool is_valid_utf8(std::string_view v) {
  for (std::size_t i = 0; i < v.size();) {
    const std::size_t n = utf8_sequence_at(v, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

void append_escaped_label_value(std::string& out, std::string_view v) {
  append_checked(out, v, kMaxLabelValueBytes, [](unsigned char c) {
    return c == '\\' ? "\\\\" : c == '"' ? "\\\"" : c == '\n' ? "\\n" : nullptr;
  });
}

void append_json_string(std::string& out, std::string_view v) {
  static constexpr const char* kControl[32] = {
      "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
      "\\b",     "\\t",     "\\n",     "\\u000b", "\\f",     "\\r",     "\\u000e", "\\u000f",
      "\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
      "\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f"};
  out += '"';
  append_checked(out, v, std::string_view::npos, [](unsigned char c) -> const char* {
    return c < 0x20 ? kControl[c] : c == '"' ? "\\\"" : c == '\\' ? "\\\\" : nullptr;
  });
  out += '"';
}

}  // namespace rdma::exporter
