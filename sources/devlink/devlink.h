// devlink (the "devlink" generic netlink family): per devlink instance (bus "pci", device
// "0000:08:00.0": one PCI function) its health reporters (DEVLINK_CMD_HEALTH_REPORTER_GET dump:
// mlx5 fw, fw_fatal, tx, rx, vnic; state, error and recover counts) and its info
// (DEVLINK_CMD_INFO_GET dump: driver, serial, firmware versions fixed/running/stored). The
// decoders are pure and take one message of a dump in the kernel's attribute layout; the client
// runs the dumps over one socket. A kernel without the family, or a host without devlink
// instances, is an empty answer (kNotSupported for the family), not an error.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sources/common/result.h"
#include "sources/netlink/message.h"
#include "sources/netlink/genetlink.h"

namespace rdma::devlink {

// A dump answers at most this many entries; the rest are dropped (a host has a few PCI
// functions, each with a handful of reporters).
constexpr std::size_t kMaxDumpEntries = 4096;

struct Handle {
  std::string bus;     // "pci"
  std::string device;  // "0000:08:00.0"
  std::string label() const { return bus + "/" + device; }  // as `devlink dev` prints it
  bool operator==(const Handle&) const = default;
};

struct HealthReporter {
  Handle handle;
  std::optional<std::uint32_t> port;  // a port's reporter (DEVLINK_ATTR_PORT_INDEX)
  std::string name;
  bool healthy = true;  // DEVLINK_HEALTH_REPORTER_STATE_HEALTHY (0) / _ERROR (1)
  std::uint64_t error_count = 0, recover_count = 0;
  std::optional<std::uint64_t> graceful_period_ms;
  std::optional<bool> auto_recover;
};

struct Version {
  std::string name, value;
  bool operator==(const Version&) const = default;
};

struct DeviceInfo {
  Handle handle;
  std::string driver, serial;
  std::vector<Version> fixed, running, stored;
  // True when a version is stored with a value other than the running one of the same name: a
  // flashed firmware waiting for a reset.
  bool update_pending() const;
};

// Pure: one message of a dump (the reply type is the family's id; DEVLINK_CMD_*_GET in the genl
// header). kMalformed on a truncated attribute or a missing handle/name.
Result<HealthReporter> decode_health_reporter(const netlink::Message& m);
Result<DeviceInfo> decode_info(const netlink::Message& m);

// Pure: the messages of a whole dump (as a test or the fuzzer has them): the entries, or the
// errno of an NLMSG_ERROR / a malformed message.
Result<std::vector<HealthReporter>> decode_health_dump(netlink::Bytes bytes);
Result<std::vector<DeviceInfo>> decode_info_dump(netlink::Bytes bytes);

std::vector<std::uint8_t> build_dump(std::uint16_t family_id, std::uint8_t cmd);

class Client {
 public:
  explicit Client(std::chrono::milliseconds receive_timeout);
  Result<std::vector<HealthReporter>> health_reporters();
  Result<std::vector<DeviceInfo>> infos();

 private:
  netlink::GenlClient client_;
};

}  // namespace rdma::devlink
