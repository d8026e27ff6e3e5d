// PMA queries over libibumad: many Get MADs in flight (bounded window), per-MAD timeout and
// retries, replies matched by transaction ID. One client per (CA, port) per process, shared by
// the pma collector's local and fabric modes and the port collector (and across SIGHUP reloads):
// real kernels allow more, but the ibsim shim routes replies to the port that registered a class
// last, so a second open would steal them.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "sources/mad/pma_decode.h"

namespace rdma::mad {

struct PmaQuery {
  std::uint16_t lid = 0;
  std::uint8_t port_select = 0;
  PmaAttr attr = PmaAttr::kPortCounters;
};

enum class Outcome : std::uint8_t {
  kOk,
  kTimeout,    // no reply within timeout after every retry
  kStatus,     // the agent answered with a non-zero MAD status (see `status`)
  kSendError,  // umad_send failed (no route, port gone)
  kMalformed,  // a reply that matched the TID but was short or of another class/attribute
};
std::string_view outcome_label(Outcome o);  // "ok", "timeout", "mad_status", "send_error", "malformed"

struct PmaReply {
  Outcome outcome = Outcome::kTimeout;
  std::uint16_t status = 0;
  std::uint8_t attempts = 0;
  std::array<std::uint8_t, kPmaDataSize> data{};
  std::span<const std::uint8_t> payload() const { return data; }
};

struct QueryOptions {
  unsigned window = 64;                       // MADs in flight at most
  std::chrono::milliseconds timeout{500};     // per MAD and attempt
  unsigned retries = 2;                       // extra attempts after a timeout
  // The latest time to start: a caller that would wait longer for its turn on the client (another
  // query, a discovery) gets no reply at all (an empty vector) instead of waiting on.
  std::chrono::steady_clock::time_point start_by = std::chrono::steady_clock::time_point::max();
};

struct QueryStats {
  std::uint64_t sent = 0;      // MADs written, retries included
  std::uint64_t timeouts = 0;  // attempts that timed out
  std::uint64_t stray = 0;     // replies matching no outstanding request (late, duplicate)
};

// The resolved identity of a local umad port (what umad_get_port reports).
struct LocalPort {
  std::string ca;
  int port = 0;
  std::uint16_t lid = 0;
  std::uint64_t port_guid = 0;
  std::uint64_t node_guid = 0;
  int state = 0;  // 4 = ACTIVE
  std::string link_layer;  // "InfiniBand", "Ethernet", or "IB" (umad2sim has no link_layer file)
};

// Ports of every CA libibumad lists (its umad_get_ca_device_list: /sys/class/infiniband via libc
// opendir/open, which the umad2sim shim redirects). Empty without RDMA devices.
std::vector<LocalPort> list_local_ports(std::string* error);

// Serializes libibumad's sysfs walks and port opens/closes in this process (list_local_ports,
// MadClient::shared, fabric discovery): the umad2sim shim builds its fake sysfs lazily and is not
// thread-safe there.
std::mutex& umad_setup_mutex();

class MadClient {
 public:
  // The process-wide client of (ca, port); ca "" and port 0 mean libibumad's default. nullptr and
  // *error on failure.
  // On failure *open_errno (when given) is the errno of opening the umad device node, else 0:
  // ENOENT/EACCES/EPERM mean the node is not there or not allowed here (a container without
  // /dev/infiniband, systemd's PrivateDevices=yes), which is the host's state, not a fault.
  static std::shared_ptr<MadClient> shared(const std::string& ca, int port, std::string* error,
                                           int* open_errno = nullptr);
  ~MadClient();
  MadClient(const MadClient&) = delete;
  MadClient& operator=(const MadClient&) = delete;

  // Sends every query (at most `window` outstanding) and returns one reply per query, same order.
  // Serialized: concurrent callers wait for each other, each until its opts.start_by (then: empty).
  std::vector<PmaReply> query(std::span<const PmaQuery> queries, const QueryOptions& opts, QueryStats* stats = nullptr);

  // Runs fn while no query is in flight on this client. Fabric discovery runs under it: the umad2sim
  // shim crashes when another umad port of the process closes while a reply is on its way.
  template <class F>
  auto exclusive(F&& fn) {
    Turn t(*this);
    return fn();
  }

  const std::string& ca() const { return ca_; }
  int port() const { return port_; }

 private:
  struct Turn {
    // Waits for this caller's turn until `by`; held() says whether it came.
    explicit Turn(MadClient& c, std::chrono::steady_clock::time_point by = std::chrono::steady_clock::time_point::max());
    ~Turn();
    bool held() const { return held_; }
    MadClient& c;
    bool held_ = false;
  };
  MadClient(std::string ca, int port, int fd, int agent) : ca_(std::move(ca)), port_(port), fd_(fd), agent_(agent) {}
  std::string ca_;
  int port_;
  int fd_;
  int agent_;
  // A FIFO (ticket) lock: a local-mode scrape queues behind at most the fabric chunk in progress.
  std::mutex mu_;
  std::condition_variable turn_;
  std::uint64_t next_ticket_ = 0, serving_ = 0;
  std::set<std::uint64_t> abandoned_;  // tickets whose callers stopped waiting: skipped
  std::uint32_t next_tid_ = 0x5000;
};

}  // namespace rdma::mad
