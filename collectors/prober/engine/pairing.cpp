#include "collectors/prober/engine/pairing.h"

#include <algorithm>
#include <cstdio>

#include "collectors/prober/wire/handshake_io.h"

namespace rdma::collectors::prober {
namespace {

bool v4_mapped_gid(const Gid& g) { return v4_mapped(g.data()); }
bool link_local(const Gid& g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

// The GIDs a RoCE pair can route with: v2, not link-local, with a known prefix.
bool routable(const TableGid& g) {
  return g.kind == GidKind::kRoceV2 && !link_local(g.gid) && g.prefix_len > 0;
}

// Prefix length in GID bits (an IPv4 /24 is the last 32 bits of the mapped GID: 96 + 24).
unsigned gid_bits(const TableGid& g) {
  return v4_mapped_gid(g.gid) ? 96u + std::min<unsigned>(g.prefix_len, 32) : std::min<unsigned>(g.prefix_len, 128);
}

bool same_prefix(const Gid& a, const Gid& b, unsigned bits) {
  for (unsigned i = 0; i < bits; ++i) {
    const unsigned byte = i / 8, shift = 7 - i % 8;
    if (((a[byte] >> shift) & 1) != ((b[byte] >> shift) & 1)) return false;
  }
  return true;
}

std::string subnet_label(const Gid& g, unsigned bits) {
  Gid net{};
  for (unsigned i = 0; i < bits; ++i) net[i / 8] |= static_cast<std::uint8_t>(g[i / 8] & (0x80 >> (i % 8)));
  char buf[64];
  if (v4_mapped_gid(g)) {
    std::snprintf(buf, sizeof buf, "%u.%u.%u.%u/%u", net[12], net[13], net[14], net[15], bits - 96);
  } else {
    std::string s;
    for (int i = 0; i < 16; i += 2) {
      char part[8];
      std::snprintf(part, sizeof part, "%s%x", i ? ":" : "", static_cast<unsigned>((net[i] << 8) | net[i + 1]));
      s += part;
    }
    std::snprintf(buf, sizeof buf, "%s/%u", s.c_str(), bits);
  }
  return buf;
}

std::string ib_label(std::uint64_t prefix) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%x:%x:%x:%x/64", static_cast<unsigned>(prefix >> 48) & 0xffff,
                static_cast<unsigned>(prefix >> 32) & 0xffff, static_cast<unsigned>(prefix >> 16) & 0xffff,
                static_cast<unsigned>(prefix) & 0xffff);
  return buf;
}

Gid first_gid(const TablePort& p) { return p.gids.empty() ? Gid{} : p.gids.front().gid; }

struct Match {
  std::string subnet;
  Gid source{}, dest{};
};

// The first pair of routable GIDs in one subnet (local order first), or nullopt. The peer's GID
// equal to `reached` (the address the peer was reached at) is preferred: a user who names one of
// a port's subnets gets that one.
std::optional<Match> subnet_match(const TablePort& l, const TablePort& p, const std::optional<Gid>& reached = std::nullopt) {
  if (l.link_layer == LinkLayer::kInfiniBand) {
    if (l.subnet_prefix != p.subnet_prefix) return std::nullopt;
    return Match{ib_label(l.subnet_prefix), first_gid(l), first_gid(p)};
  }
  for (int pass = reached ? 0 : 1; pass < 2; ++pass)
    for (const auto& lg : l.gids) {
      if (!routable(lg)) continue;
      for (const auto& pg : p.gids) {
        if (!routable(pg) || v4_mapped_gid(lg.gid) != v4_mapped_gid(pg.gid) || (pass == 0 && pg.gid != *reached)) continue;
        const unsigned bits = std::min(gid_bits(lg), gid_bits(pg));
        if (same_prefix(lg.gid, pg.gid, bits)) return Match{subnet_label(lg.gid, gid_bits(lg)), lg.gid, pg.gid};
      }
    }
  return std::nullopt;
}

// Cross-rail or labelled pairs still need GIDs: a routable pair of one family, else the first
// GIDs (InfiniBand, or a peer that only has link-local ones).
std::pair<Gid, Gid> any_gids(const TablePort& l, const TablePort& p, const std::optional<Gid>& reached) {
  if (auto m = subnet_match(l, p, reached)) return {m->source, m->dest};
  for (const auto& lg : l.gids)
    for (const auto& pg : p.gids)
      if (routable(lg) && routable(pg) && v4_mapped_gid(lg.gid) == v4_mapped_gid(pg.gid)) return {lg.gid, pg.gid};
  return {first_gid(l), first_gid(p)};
}

}  // namespace

std::string rail_of(const TablePort& port, const std::vector<RailRule>& rules) {
  for (const auto& r : rules) {
    std::smatch m;  // the last regex that matched: its groups fill $1, $2... of the label
    if (r.device && !std::regex_search(port.device, m, *r.device)) continue;
    if (r.netdev && std::none_of(port.gids.begin(), port.gids.end(), [&](const TableGid& g) {
          return !g.netdev.empty() && std::regex_search(g.netdev, m, *r.netdev);
        }))
      continue;
    return m.empty() ? r.rail : m.format(r.rail);
  }
  return "";
}

std::vector<Pairing> pair_ports(const std::vector<TablePort>& local, const std::vector<TablePort>& peer, bool cross_rail,
                                const std::optional<Gid>& reached) {
  std::vector<Pairing> out;
  for (std::size_t i = 0; i < local.size(); ++i)
    for (std::size_t j = 0; j < peer.size(); ++j) {
      const auto& l = local[i];
      const auto& p = peer[j];
      if (l.link_layer != p.link_layer) continue;
      if (cross_rail) {
        auto [s, d] = any_gids(l, p, reached);
        std::string rail = l.rail;
        if (rail.empty())
          if (auto m = subnet_match(l, l)) rail = m->subnet;
        out.push_back({i, j, std::move(rail), s, d});
      } else if (!l.rail.empty() && !p.rail.empty()) {
        if (l.rail != p.rail) continue;
        auto [s, d] = any_gids(l, p, reached);
        out.push_back({i, j, l.rail, s, d});
      } else if (auto m = subnet_match(l, p, reached)) {
        out.push_back({i, j, l.rail.empty() ? m->subnet : l.rail, m->source, m->dest});
      }
    }
  return out;
}

}  // namespace rdma::collectors::prober
