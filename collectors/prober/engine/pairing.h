// Rail-aware pairing, pure: which local port probes which of a peer's ports (the peer's port
// table from the handshake, handshake.h), on which rail, from which source GID to which
// destination GID. No verbs, no sockets: the local side is described by the same TablePort the
// responder sends, so both sides of a pair are judged by one rule.
//
// A port's rail: the first rail rule whose device regex matches the device and whose netdev
// regex matches the netdev of one of its GIDs (an empty regex matches anything), its label with
// $1, $2... replaced by the groups of the last regex matched (`mlx5_(\d+)` -> `rail$1`: one rule
// for every rail of a node); the peer's
// rail is the label its own config gave it (TablePort::rail). Two ports pair when
//   - both have a label: the labels are equal;
//   - otherwise by subnet: RoCE, a routable RoCE v2 GID on each side in one IP subnet (the
//     shorter of the two prefix lengths); InfiniBand, the same subnet prefix.
// The rail label of a pair is the local port's: its rule's label, else its own subnet
// ("10.1.0.0/24" with the local prefix length; InfiniBand "fe80:0:0:1/64"), so that one local
// port keeps one label whatever the peer.
// Only ports of one link layer pair. cross_rail pairs every local port with every peer port of
// its link layer (the rail label is then the local port's).
#pragma once

#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "collectors/prober/wire/handshake.h"
#include "collectors/prober/engine/peer_types.h"

namespace rdma::collectors::prober {

// The rail label of a local port by the rules, "" when no rule matches.
std::string rail_of(const TablePort& port, const std::vector<RailRule>& rules);

struct Pairing {
  std::size_t local = 0, peer = 0;  // indexes into the two tables
  std::string rail;
  Gid source{}, dest{};             // InfiniBand: GID 0 of each port
};

// Pairs of (local port, peer port), in the order of the local table then the peer's. `reached`:
// the address the peer was reached at, as a GID; a pair whose peer port has it uses it as the
// destination (and the local GID in its subnet as the source).
std::vector<Pairing> pair_ports(const std::vector<TablePort>& local, const std::vector<TablePort>& peer, bool cross_rail,
                                const std::optional<Gid>& reached = std::nullopt);

}  // namespace rdma::collectors::prober
