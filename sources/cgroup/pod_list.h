// The Kubernetes API server's PodList JSON (GET /api/v1/pods?fieldSelector=spec.nodeName=<node>)
// -> the names the workload collector puts beside the pod UIDs and container IDs it reads from
// /proc/<pid>/cgroup. Pure (no I/O), unit-tested and fuzzed on bytes.
//
// Only the fields the API's core/v1 Pod defines for this are read, everything else is skipped
// without being stored (a SAX walk, nothing of the document is kept but these strings):
//   metadata.uid, .name, .namespace, .annotations["kubernetes.io/config.mirror"] (a static pod's
//   mirror: the kubelet's cgroup carries the static pod's UID, which is that annotation);
//   spec.nodeName;
//   status.containerStatuses[], .initContainerStatuses[], .ephemeralContainerStatuses[]:
//   .name and .containerID ("containerd://<id>", "cri-o://<id>", "docker://<id>").
// Input is hostile until proven otherwise: the document must be valid UTF-8 JSON (the parser
// rejects anything else as a whole), nesting, pod and container counts are bounded, and every
// name must be what the API server's validation admits (namespace and container: DNS-1123
// label; pod: DNS-1123 subdomain; UID and container ID: bounded [A-Za-z0-9-] / lowercase hex), so
// that a name can become a label value as it is. A name that is not is dropped (counted), the
// rest of its pod kept.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rdma::cgroup {

struct PodContainer {
  std::string id;    // the runtime's container ID, scheme stripped ("containerd://ab12" -> "ab12")
  std::string name;  // empty when it was not valid
};

struct PodEntry {
  std::string uid;
  std::string mirror_uid;  // a static pod's UID as the kubelet runs it (cgroup), else empty
  std::string namespace_name;
  std::string name;
  std::string node;
  std::vector<PodContainer> containers;  // those with a valid container ID
};

struct PodList {
  std::vector<PodEntry> pods;  // those with a valid UID
  std::size_t dropped = 0;     // names, IDs and pods dropped because they were not valid
};

// Bounds: kubelet's --max-pods is at most a few hundred in practice; a pod has a few dozen
// containers at most. Beyond them the document is rejected, not truncated.
inline constexpr std::size_t kMaxPods = 5000;
inline constexpr std::size_t kMaxContainersPerPod = 512;
inline constexpr std::size_t kMaxDepth = 64;

// Decodes `json` into `out`. Returns an empty string on success, else what was wrong (for a log
// line: printable ASCII, bounded). An API "Status" object (an error reply) is reported with its
// code and message.
std::string decode_pod_list(std::string_view json, PodList& out);

// The API server's name rules (k8s.io/apimachinery/pkg/util/validation).
bool is_dns_label(std::string_view s);      // [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63
bool is_dns_subdomain(std::string_view s);  // dot-separated labels, at most 253
// Whether `s` is well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF).
bool is_utf8(std::string_view s);

}  // namespace rdma::cgroup
