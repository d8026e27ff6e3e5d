#include "sources/mad/pma_decode.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace rdma::mad {

std::string_view attr_name(PmaAttr a) {
  switch (a) {
    case PmaAttr::kClassPortInfo: return "ClassPortInfo";
    case PmaAttr::kPortCounters: return "PortCounters";
    case PmaAttr::kPortRcvErrorDetails: return "PortRcvErrorDetails";
    case PmaAttr::kPortXmitDiscardDetails: return "PortXmitDiscardDetails";
    case PmaAttr::kPortVLXmitWaitCounters: return "PortVLXmitWaitCounters";
    case PmaAttr::kPortCountersExtended: return "PortCountersExtended";
    case PmaAttr::kPortExtendedSpeedsCounters: return "PortExtendedSpeedsCounters";
  }
  return "unknown";
}

namespace {
void put_be(std::uint8_t* p, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) {
    p[i] = static_cast<std::uint8_t>(v & 0xff);
    v >>= 8;
  }
}
std::uint64_t get_be(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}
}  // namespace

std::array<std::uint8_t, kMadSize> build_pma_get(std::uint64_t tid, PmaAttr attr, std::uint8_t port_select,
                                                 std::uint32_t attr_mod) {
  std::array<std::uint8_t, kMadSize> m{};
  m[0] = 1;              // BaseVersion
  m[1] = kPerfMgtClass;  // MgmtClass
  m[2] = 1;              // ClassVersion
  m[3] = 0x01;           // Method Get
  put_be(&m[8], tid, 8);
  put_be(&m[16], static_cast<std::uint16_t>(attr), 2);
  put_be(&m[20], attr_mod, 4);
  if (attr != PmaAttr::kClassPortInfo) m[kPmaDataOffset + 1] = port_select;
  return m;
}

std::optional<MadHeader> parse_header(std::span<const std::uint8_t> mad) {
  if (mad.size() < 24) return std::nullopt;
  MadHeader h;
  h.base_version = mad[0];
  h.mgmt_class = mad[1];
  h.class_version = mad[2];
  h.method = mad[3];
  h.status = static_cast<std::uint16_t>(get_be(&mad[4], 2));
  h.tid = get_be(&mad[8], 8);
  h.attr_id = static_cast<std::uint16_t>(get_be(&mad[16], 2));
  h.attr_mod = static_cast<std::uint32_t>(get_be(&mad[20], 4));
  return h;
}

std::string status_text(std::uint16_t status) {
  if (status == 0) return "";
  std::string s;
  if (status & 1) s += "busy ";
  if (status & 2) s += "redirect ";
  switch ((status >> 2) & 7) {
    case 0: break;
    case 1: s += "bad version "; break;
    case 2: s += "unsupported method "; break;
    case 3: s += "unsupported attribute "; break;
    case 7: s += "invalid field "; break;
    default: s += "reserved code "; break;
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, "(0x%04x)", status);
  return s + buf;
}

std::optional<std::uint64_t> get_field(std::span<const std::uint8_t> bytes, std::size_t bit_offset, unsigned width) {
  if (width == 0 || width > 64) return std::nullopt;
  if (bit_offset + width > bytes.size() * 8) return std::nullopt;
  std::uint64_t v = 0;
  for (unsigned i = 0; i < width; ++i) {
    const std::size_t bit = bit_offset + i;
    v = (v << 1) | ((bytes[bit / 8] >> (7 - bit % 8)) & 1u);
  }
  return v;
}

namespace {
using Reader = FieldReader;
}  // namespace

std::optional<ClassPortInfo> decode_class_port_info(std::span<const std::uint8_t> data) {
  if (data.size() < 8) return std::nullopt;
  Reader r{data};
  return ClassPortInfo{static_cast<std::uint16_t>(r(16, 16)), r.u32(32, 27)};
}

std::optional<PortCounters> decode_port_counters(std::span<const std::uint8_t> data) {
  if (data.size() < 44) return std::nullopt;
  Reader r{data};
  PortCounters c;
  c.port_select = static_cast<std::uint8_t>(r(8, 8));
  c.symbol_errors = r.u32(32, 16);
  c.link_error_recovery = r.u32(48, 8);
  c.link_downed = r.u32(56, 8);
  c.rcv_errors = r.u32(64, 16);
  c.rcv_remote_physical_errors = r.u32(80, 16);
  c.rcv_switch_relay_errors = r.u32(96, 16);
  c.xmit_discards = r.u32(112, 16);
  c.xmit_constraint_errors = r.u32(128, 8);
  c.rcv_constraint_errors = r.u32(136, 8);
  c.local_link_integrity_errors = r.u32(152, 4);
  c.excessive_buffer_overrun_errors = r.u32(156, 4);
  c.qp1_dropped = r.u32(160, 16);
  c.vl15_dropped = r.u32(176, 16);
  c.xmit_data = r.u32(192, 32);
  c.rcv_data = r.u32(224, 32);
  c.xmit_pkts = r.u32(256, 32);
  c.rcv_pkts = r.u32(288, 32);
  c.xmit_wait = r.u32(320, 32);
  return c;
}

std::optional<PortCountersExtended> decode_port_counters_ext(std::span<const std::uint8_t> data) {
  if (data.size() < 72) return std::nullopt;
  Reader r{data};
  PortCountersExtended c;
  c.port_select = static_cast<std::uint8_t>(r(8, 8));
  c.xmit_data = r(64, 64);
  c.rcv_data = r(128, 64);
  c.xmit_pkts = r(192, 64);
  c.rcv_pkts = r(256, 64);
  c.unicast_xmit_pkts = r(320, 64);
  c.unicast_rcv_pkts = r(384, 64);
  c.multicast_xmit_pkts = r(448, 64);
  c.multicast_rcv_pkts = r(512, 64);
  return c;
}

std::optional<PortRcvErrorDetails> decode_rcv_error_details(std::span<const std::uint8_t> data) {
  if (data.size() < 16) return std::nullopt;
  Reader r{data};
  PortRcvErrorDetails c;
  c.port_select = static_cast<std::uint8_t>(r(8, 8));
  c.local_physical_errors = r.u32(32, 16);
  c.malformed_packet_errors = r.u32(48, 16);
  c.buffer_overrun_errors = r.u32(64, 16);
  c.dlid_mapping_errors = r.u32(80, 16);
  c.vl_mapping_errors = r.u32(96, 16);
  c.looping_errors = r.u32(112, 16);
  return c;
}

std::optional<PortXmitDiscardDetails> decode_xmit_discard_details(std::span<const std::uint8_t> data) {
  if (data.size() < 12) return std::nullopt;
  Reader r{data};
  PortXmitDiscardDetails c;
  c.port_select = static_cast<std::uint8_t>(r(8, 8));
  c.inactive_discards = r.u32(32, 16);
  c.neighbor_mtu_discards = r.u32(48, 16);
  c.sw_lifetime_limit_discards = r.u32(64, 16);
  c.sw_hoq_lifetime_limit_discards = r.u32(80, 16);
  return c;
}

std::optional<PortVLXmitWait> decode_vl_xmit_wait(std::span<const std::uint8_t> data) {
  if (data.size() < 36) return std::nullopt;
  Reader r{data};
  PortVLXmitWait c;
  c.port_select = static_cast<std::uint8_t>(r(8, 8));
  for (std::size_t i = 0; i < c.vl.size(); ++i) c.vl[i] = r.u32(32 + 16 * i, 16);
  return c;
}

const std::string* NodeNameMap::find(std::uint64_t guid) const {
  auto it = std::lower_bound(entries.begin(), entries.end(), guid,
                             [](const auto& e, std::uint64_t g) { return e.first < g; });
  return it != entries.end() && it->first == guid ? &it->second : nullptr;
}

NodeNameMap parse_node_name_map(std::string_view text) {
  NodeNameMap m;
  int line_no = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    auto skip_ws = [&line] {
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.remove_prefix(1);
    };
    skip_ws();
    if (line.empty() || line.front() == '#') continue;
    // GUID: 0x-prefixed hex or plain hex, as ibnetdiscover writes it.
    std::size_t i = 0;
    if (line.size() > 2 && line[0] == '0' && (line[1] == 'x' || line[1] == 'X')) i = 2;
    std::uint64_t guid = 0;
    std::size_t digits = 0;
    for (; i < line.size() && std::isxdigit(static_cast<unsigned char>(line[i])); ++i, ++digits) {
      const char ch = static_cast<char>(std::tolower(static_cast<unsigned char>(line[i])));
      guid = (guid << 4) | static_cast<std::uint64_t>(ch <= '9' ? ch - '0' : ch - 'a' + 10);
    }
    if (digits == 0 || digits > 16 || i >= line.size() || !std::isspace(static_cast<unsigned char>(line[i]))) {
      m.bad_lines.push_back(line_no);
      continue;
    }
    line.remove_prefix(i);
    skip_ws();
    std::string name;
    if (!line.empty() && line.front() == '"') {
      const auto end = line.find('"', 1);
      if (end == std::string_view::npos) {
        m.bad_lines.push_back(line_no);
        continue;
      }
      name = std::string(line.substr(1, end - 1));
    } else {
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
      name = std::string(line);
    }
    if (name.empty()) {
      m.bad_lines.push_back(line_no);
      continue;
    }
    m.entries.emplace_back(guid, std::move(name));
  }
  std::stable_sort(m.entries.begin(), m.entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // The last mapping of a GUID wins, like infiniband-diags' map.
  std::vector<std::pair<std::uint64_t, std::string>> unique;
  for (auto& e : m.entries) {
    if (!unique.empty() && unique.back().first == e.first) unique.back() = std::move(e);
    else unique.push_back(std::move(e));
  }
  m.entries = std::move(unique);
  return m;
}

std::string guid_label(std::uint64_t guid) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(guid));
  return buf;
}

}  // namespace rdma::mad
