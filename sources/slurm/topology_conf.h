// Slurm's topology.conf (topology/tree plugin) -> which leaf switch each node hangs under, and
// which switch is above that leaf. Pure (bytes in, values out), fuzzed on bytes.
//
// The format (slurm.schedmd.com/topology.conf.html): one switch per line,
//   SwitchName=<name> [Switches=<hostlist>] [Nodes=<hostlist>] [LinkSpeed=<n>]
// keys case-insensitive, `#` starts a comment, hostlists as Slurm writes them: comma-separated
// names, each with bracketed ranges and lists (node[001-016,20], rack[1-2]n[1-4]; zero padding
// kept). A leaf is a switch with Nodes=; its parent is the switch whose Switches= names it.
// Topology/block's BlockName=/BlockSizes= lines are read as leaves too (a block is a leaf group).
// Input is hostile: line length, switch count, expanded node count and range sizes are bounded;
// each problem is an error with its line number, the rest of the file still read.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rdma::slurm {

inline constexpr std::size_t kMaxLineBytes = 64 * 1024;
inline constexpr std::size_t kMaxSwitches = 100'000;
inline constexpr std::size_t kMaxNodes = 200'000;  // expanded, all switches together (2x the largest fleets)

struct TopologyError {
  std::size_t line = 0;  // 1-based; 0: the file as a whole
  std::string message;
};

struct TopologySwitch {
  std::string name;
  std::size_t line = 0;
  std::vector<std::string> switches;  // children, expanded
  std::vector<std::string> nodes;     // expanded
};

struct NodePlace {
  std::string node, leaf, spine;  // spine: the leaf's parent switch, "" when none
};

struct Topology {
  std::vector<TopologySwitch> switches;
  std::vector<NodePlace> nodes;  // every node under a leaf, in file order
  std::vector<TopologyError> errors;
};

// Expands one Slurm hostlist ("a[1-3],b07"), appending to `out`; false (out unchanged) when it is
// malformed or would pass `limit` names in all.
bool expand_hostlist(std::string_view list, std::vector<std::string>& out, std::size_t limit, std::string& error);

Topology parse_topology_conf(std::string_view text);

}  // namespace rdma::slurm
