#include "sources/cgroup/workload_path.h"

#include <array>
#include <vector>

namespace rdma::cgroup {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.substr(s.size() - p.size()) == p; }
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }
bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t at = 0;
  while (at <= path.size()) {
    const std::size_t slash = path.find('/', at);
    const std::size_t end = slash == std::string_view::npos ? path.size() : slash;
    if (end > at) out.push_back(path.substr(at, end - at));
    if (slash == std::string_view::npos) break;
    at = slash + 1;
  }
  return out;
}

// A pod UID: 36 characters, hex with '-' (cgroupfs) or '_' (systemd escapes '-' in slice
// names) at 8, 13, 18 and 23. Returned with '-'.
bool pod_uid(std::string_view s, std::string& out) {
  if (s.size() != 36) return false;
  out.assign(s);
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash) {
      if (s[i] != '-' && s[i] != '_') return false;
      out[i] = '-';
    } else if (!is_hex(s[i])) {
      return false;
    }
  }
  return true;
}

// "pod<uid>" (cgroupfs) or "kubepods[-<qos>]-pod<uid>.slice" (systemd).
bool pod_segment(std::string_view seg, std::string& uid) {
  if (ends_with(seg, ".slice")) {
    seg.remove_suffix(6);
    const std::size_t at = seg.rfind("-pod");
    return at != std::string_view::npos && contains(seg.substr(0, at), "kubepods") && pod_uid(seg.substr(at + 4), uid);
  }
  return starts_with(seg, "pod") && pod_uid(seg.substr(3), uid);
}

// "<id>" (cgroupfs), "crio-<id>", "cri-containerd-<id>.scope", "docker-<id>.scope", ...: the
// runtime's hex ID. CRI-O's "crio-conmon-<id>.scope" is the monitor, not the container.
bool container_segment(std::string_view seg, std::string& id) {
  if (ends_with(seg, ".scope")) seg.remove_suffix(6);
  static constexpr std::array<std::string_view, 4> kPrefixes{"cri-containerd-", "crio-", "docker-", "containerd-"};
  for (auto p : kPrefixes)
    if (starts_with(seg, p)) {
      seg.remove_prefix(p.size());
      break;
    }
  if (seg.size() < 12 || seg.size() > 128) return false;
  for (char c : seg)
    if (!is_hex(c)) return false;
  id.assign(seg);
  return true;
}

bool kubernetes(const std::vector<std::string_view>& segs, Workload& w) {
  // cgroupfs: pod<uid> under a kubepods segment; systemd: the pod slice names kubepods itself.
  bool under_kubepods = false;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    if ((under_kubepods || ends_with(segs[i], ".slice")) && pod_segment(segs[i], w.pod_uid)) {
      w.kind = WorkloadKind::kPod;
      if (i + 1 < segs.size()) container_segment(segs[i + 1], w.container_id);
      return true;
    }
    // ".." hides the ancestors above the reader's cgroup namespace root (a containerised exporter
    // reading another container's path): they may have been kubepods.
    under_kubepods = under_kubepods || contains(segs[i], "kubepods") || segs[i] == "..";
  }
  w.pod_uid.clear();
  return false;
}

bool slurm(const std::vector<std::string_view>& segs, Workload& w) {
  bool under_slurm = false;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    if (under_slurm && starts_with(segs[i], "job_") && is_digits(segs[i].substr(4))) {
      w.kind = WorkloadKind::kSlurm;
      w.job.assign(segs[i].substr(4));
      if (i + 1 < segs.size() && starts_with(segs[i + 1], "step_")) w.step.assign(segs[i + 1].substr(5));
      return true;
    }
    under_slurm = under_slurm || contains(segs[i], "slurm") || segs[i] == "..";
  }
  return false;
}

int rank(const Workload& w) {
  switch (w.kind) {
    case WorkloadKind::kPod:
    case WorkloadKind::kSlurm: return 2;
    case WorkloadKind::kUnit: return 1;
    case WorkloadKind::kNone: break;
  }
  return 0;
}

}  // namespace

Workload classify_path(std::string_view path) {
  const auto segs = segments(path);
  Workload w;
  if (kubernetes(segs, w) || slurm(segs, w)) return w;
  for (std::size_t i = segs.size(); i-- > 0;)
    if (ends_with(segs[i], ".service") || ends_with(segs[i], ".scope")) {
      w.kind = WorkloadKind::kUnit;
      w.unit.assign(segs[i]);
      return w;
    }
  return w;
}

Workload parse_proc_cgroup(std::string_view text) {
  Workload best;
  bool best_v2 = false;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    // <hierarchy-ID>:<controllers>:<path>; the path may itself contain ':'.
    const std::size_t c1 = line.find(':');
    if (c1 == std::string_view::npos) continue;
    const std::size_t c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const bool v2 = line.substr(0, c1) == "0" && c2 == c1 + 1;
    Workload w = classify_path(line.substr(c2 + 1));
    if (rank(w) > rank(best) || (rank(w) == rank(best) && rank(w) > 0 && v2 && !best_v2)) {
      best = std::move(w);
      best_v2 = v2;
    }
  }
  return best;
}

}  // namespace rdma::cgroup
