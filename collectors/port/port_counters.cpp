#include "collectors/port/port_counters.h"

#include <array>
#include <string>
#include <vector>

#include "collectors/common/pma_names.h"

namespace rdma::collectors::port {
namespace {

// counters/ files that are not PMA attributes.
const std::array kDriverCounters{
    CounterDef{"port_rcv_discards", "rdma_port_receive_discards_total", "Inbound packets discarded (mlx4 extension).", 16, 1},
};

const std::array kLegacyCounters{
    CounterDef{"port_xmit_data_64", "rdma_port_legacy_transmit_bytes_total", "Bytes transmitted (legacy counters_ext, 4-octet words converted to bytes).", 64, 4},
    CounterDef{"port_rcv_data_64", "rdma_port_legacy_receive_bytes_total", "Bytes received (legacy counters_ext, 4-octet words converted to bytes).", 64, 4},
    CounterDef{"port_xmit_packets_64", "rdma_port_legacy_transmit_packets_total", "Packets transmitted (legacy counters_ext).", 64, 1},
    CounterDef{"port_rcv_packets_64", "rdma_port_legacy_receive_packets_total", "Packets received (legacy counters_ext).", 64, 1},
    CounterDef{"port_unicast_xmit_packets", "rdma_port_legacy_unicast_transmit_packets_total", "Unicast packets transmitted (legacy counters_ext).", 64, 1},
    CounterDef{"port_unicast_rcv_packets", "rdma_port_legacy_unicast_receive_packets_total", "Unicast packets received (legacy counters_ext).", 64, 1},
    CounterDef{"port_multicast_xmit_packets", "rdma_port_legacy_multicast_transmit_packets_total", "Multicast packets transmitted (legacy counters_ext).", 64, 1},
    CounterDef{"port_multicast_rcv_packets", "rdma_port_legacy_multicast_receive_packets_total", "Multicast packets received (legacy counters_ext).", 64, 1},
};

template <class Table>
const CounterDef* find_in(const Table& t, std::string_view file) {
  for (const auto& d : t)
    if (d.file == file) return &d;
  return nullptr;
}

}  // namespace

const std::vector<CounterDef>& pma_counter_defs() {
  static const std::vector<CounterDef> defs = [] {
    std::vector<CounterDef> d;
    for (const mad::PmaCounter& c : mad::pma_counters()) {
      if (c.sysfs_file.empty()) continue;
      // Data and packet counters: 32 or 64 bits depending on the kernel's table (see data_counter_width).
      const std::uint8_t width = c.narrow && c.wide ? 0 : c.width;
      const PmaCounterName& name = pma_counter_name(c.id);
      d.push_back({c.sysfs_file, "rdma_port_" + std::string(name.suffix) + "_total", name.help, width, c.scale, &c});
    }
    return d;
  }();
  return defs;
}

const CounterDef* find_counter(std::string_view file) {
  if (const CounterDef* d = find_in(pma_counter_defs(), file)) return d;
  return find_in(kDriverCounters, file);
}
const CounterDef* find_legacy_counter(std::string_view file) { return find_in(kLegacyCounters, file); }

std::uint8_t data_counter_width(bool has_unicast_counters, std::string_view driver) {
  if (has_unicast_counters || driver == "hfi1") return 64;
  if (driver == "mlx4") return 0;  // table depends on firmware; no saturation claim
  return 32;
}

}  // namespace rdma::collectors::port
