// The query string of an extra HTTP path (/probe, /pma, /pma/targets): one decoder and one policy
// for every path, as blackbox_exporter and snmp_exporter answer. Pure, unit-tested and fuzzed
// (tests/fuzz/fuzz_query.cpp).
//  - Each `name=value` is percent-decoded once ("+" is a space, "%2C" a comma); a broken escape
//    is a bad request.
//  - Every name must be one the path takes and may appear once: an unknown or repeated parameter
//    is a bad request, never silently ignored or overridden.
//  - A bad request (malformed query, unknown module or target) is HTTP 400 with a one-line
//    reason (bad_request()); a request that ran and failed is the path's own answer (e.g. 200
//    with probe_success 0).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "exporter/http_handler.h"

namespace rdma::exporter {

// "a%2Cb+c" -> "a,b c"; nullopt for a "%" not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view s);

// The decoded parameters of one request.
class QueryParams {
 public:
  // The value of `name`; nullptr when absent.
  const std::string* get(std::string_view name) const;
  bool has(std::string_view name) const { return get(name) != nullptr; }
  const std::map<std::string, std::string, std::less<>>& all() const { return values_; }

 private:
  friend std::optional<QueryParams> parse_query(std::string_view, std::initializer_list<std::string_view>,
                                                std::string&);
  std::map<std::string, std::string, std::less<>> values_;
};

// Parses `query` (without the "?"): empty `&`-separated parts are skipped; every name must be one
// of `known`, given at most once, and at most kMaxQueryValue bytes long decoded (the HTTP server's
// request size bounds the whole query first). nullopt and `error` (one line naming the parameter,
// without a trailing newline) otherwise.
inline constexpr std::size_t kMaxQueryValue = 1024;
std::optional<QueryParams> parse_query(std::string_view query, std::initializer_list<std::string_view> known,
                                       std::string& error);

// A caller's name or value as a reason may quote it: printable ASCII only (others become '?'),
// at most 64 bytes.
std::string quoted(std::string_view s);

// The values of the paths' parameters, parsed one way: the whole value or nothing (no sign, no
// space, no prefix but the one named), so that two paths never disagree on what a port or a GUID is.
// A decimal number from `min` to `max` (a port, a LID).
std::optional<std::uint64_t> query_number(std::string_view v, std::uint64_t min, std::uint64_t max);
// "0x" (or "0X") and 1 to 16 hex digits: a node or port GUID, as /pma/targets lists them.
std::optional<std::uint64_t> query_guid(std::string_view v);

// The one answer to a bad request: 400, text/plain, `reason` on one line.
HttpResponse bad_request(std::string_view reason);

}  // namespace rdma::exporter
