#include "sources/pci/topology.h"

#include <algorithm>

namespace rdma::pci {
namespace {

constexpr std::string_view kNames[] = {"", "PIX", "PXB", "PHB", "NODE", "SYS"};

std::size_t common_prefix(const Location& a, const Location& b) {
  std::size_t c = 0;
  while (c < a.chain.size() && c < b.chain.size() && a.chain[c] == b.chain[c]) ++c;
  return c;
}

}  // namespace

std::string_view relation_name(Relation r) { return kNames[static_cast<std::size_t>(r)]; }

bool parse_relation(std::string_view s, Relation& out) {
  for (std::size_t i = 1; i < std::size(kNames); ++i)
    if (s == kNames[i]) {
      out = static_cast<Relation>(i);
      return true;
    }
  return false;
}

Relation relation(const Endpoint& a, const Endpoint& b) {
  const Location& la = *a.location;
  const Location& lb = *b.location;
  if (la.host_bridge != lb.host_bridge) {
    const bool other_node = a.numa_node >= 0 && b.numa_node >= 0 && a.numa_node != b.numa_node;
    return other_node ? Relation::kSys : Relation::kNode;
  }
  const std::size_t c = common_prefix(la, lb);
  if (c == 0) return Relation::kPhb;
  // Bridges strictly between the common ancestor and each side (0 when one is the other's ancestor).
  const std::size_t below_a = la.chain.size() > c ? la.chain.size() - c - 1 : 0;
  const std::size_t below_b = lb.chain.size() > c ? lb.chain.size() - c - 1 : 0;
  return below_a <= 1 && below_b <= 1 ? Relation::kPix : Relation::kPxb;
}

std::vector<std::string> bridges_between(const Location& a, const Location& b) {
  std::vector<std::string> out;
  if (a.host_bridge != b.host_bridge) return out;
  const std::size_t c = common_prefix(a, b);
  if (c == 0) return out;
  for (std::size_t i = a.chain.size() - 1; i-- > c;) out.push_back(a.chain[i]);  // a's parent upwards
  if (c < a.chain.size() && c < b.chain.size()) out.push_back(a.chain[c - 1]);   // the common ancestor
  for (std::size_t i = c; i + 1 < b.chain.size(); ++i) out.push_back(b.chain[i]);  // down to b's parent
  return out;
}

}  // namespace rdma::pci
