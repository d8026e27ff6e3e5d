// The port collector's PMA counters read with MADs through the port's umad device instead of
// the kernel's counters/ files: each counters/ read is itself a PMA MAD inside the driver (on
// mlx5 a firmware command, uncached), about 20 per port and scrape; here the port's agent answers
// PortCounters and, where its ClassPortInfo announces it, PortCountersExtended: two MADs.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "sources/mad/mad_client.h"
#include "sources/mad/pma_agent.h"
#include "sources/mad/pma_counters.h"

namespace rdma::collectors::port {

// --collector.port.counters-source
enum class CountersSource { kAuto, kSysfs, kMad };

class MadCounters {
 public:
  struct Read {
    std::optional<mad::PortReadings> readings;  // nullopt: failed (see error)
    std::uint64_t mads = 0;                     // MADs sent, retries included
    std::string error;                          // why it failed
    // No umad device of this port is the device in the sysfs tree (another node GUID: a fixture
    // tree) or can be opened here (absent, not allowed): the host's state, not a failed MAD.
    bool no_device = false;
  };

  // ClassPortInfo (once per port: the PMA agent reader's rule, sources/mad/pma_agent.h), then
  // PortCounters and, where announced, PortCountersExtended, sent to the port's own LID through its umad device,
  // which is used only when its CA has the node GUID of the sysfs tree's device at `dev_path`
  // (read when the device is opened). Safe to call for different ports at once.
  Read read(const std::string& ca, int port, std::uint16_t lid, const std::string& dev_path);

  // In auto mode a port whose MAD failed reads counters/ until this much time has passed (the
  // failed MAD may have cost a timeout, the failed open a walk of libibumad's sysfs).
  static constexpr std::chrono::seconds kRetryAfter{60};
  bool backing_off(const std::string& ca, int port);

  // Forgets the ports not read since the last sweep (their umad agents are closed).
  void sweep();

 private:
  struct Port {
    std::shared_ptr<mad::MadClient> client;  // held: one umad agent per port for the daemon's life
    std::chrono::steady_clock::time_point retry_at{};
    bool used = false;
  };
  Port& at(const std::string& ca, int port);

  // Local MADs answer in microseconds; a port that does not answer within this falls back.
  static constexpr mad::QueryOptions kQuery{.window = 2, .timeout = std::chrono::milliseconds(500), .retries = 1};
  std::mutex mu_;  // the map; each Port is only used by the thread reading its device
  std::map<std::pair<std::string, int>, Port> ports_;
  // What each port's agent said about itself, keyed "ca/port": the reader the pma collector's
  // local mode shares, so that a port's attributes are read once per scrape between them.
  mad::PmaAgentReader& agents_ = mad::local_port_agents();
};

}  // namespace rdma::collectors::port
