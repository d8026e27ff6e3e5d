#include "exporter/query.h"

#include <algorithm>
#include <charconv>
#include <system_error>

namespace rdma::exporter {
namespace {
int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string list(std::initializer_list<std::string_view> known) {
  std::string out;
  for (auto k : known) out += (out.empty() ? "" : ", ") + std::string(k);
  return out.empty() ? "this path takes none" : out;
}
}  // namespace

std::string quoted(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) out += static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f ? c : '?';
  return out;
}

std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] != '%') {
      out += s[i];
    } else {
      if (i + 2 >= s.size()) return std::nullopt;
      const int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    }
  }
  return out;
}

const std::string* QueryParams::get(std::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

std::optional<QueryParams> parse_query(std::string_view query, std::initializer_list<std::string_view> known,
                                       std::string& error) {
  QueryParams out;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (part.empty()) continue;
    const auto eq = part.find('=');
    auto name = percent_decode(part.substr(0, eq));
    auto value = percent_decode(eq == std::string_view::npos ? std::string_view{} : part.substr(eq + 1));
    if (!name || !value) return error = "malformed percent-encoding in parameter `" + quoted(part.substr(0, eq)) + "`", std::nullopt;
    if (std::find(known.begin(), known.end(), *name) == known.end())
      return error = "unknown parameter `" + quoted(*name) + "` (" + list(known) + ")", std::nullopt;
    if (value->size() > kMaxQueryValue)
      return error = "parameter `" + *name + "` is longer than " + std::to_string(kMaxQueryValue) + " bytes", std::nullopt;
    if (!out.values_.emplace(*name, std::move(*value)).second)
      return error = "parameter `" + *name + "` given twice", std::nullopt;
  }
  return out;
}

std::optional<std::uint64_t> query_number(std::string_view v, std::uint64_t min, std::uint64_t max) {
  std::uint64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x, 10);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || x < min || x > max) return std::nullopt;
  return x;
}

std::optional<std::uint64_t> query_guid(std::string_view v) {
  if (!(v.starts_with("0x") || v.starts_with("0X"))) return std::nullopt;
  v.remove_prefix(2);
  std::uint64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x, 16);
  if (v.empty() || v.size() > 16 || ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
  return x;
}

HttpResponse bad_request(std::string_view reason) {
  std::string line(reason);
  std::replace_if(line.begin(), line.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return {400, "text/plain; charset=utf-8", line + "\n"};
}

}  // namespace rdma::exporter
