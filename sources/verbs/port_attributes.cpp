#include "sources/verbs/port_attributes.h"

#include "sources/verbs/device_events.h"

#include <infiniband/verbs.h>

namespace rdma::verbs {

std::uint32_t mtu_enum_to_bytes(int mtu) {
  switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
    default: return 0;
  }
}

std::uint32_t width_enum_to_lanes(std::uint8_t w) {
  switch (w) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 0;
  }
}

std::uint64_t speed_enum_to_bps(std::uint8_t s) {
  switch (s) {
    case 1: return 2'500'000'000ULL;    // SDR
    case 2: return 5'000'000'000ULL;    // DDR
    case 4: return 10'000'000'000ULL;   // QDR
    case 8: return 10'312'500'000ULL;   // FDR10
    case 16: return 14'062'500'000ULL;  // FDR
    case 32: return 25'781'250'000ULL;  // EDR
    case 64: return 53'125'000'000ULL;  // HDR
    case 128: return 106'250'000'000ULL;  // NDR
    case 255: return 212'500'000'000ULL;  // XDR (active_speed_ex in newer kernels)
    default: return 0;
  }
}

PortAttributeReader::~PortAttributeReader() {
  for (auto& [name, ctx] : contexts_)
    if (ctx) ibv_close_device(ctx);
}

ibv_context* PortAttributeReader::context_for(const std::string& device) {
  auto it = contexts_.find(device);
  if (it != contexts_.end()) return it->second;
  if (unavailable_) return nullptr;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);  // NULL with ENOSYS where the kernel has no RDMA
  if (!list) {
    unavailable_ = true;
    return nullptr;
  }
  ibv_context* ctx = nullptr;
  for (int i = 0; i < n; ++i)
    if (device == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  contexts_[device] = ctx;  // remember failures too: no retry storm every scrape
  return ctx;
}

std::optional<PortAttributes> PortAttributeReader::query(const std::string& device, std::uint32_t port) {
  std::lock_guard lock(mu_);
  std::shared_ptr<ibv_context> shared = owner_ ? owner_->context(device) : nullptr;
  ibv_context* ctx = owner_ ? shared.get() : context_for(device);
  if (!ctx) return std::nullopt;
  ibv_port_attr attr{};
  if (ibv_query_port(ctx, static_cast<std::uint8_t>(port), &attr) != 0) {
    if (owner_) return std::nullopt;  // the owner lets a vanished device go at its next rescan
    // The device went away: drop the context so that a re-added device is opened afresh.
    ibv_close_device(ctx);
    contexts_.erase(device);
    return std::nullopt;
  }
  PortAttributes out;
  out.active_mtu_bytes = mtu_enum_to_bytes(attr.active_mtu);
  out.max_mtu_bytes = mtu_enum_to_bytes(attr.max_mtu);
  out.active_width_lanes = width_enum_to_lanes(attr.active_width);
  out.lane_speed_bits_per_second = speed_enum_to_bps(attr.active_speed);
  out.gid_table_len = static_cast<std::uint32_t>(attr.gid_tbl_len);
  return out;
}

}  // namespace rdma::verbs
