// RDMA netlink (NETLINK_RDMA, client RDMA_NL_NLDEV) messages for reading hw_counters, as pure
// functions over bytes: request encoders and a reply decoder that never reads outside the
// buffer it is given (unit-tested on constructed messages and fuzzable).
//
// What the kernel sends (drivers/infiniband/core/nldev.c):
//   RDMA_NLDEV_CMD_GET (dump)   one message per device: DEV_INDEX u32, DEV_NAME string, ...
//   RDMA_NLDEV_CMD_STAT_GET     (DEV_INDEX, PORT_INDEX, no STAT_RES) -> the port's default
//                               counters: DEV_INDEX, DEV_NAME, PORT_INDEX, STAT_HWCOUNTERS
//                               { HWCOUNTER_ENTRY { ENTRY_NAME string, ENTRY_VALUE u64 } ... }
//                               with the same values as ports/<n>/hw_counters/* (driver value
//                               + values kept from bound counters), plus the optional counters
//                               the user enabled (never in sysfs); disabled ones are skipped.
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
inline constexpr std::uint16_t kAttrDevIndex = 1;
inline constexpr std::uint16_t kAttrDevName = 2;
inline constexpr std::uint16_t kAttrPortIndex = 3;
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

// Everything found in one buffer of netlink messages (one recv()).
struct Decoded {
  std::vector<PortStats> stats;       // STAT_GET replies
  std::vector<DeviceEntry> devices;   // CMD_GET replies
  bool done = false;       // NLMSG_DONE, or NLMSG_ERROR (an ACK when error == 0) seen
  int error = 0;           // positive errno from an NLMSG_ERROR, 0 when none
  bool malformed = false;  // a message or attribute overran its container, or a reply lacked its keys
  std::vector<std::uint32_t> seqs;  // sequence number of every message, in order
};

// Decodes every message in [data, data+len). Total: any byte string gives a result.
Decoded decode_messages(const std::uint8_t* data, std::size_t len);

// Request encoders (NLM_F_REQUEST | NLM_F_ACK; the device list also NLM_F_DUMP).
std::vector<std::uint8_t> encode_stat_get(std::uint32_t seq, std::uint32_t dev_index, std::uint32_t port);
std::vector<std::uint8_t> encode_dev_dump(std::uint32_t seq);

// Message builder used by the encoders and by tests to construct kernel-like replies.
class MessageBuilder {
 public:
  MessageBuilder(std::uint16_t type, std::uint16_t flags, std::uint32_t seq, std::uint32_t pid = 0);
  MessageBuilder& u32(std::uint16_t type, std::uint32_t v);
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
