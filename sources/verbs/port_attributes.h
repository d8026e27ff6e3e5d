// Port attributes that only libibverbs gives (ibv_query_port): MTUs, width and speed. Contexts
// are opened once and cached; a device that cannot be opened (no /dev/infiniband access, no
// kernel support) simply yields nothing.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

struct ibv_context;

namespace rdma::verbs {

class DeviceEvents;

struct PortAttributes {
  std::uint32_t active_mtu_bytes = 0;
  std::uint32_t max_mtu_bytes = 0;
  std::uint32_t active_width_lanes = 0;     // 1, 2, 4, 8, 12
  std::uint64_t lane_speed_bits_per_second = 0;
  std::uint32_t gid_table_len = 0;
};

std::uint32_t mtu_enum_to_bytes(int mtu);        // IBV_MTU_256..4096 -> bytes
std::uint32_t width_enum_to_lanes(std::uint8_t w);  // 1,2,4,8,16 -> 1,4,8,12,2
std::uint64_t speed_enum_to_bps(std::uint8_t s);   // per lane, bits/s

class PortAttributeReader {
 public:
  PortAttributeReader() = default;
  ~PortAttributeReader();
  PortAttributeReader(const PortAttributeReader&) = delete;
  PortAttributeReader& operator=(const PortAttributeReader&) = delete;

  // nullopt when the device is not reachable through verbs.
  std::optional<PortAttributes> query(const std::string& device, std::uint32_t port);
  // From now on the contexts are the daemon's owner's (device_events.h), none of this reader's.
  void share_contexts(std::shared_ptr<DeviceEvents> owner) { owner_ = std::move(owner); }

 private:
  ibv_context* context_for(const std::string& device);
  std::mutex mu_;
  std::map<std::string, ibv_context*> contexts_;
  bool unavailable_ = false;
  std::shared_ptr<DeviceEvents> owner_;
};

}  // namespace rdma::verbs
