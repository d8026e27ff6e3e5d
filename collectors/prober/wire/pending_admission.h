// Which connection not yet handshaken the responder gives up when a new one arrives and its
// pending table is full (responder.h). Pure bookkeeping on source addresses, no sockets: the
// responder asks it at each accept and closes the connection it names.
//
// Strangers are told apart by source prefix, not address: one host or tenant easily holds many
// addresses of one IPv4 /24 or one IPv6 /64 (an address per pod, a /64 per host), few hold many
// prefixes. IPv4 peers of a dual-stack socket (IPv4-mapped IPv6) count as IPv4. A newcomer is
// never refused:
//   * an address at its own bound (per_source) gives up its oldest pending connection;
//   * a full table gives up the oldest pending connection of the busiest prefix, counting the
//     newcomer, and within that prefix of its busiest address (ties: the oldest connection).
// So k prefixes competing for `total` each keep their fair share, about total / k: a prefix
// below it never loses a connection to one above it, and a real peer (one handshake at a time)
// is evicted only when every other prefix holds no more than it does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>

#include "collectors/prober/wire/handshake.h"

namespace rdma::collectors::prober {

// The prefix a source address counts against: the /24 of an IPv4 (or IPv4-mapped) address, the
// /64 of an IPv6 one (host bits zero, same Gid layout).
Gid source_prefix(const Gid& address);

class PendingAdmission {
 public:
  using Id = std::uint64_t;
  struct Limits {
    std::size_t total = 128;      // pending connections in all
    std::size_t per_source = 8;   // ... from one source address
  };
  struct Admitted {
    Id id = 0;                     // the newcomer's, for remove()
    std::optional<Id> evict;       // the connection to close first, if any
    std::string_view reason;       // why: "pending_per_source" or "pending_total"
  };

  explicit PendingAdmission(Limits limits) : limits_(limits) {}
  // Takes in a connection from `source`; the caller closes `evict` (already forgotten here).
  Admitted admit(const Gid& source);
  // A connection that ended (handshaken, failed, past its deadline). Unknown ids are ignored.
  void remove(Id id);
  std::size_t size() const { return entries_.size(); }
  std::size_t from_prefix(const Gid& source) const;
  std::size_t from_source(const Gid& source) const;

 private:
  struct Entry {
    Gid source, prefix;
  };
  void forget(std::map<Id, Entry>::iterator it);

  Limits limits_;
  Id next_ = 1;
  std::map<Id, Entry> entries_;  // by id: ids grow, so oldest first
  std::map<Gid, std::size_t> by_prefix_, by_source_;
};

}  // namespace rdma::collectors::prober
