// RDMA netlink (NETLINK_RDMA, client RDMA_NL_NLDEV) messages for reading hw_counters and the
// resource tracker (QP owners, resource counts), as pure functions over bytes: request encoders
// and a reply decoder that never reads outside the buffer it is given (unit-tested on
// constructed messages and fuzzable).
//
// What the kernel sends (drivers/infiniband/core/nldev.c):
//   RDMA_NLDEV_CMD_GET (dump)   one message per device: DEV_INDEX u32, DEV_NAME string, ...
//   RDMA_NLDEV_CMD_STAT_GET     (DEV_INDEX, PORT_INDEX, no STAT_RES) -> the port's default
//                               counters: DEV_INDEX, DEV_NAME, PORT_INDEX, STAT_HWCOUNTERS
//                               { HWCOUNTER_ENTRY { ENTRY_NAME string, ENTRY_VALUE u64 } ... }
//                               with the same values as ports/<n>/hw_counters/* (driver value
//                               + values kept from bound counters), plus the optional counters
//                               the user enabled (never in sysfs); disabled ones are skipped.
//   RDMA_NLDEV_CMD_RES_QP_GET (dump, DEV_INDEX required) -> the device's QPs, split over as many
//                               messages as needed: DEV_INDEX, DEV_NAME, RES_QP { RES_QP_ENTRY
//                               { PORT_INDEX (absent before the QP is bound), LQPN, TYPE u8,
//                               STATE u8, then RES_PID u32 (user QP, PID in the reader's PID
//                               namespace; absent when the owner is a zombie or outside that
//                               namespace) or RES_KERN_NAME string (kernel QP) ... } ... }
//   RDMA_NLDEV_CMD_RES_GET (dump)  one message per device: DEV_INDEX, DEV_NAME, RES_SUMMARY
//                               { RES_SUMMARY_ENTRY { ENTRY_NAME ("qp", "cq", "mr", ...),
//                               ENTRY_CURR u64 } ... }
// Messages have no family header: attributes follow the nlmsghdr directly. u64 values may be
// preceded by RDMA_NLDEV_ATTR_PAD (type 0) attributes; nested types may carry NLA_F_NESTED.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rdma::netlink {

// ABI numbers from include/uapi/rdma/rdma_netlink.h (checked against the installed header in
// rdma_stat.cpp).
inline constexpr int kNetlinkRdma = 20;  // NETLINK_RDMA
inline constexpr std::uint16_t kClientNldev = 5;
inline constexpr std::uint16_t kCmdGet = 1;
inline constexpr std::uint16_t kCmdStatGet = 17;
inline constexpr std::uint16_t kCmdResGet = 9;
inline constexpr std::uint16_t kCmdResQpGet = 10;
inline constexpr std::uint16_t kAttrDevIndex = 1;
inline constexpr std::uint16_t kAttrDevName = 2;
inline constexpr std::uint16_t kAttrPortIndex = 3;
inline constexpr std::uint16_t kAttrResSummary = 15;
inline constexpr std::uint16_t kAttrResSummaryEntry = 16;
inline constexpr std::uint16_t kAttrResSummaryEntryName = 17;
inline constexpr std::uint16_t kAttrResSummaryEntryCurr = 18;
inline constexpr std::uint16_t kAttrResQp = 19;
inline constexpr std::uint16_t kAttrResQpEntry = 20;
inline constexpr std::uint16_t kAttrResLqpn = 21;
inline constexpr std::uint16_t kAttrResType = 26;
inline constexpr std::uint16_t kAttrResState = 27;
inline constexpr std::uint16_t kAttrResPid = 28;
inline constexpr std::uint16_t kAttrResKernName = 29;
inline constexpr std::uint16_t kAttrStatHwCounters = 80;
inline constexpr std::uint16_t kAttrStatHwCounterEntry = 81;
inline constexpr std::uint16_t kAttrStatHwCounterEntryName = 82;
inline constexpr std::uint16_t kAttrStatHwCounterEntryValue = 83;

constexpr std::uint16_t nldev_type(std::uint16_t op) { return static_cast<std::uint16_t>((kClientNldev << 10) + op); }

struct HwCounter {
  std::string name;
  std::uint64_t value = 0;
};

struct PortStats {
  std::uint32_t dev_index = 0;
  std::string dev_name;
  std::uint32_t port = 0;
  std::vector<HwCounter> counters;  // in the kernel's order
};

struct DeviceEntry {
  std::uint32_t index = 0;
  std::string name;
};

// One queue pair from a RES_QP_GET dump.
struct QpEntry {
  std::uint32_t port = 0;     // 0: not bound to a port yet (no PORT_INDEX)
  std::uint32_t lqpn = 0;
  std::uint8_t type = 0;      // enum ib_qp_type (2 RC, 3 UC, 4 UD, 8 RAW_PACKET, ...)
  std::uint8_t state = 0;     // enum ib_qp_state (0 RESET ... 3 RTS, 6 ERR)
  std::uint32_t pid = 0;      // user QP: owner's PID in the reader's PID namespace; 0 when hidden
  std::string kern_name;      // kernel QP: the owning module ("ib_core", "rdma_cm", ...); else empty
  bool kernel() const { return !kern_name.empty(); }
};

struct DeviceQps {
  std::uint32_t dev_index = 0;
  std::string dev_name;
  std::vector<QpEntry> qps;  // one message's share of the device's QPs
};

// One device's resource counts from a RES_GET dump (summary names as the kernel spells them).
struct ResourceSummary {
  std::uint32_t dev_index = 0;
  std::string dev_name;
  std::vector<std::pair<std::string, std::uint64_t>> counts;  // in the kernel's order
};

// Everything found in one buffer of netlink messages (one recv()).
struct Decoded {
  std::vector<PortStats> stats;       // STAT_GET replies
  std::vector<DeviceEntry> devices;   // CMD_GET replies
  std::vector<DeviceQps> qps;          // RES_QP_GET replies
  std::vector<ResourceSummary> resources;  // RES_GET replies
  bool done = false;       // NLMSG_DONE, or NLMSG_ERROR (an ACK when error == 0) seen
  int error = 0;           // positive errno from an NLMSG_ERROR, 0 when none
  bool malformed = false;  // a message or attribute overran its container, or a reply lacked its keys
  std::vector<std::uint32_t> seqs;  // sequence number of every message, in order
};

// Decodes every message in [data, data+len). Total: any byte string gives a result.
Decoded decode_messages(const std::uint8_t* data, std::size_t len);

// Request encoders (NLM_F_REQUEST | NLM_F_ACK; the device list also NLM_F_DUMP). Socket::transact
// numbers what it sends itself: the client passes seq 0.
std::vector<std::uint8_t> encode_stat_get(std::uint32_t seq, std::uint32_t dev_index, std::uint32_t port);
std::vector<std::uint8_t> encode_dev_dump(std::uint32_t seq);
std::vector<std::uint8_t> encode_qp_dump(std::uint32_t seq, std::uint32_t dev_index);
std::vector<std::uint8_t> encode_res_dump(std::uint32_t seq);

// Message builder used by the encoders and by tests to construct kernel-like replies.
class MessageBuilder {
 public:
  MessageBuilder(std::uint16_t type, std::uint16_t flags, std::uint32_t seq, std::uint32_t pid = 0);
  MessageBuilder& u32(std::uint16_t type, std::uint32_t v);
  MessageBuilder& u8(std::uint16_t type, std::uint8_t v);
  MessageBuilder& u64(std::uint16_t type, std::uint64_t v);
  MessageBuilder& str(std::uint16_t type, const std::string& v);  // NUL-terminated
  MessageBuilder& raw(std::uint16_t type, const void* p, std::size_t n);
  MessageBuilder& begin_nest(std::uint16_t type);  // sets NLA_F_NESTED like the kernel
  MessageBuilder& end_nest();
  // The finished message (nlmsg_len set); may be called once.
  std::vector<std::uint8_t> finish();

 private:
  std::vector<std::uint8_t> buf_;
  std::vector<std::size_t> nests_;
};

// An NLMSG_ERROR message: error 0 is an ACK, otherwise a negative errno as the kernel writes it.
std::vector<std::uint8_t> encode_error(std::uint32_t seq, int negative_errno);
std::vector<std::uint8_t> encode_done(std::uint32_t seq);

}  // namespace rdma::netlink
