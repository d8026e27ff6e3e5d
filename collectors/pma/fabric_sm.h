// Subnet manager health in fabric mode: the SMInfo (SubnGet, attribute 0x0020, LID-routed) of
// every port the last discovery found with PortInfo:CapabilityMask.IsSM, and of the master SM LID
// the ports report, once per refresh: GUID, priority, state, ActCount. An SM whose ActCount did not
// advance over `stuck_polls` polls is stuck; the masters are counted (0 and more than 1 are
// faults); a change of the master GUID is counted.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "exporter/metrics.h"
#include "sources/mad/mad_client.h"
#include "sources/mad/smp_decode.h"

struct ibnd_node;

namespace rdma::collectors::pma {

// An SM port as the discovery saw it.
struct SmPort {
  std::uint16_t lid = 0;
  std::string node_guid, node_name;
  int port = 0;
};

// Adds the ports of a discovered node whose PortInfo says IsSM (a switch: port 0; a CA: its
// ports) to `out`, and counts the MasterSMLID each of them reports in `master_lids`.
void note_sm_ports(const ibnd_node* n, const std::string& guid_label, const std::string& name, std::vector<SmPort>& out,
                   std::map<std::uint16_t, unsigned>& master_lids);
// The SM ports to poll: those found, plus the master SM LID most ports report when no SM port has it.
std::vector<SmPort> sm_ports_to_poll(std::vector<SmPort> found, const std::map<std::uint16_t, unsigned>& master_lids);

// rdma_pma_fabric_sm_{master_changes,mads,query_failures}_total.
struct SmCounts {
  std::uint64_t master_changes = 0, mads = 0, failures = 0;
};

class SmMonitor {
 public:
  static constexpr std::size_t kMaxSms = 16;  // a subnet runs one master and a few standbys
  // counts: where the counters go (the fabric loop's process-wide ones, so that they outlive a
  // reload); nullptr: this monitor's own.
  explicit SmMonitor(unsigned stuck_polls, SmCounts* counts = nullptr)
      : stuck_polls_(stuck_polls ? stuck_polls : 1), c_(counts ? counts : &own_) {}
  SmMonitor(const SmMonitor&) = delete;
  SmMonitor& operator=(const SmMonitor&) = delete;
  // Queries each SM port's SMInfo through a libibmad port of (ca, port); the caller holds the MAD
  // port exclusively (as for a discovery).
  void poll(const std::vector<SmPort>& ports, const std::string& ca, int port, const mad::QueryOptions& q);
  void emit(exporter::MetricSink& out) const;
  std::uint64_t master_changes() const { return c_->master_changes; }

 private:
  struct Sm {
    SmPort where;
    mad::SmInfo info;
    unsigned unchanged = 0;  // consecutive polls without an ActCount change
  };
  unsigned stuck_polls_;
  std::map<std::uint64_t, Sm> sms_;  // by SM GUID, those that answered the last poll
  std::uint64_t master_ = 0;         // GUID of the last single master seen
  SmCounts own_;
  SmCounts* c_;
  bool polled_ = false;
};

}  // namespace rdma::collectors::pma
