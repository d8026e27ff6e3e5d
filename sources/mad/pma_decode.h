// Performance Management (PMA, MAD class 0x04) attributes as pure functions on bytes: request
// building, MAD header parsing and attribute decoders. No libibmad, no I/O: unit-tested against
// libibmad's own field tables and fuzzed on arbitrary bytes (a short or malformed buffer yields
// std::nullopt, never a read past the end).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdma::mad {

inline constexpr std::size_t kMadSize = 256;
inline constexpr std::size_t kPmaDataOffset = 64;  // GS header (24) + 40 reserved bytes
inline constexpr std::size_t kPmaDataSize = kMadSize - kPmaDataOffset;
inline constexpr std::uint8_t kPerfMgtClass = 0x04;

// Attribute IDs (IBA vol1 16.1.3).
enum class PmaAttr : std::uint16_t {
  kClassPortInfo = 0x0001,
  kPortCounters = 0x0012,
  kPortRcvErrorDetails = 0x0015,
  kPortXmitDiscardDetails = 0x0016,
  kPortVLXmitWaitCounters = 0x001C,
  kPortCountersExtended = 0x001D,
  kPortExtendedSpeedsCounters = 0x001F,  // decoded in smp_decode.h
};
std::string_view attr_name(PmaAttr a);

// PerfMgt ClassPortInfo:CapabilityMask bits. Not exported by Debian's <infiniband/mad.h>.
inline constexpr std::uint16_t kCapAllPortSelect = 1u << 8;
inline constexpr std::uint16_t kCapExtWidth = 1u << 9;         // full PortCountersExtended
inline constexpr std::uint16_t kCapExtWidthNoIetf = 1u << 10;  // PortCountersExtended without uni/multicast
inline constexpr std::uint16_t kCapXmitWait = 1u << 12;        // PortCounters:PortXmitWait valid

// A Get(attr) request with the given transaction ID; PortSelect goes into data byte 1 (ignored by
// ClassPortInfo).
std::array<std::uint8_t, kMadSize> build_pma_get(std::uint64_t tid, PmaAttr attr, std::uint8_t port_select,
                                                 std::uint32_t attr_mod = 0);

struct MadHeader {
  std::uint8_t base_version = 0;
  std::uint8_t mgmt_class = 0;
  std::uint8_t class_version = 0;
  std::uint8_t method = 0;  // with the response bit 0x80
  std::uint16_t status = 0;
  std::uint64_t tid = 0;
  std::uint16_t attr_id = 0;
  std::uint32_t attr_mod = 0;
};
// nullopt when shorter than the 24-byte common header.
std::optional<MadHeader> parse_header(std::span<const std::uint8_t> mad);

// Describes a MAD status (IBA 13.4.7): "" when 0, else e.g. "unsupported attribute".
std::string status_text(std::uint16_t status);
// Bits 2..4 = 2 (method) or 3 (method/attribute): the agent does not implement it.
inline bool status_unsupported(std::uint16_t status) {
  const unsigned code = (status >> 2) & 7u;
  return code == 2 || code == 3;
}

struct ClassPortInfo {
  std::uint16_t capability_mask = 0;
  std::uint32_t capability_mask2 = 0;  // 27 bits
};

// PortCounters (0x12). Field widths are those of the attribute (4, 8, 16 or 32 bits).
struct PortCounters {
  std::uint8_t port_select = 0;
  std::uint32_t symbol_errors = 0;               // 16
  std::uint32_t link_error_recovery = 0;         // 8
  std::uint32_t link_downed = 0;                 // 8
  std::uint32_t rcv_errors = 0;                  // 16
  std::uint32_t rcv_remote_physical_errors = 0;  // 16
  std::uint32_t rcv_switch_relay_errors = 0;     // 16
  std::uint32_t xmit_discards = 0;               // 16
  std::uint32_t xmit_constraint_errors = 0;      // 8
  std::uint32_t rcv_constraint_errors = 0;       // 8
  std::uint32_t local_link_integrity_errors = 0; // 4
  std::uint32_t excessive_buffer_overrun_errors = 0;  // 4
  std::uint32_t qp1_dropped = 0;                 // 16
  std::uint32_t vl15_dropped = 0;                // 16
  std::uint32_t xmit_data = 0;                   // 32, in 4-octet words
  std::uint32_t rcv_data = 0;                    // 32, words
  std::uint32_t xmit_pkts = 0;                   // 32
  std::uint32_t rcv_pkts = 0;                    // 32
  std::uint32_t xmit_wait = 0;                   // 32
};

struct PortCountersExtended {
  std::uint8_t port_select = 0;
  std::uint64_t xmit_data = 0;  // words
  std::uint64_t rcv_data = 0;   // words
  std::uint64_t xmit_pkts = 0;
  std::uint64_t rcv_pkts = 0;
  std::uint64_t unicast_xmit_pkts = 0;
  std::uint64_t unicast_rcv_pkts = 0;
  std::uint64_t multicast_xmit_pkts = 0;
  std::uint64_t multicast_rcv_pkts = 0;
};

struct PortRcvErrorDetails {
  std::uint8_t port_select = 0;
  std::uint32_t local_physical_errors = 0;   // 16 each
  std::uint32_t malformed_packet_errors = 0;
  std::uint32_t buffer_overrun_errors = 0;
  std::uint32_t dlid_mapping_errors = 0;
  std::uint32_t vl_mapping_errors = 0;
  std::uint32_t looping_errors = 0;
};

struct PortXmitDiscardDetails {
  std::uint8_t port_select = 0;
  std::uint32_t inactive_discards = 0;  // 16 each
  std::uint32_t neighbor_mtu_discards = 0;
  std::uint32_t sw_lifetime_limit_discards = 0;
  std::uint32_t sw_hoq_lifetime_limit_discards = 0;
};

struct PortVLXmitWait {
  std::uint8_t port_select = 0;
  std::array<std::uint32_t, 16> vl{};  // 16 bits each
};

// Decoders take the attribute data (the 192 bytes from MAD offset 64); nullopt when too short.
std::optional<ClassPortInfo> decode_class_port_info(std::span<const std::uint8_t> data);
std::optional<PortCounters> decode_port_counters(std::span<const std::uint8_t> data);
std::optional<PortCountersExtended> decode_port_counters_ext(std::span<const std::uint8_t> data);
std::optional<PortRcvErrorDetails> decode_rcv_error_details(std::span<const std::uint8_t> data);
std::optional<PortXmitDiscardDetails> decode_xmit_discard_details(std::span<const std::uint8_t> data);
std::optional<PortVLXmitWait> decode_vl_xmit_wait(std::span<const std::uint8_t> data);

// Big-endian bit field as IBA lays them out: bit_offset counts from the MSB of byte 0.
// Returns nullopt when the field does not fit in `bytes` or width is 0 or > 64.
std::optional<std::uint64_t> get_field(std::span<const std::uint8_t> bytes, std::size_t bit_offset, unsigned width);

// Fixed fields of a buffer whose size the decoder checked once: every read is in bounds.
struct FieldReader {
  std::span<const std::uint8_t> d;
  std::uint64_t operator()(std::size_t bit, unsigned width) const { return *get_field(d, bit, width); }
  std::uint8_t u8(std::size_t bit, unsigned width) const { return static_cast<std::uint8_t>((*this)(bit, width)); }
  std::uint32_t u32(std::size_t bit, unsigned width) const { return static_cast<std::uint32_t>((*this)(bit, width)); }
};

// ibnetdiscover-format node-name-map: "<guid> \"name\"" per line, '#' comments. Malformed lines
// are returned in `bad_lines` (1-based) and skipped.
struct NodeNameMap {
  std::vector<std::pair<std::uint64_t, std::string>> entries;  // sorted by guid
  std::vector<int> bad_lines;
  const std::string* find(std::uint64_t guid) const;
};
NodeNameMap parse_node_name_map(std::string_view text);

// "0x" + 16 lower-case hex digits, as the port collector prints GUIDs.
std::string guid_label(std::uint64_t guid);

}  // namespace rdma::mad
