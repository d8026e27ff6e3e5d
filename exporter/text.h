// Valid UTF-8 in every text the exporter writes from bytes it did not choose: label values of the
// exposition (NodeDescription, peer names, netdev names) and JSON strings (/pma/targets, JSON log
// lines). Any node of a fabric can set its NodeDescription to any 64 bytes; one invalid byte in a
// label makes Prometheus refuse the whole scrape, and one in a JSON document makes every target
// of an http_sd_config vanish. The writers (exposition.cpp, the JSON writers) call these, so that
// no collector has to remember.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace rdma::exporter {

// A label value is cut, at a character boundary, after this many bytes of its input (before
// escaping): a NodeDescription is 64 bytes, a device or netdev name 64; nothing legitimate comes
// near it, and a hostile value cannot make a series (or the scrape) arbitrarily large.
inline constexpr std::size_t kMaxLabelValueBytes = 1024;

// The length of the well-formed UTF-8 sequence (RFC 3629: shortest form, no surrogates, nothing
// above U+10FFFF) that starts at v[i], or 0 when the byte there starts none.
std::size_t utf8_sequence_at(std::string_view v, std::size_t i);
bool is_valid_utf8(std::string_view v);

// v as a Prometheus text-format label value (without the quotes): `\`, `"` and newline escaped,
// every byte that starts no well-formed sequence replaced by U+FFFD, cut after
// kMaxLabelValueBytes input bytes.
void append_escaped_label_value(std::string& out, std::string_view v);

// v as a JSON string, quotes included (RFC 8259): `"`, `\` and control characters escaped,
// invalid bytes replaced by U+FFFD.
void append_json_string(std::string& out, std::string_view v);

}  // namespace rdma::exporter
