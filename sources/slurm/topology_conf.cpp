#include "sources/slurm/topology_conf.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <unordered_map>

namespace rdma::slurm {

namespace {
bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
}

// One bracket's content ("001-016,20") -> its strings, zero padding as the lower bound writes it.
bool expand_range(std::string_view r, std::vector<std::string>& out, std::size_t limit, std::string& error) {
  std::size_t pos = 0;
  while (pos <= r.size()) {
    const std::size_t comma = std::min(r.find(',', pos), r.size());
    const std::string_view item = r.substr(pos, comma - pos);
    const std::size_t dash = item.find('-');
    const std::string_view lo_s = item.substr(0, dash), hi_s = dash == std::string_view::npos ? lo_s : item.substr(dash + 1);
    auto number = [](std::string_view s, std::uint64_t& v) {
      if (s.empty() || s.size() > 9) return false;
      auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      return ec == std::errc{} && p == s.data() + s.size();
    };
    std::uint64_t lo = 0, hi = 0;
    if (!number(lo_s, lo) || !number(hi_s, hi)) {
      error = "bad range '" + std::string(item) + "' (want N or N-M, digits)";
      return false;
    }
    if (hi < lo) {
      error = "range '" + std::string(item) + "' runs backwards";
      return false;
    }
    if (hi - lo >= limit || out.size() + (hi - lo + 1) > limit) {
      error = "range '" + std::string(item) + "' names more than " + std::to_string(limit) + " nodes";
      return false;
    }
    const std::size_t width = lo_s.size();
    for (std::uint64_t v = lo; v <= hi; ++v) {
      std::string s = std::to_string(v);
      if (s.size() < width) s.insert(0, width - s.size(), '0');
      out.push_back(std::move(s));
    }
    pos = comma + 1;
  }
  return true;
}

// One hostlist item (no top-level comma): literals and bracket groups, their product.
bool expand_item(std::string_view item, std::vector<std::string>& out, std::size_t limit, std::string& error) {
  if (item.empty()) {
    error = "empty name in hostlist";
    return false;
  }
  std::vector<std::string> names{""};
  std::size_t i = 0;
  while (i < item.size()) {
    if (item[i] == '[') {
      const std::size_t close = item.find(']', i);
      if (close == std::string_view::npos) {
        error = "unclosed '[' in '" + std::string(item) + "'";
        return false;
      }
      std::vector<std::string> parts;
      if (!expand_range(item.substr(i + 1, close - i - 1), parts, limit, error)) return false;
      if (names.size() * parts.size() > limit) {
        error = "'" + std::string(item) + "' names more than " + std::to_string(limit) + " nodes";
        return false;
      }
      std::vector<std::string> next;
      next.reserve(names.size() * parts.size());
      for (const auto& n : names)
        for (const auto& p : parts) next.push_back(n + p);
      names = std::move(next);
      i = close + 1;
    } else if (name_char(item[i])) {
      for (auto& n : names) n.push_back(item[i]);
      ++i;
    } else {
      error = "character '" + std::string(1, std::isprint(static_cast<unsigned char>(item[i])) ? item[i] : '?') +
              "' not allowed in a name";
      return false;
    }
  }
  if (out.size() + names.size() > limit) {
    error = "hostlist names more than " + std::to_string(limit) + " nodes";
    return false;
  }
  for (auto& n : names) out.push_back(std::move(n));
  return true;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}
}  // namespace

bool expand_hostlist(std::string_view list, std::vector<std::string>& out, std::size_t limit, std::string& error) {
  std::vector<std::string> got;
  std::size_t start = 0, depth = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']') {
      if (depth == 0) {
        error = "']' without '['";
        return false;
      }
      --depth;
    }
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      if (!expand_item(list.substr(start, i - start), got, limit - std::min(limit, out.size()), error)) return false;
      start = i + 1;
    }
  }
  for (auto& n : got) out.push_back(std::move(n));
  return true;
}

Topology parse_topology_conf(std::string_view text) {
  Topology t;
  std::unordered_map<std::string, std::size_t> by_name;
  std::size_t node_total = 0;
  std::size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    ++line_no;
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() > kMaxLineBytes) {
      t.errors.push_back({line_no, "line longer than " + std::to_string(kMaxLineBytes) + " bytes"});
      continue;
    }
    line = line.substr(0, std::min(line.find('#'), line.size()));
    TopologySwitch sw;
    sw.line = line_no;
    bool bad = false, any = false, block_sizes = false;
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
      if (i >= line.size()) break;
      std::size_t j = i;
      while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
      const std::string_view token = line.substr(i, j - i);
      i = j;
      any = true;
      const std::size_t eq = token.find('=');
      if (eq == std::string_view::npos) {
        t.errors.push_back({line_no, "'" + std::string(token.substr(0, 64)) + "' is not Key=Value"});
        bad = true;
        break;
      }
      const std::string_view key = token.substr(0, eq), value = token.substr(eq + 1);
      std::string error;
      if (iequals(key, "SwitchName") || iequals(key, "BlockName")) {
        std::vector<std::string> name;
        if (!expand_item(value, name, 1, error)) {
          t.errors.push_back({line_no, std::string(key) + ": " + error});
          bad = true;
          break;
        }
        sw.name = name.front();
      } else if (iequals(key, "Switches")) {
        if (!expand_hostlist(value, sw.switches, kMaxSwitches, error)) {
          t.errors.push_back({line_no, "Switches: " + error});
          bad = true;
          break;
        }
      } else if (iequals(key, "Nodes")) {
        if (!expand_hostlist(value, sw.nodes, kMaxNodes - node_total, error)) {
          t.errors.push_back({line_no, "Nodes: " + error});
          bad = true;
          break;
        }
      } else if (iequals(key, "BlockSizes")) {
        block_sizes = true;  // topology/block's sizes: nothing of the leaves
      } else if (!iequals(key, "LinkSpeed")) {
        t.errors.push_back({line_no, "unknown key '" + std::string(key.substr(0, 64)) + "'"});
        bad = true;
        break;
      }
    }
    if (bad || !any) continue;
    if (sw.name.empty()) {
      if (!block_sizes) t.errors.push_back({line_no, "no SwitchName="});
      continue;
    }
    if (by_name.count(sw.name) != 0) {
      t.errors.push_back({line_no, "switch '" + sw.name + "' defined again (first on line " +
                                       std::to_string(t.switches[by_name[sw.name]].line) + ")"});
      continue;
    }
    if (t.switches.size() >= kMaxSwitches) {
      t.errors.push_back({line_no, "more than " + std::to_string(kMaxSwitches) + " switches"});
      break;
    }
    node_total += sw.nodes.size();
    by_name.emplace(sw.name, t.switches.size());
    t.switches.push_back(std::move(sw));
  }
  // Parents: the switch naming a leaf in its Switches=.
  std::unordered_map<std::string, std::string> parent;
  for (const auto& sw : t.switches)
    for (const auto& child : sw.switches) {
      if (by_name.count(child) == 0) {
        t.errors.push_back({sw.line, "Switches: '" + child + "' is not defined"});
      } else if (!parent.emplace(child, sw.name).second) {
        t.errors.push_back({sw.line, "switch '" + child + "' already under '" + parent[child] + "'"});
      }
    }
  std::unordered_map<std::string, std::size_t> node_line;
  for (const auto& sw : t.switches)
    for (const auto& n : sw.nodes) {
      auto [it, fresh] = node_line.emplace(n, sw.line);
      if (!fresh) {
        t.errors.push_back({sw.line, "node '" + n + "' already under a switch on line " + std::to_string(it->second)});
        continue;
      }
      auto p = parent.find(sw.name);
      t.nodes.push_back({n, sw.name, p == parent.end() ? std::string() : p->second});
    }
  std::stable_sort(t.errors.begin(), t.errors.end(), [](const auto& a, const auto& b) { return a.line < b.line; });
  return t;
}

}  // namespace rdma::slurm
