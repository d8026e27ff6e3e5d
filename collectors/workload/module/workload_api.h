#pragma once
// The workload collector's gRPC clients (CRI runtime.v1 and kubelet PodResources v1) behind a
// dlopen()ed module, librdma_exporter_workload.so beside the OpenSSL module: gRPC and protobuf
// (several MiB of RSS and their own threads) are mapped only when the collector is on and a
// socket is configured. Built from this repository with the same compiler, so the table uses
// C++ types; its version is checked on load.
#include <string>
#include <vector>

namespace rdma::workload {

inline constexpr int kWorkloadApiVersion = 1;

// Names of a container or a pod sandbox, from the CRI (metadata of ListContainers and
// ListPodSandbox, joined on the sandbox ID).
struct ContainerName {
  std::string container_id;  // empty for a pod sandbox's entry
  std::string pod_uid;
  std::string pod_namespace;
  std::string pod;
  std::string container;  // empty for a pod sandbox's entry
};

struct CriListing {
  std::string error;  // empty when both calls succeeded; else what failed (gRPC status and message)
  std::vector<ContainerName> names;
};

// One container's devices of one resource, from PodResources List.
struct Allocation {
  std::string pod_namespace;
  std::string pod;
  std::string container;
  std::string resource;                 // e.g. "rdma/hca_shared_devices_a", "nvidia.com/sriov_rdma"
  std::vector<std::string> device_ids;  // as the device plugin named them (SR-IOV: PCI addresses)
};

struct PodResourcesListing {
  std::string error;
  std::vector<Allocation> allocations;
};

struct WorkloadApi {
  int version;
  // `socket` is a path ("/run/containerd/containerd.sock"); `timeout_ms` bounds each call.
  CriListing (*cri_list)(const std::string& socket, int timeout_ms);
  PodResourcesListing (*podresources_list)(const std::string& socket, int timeout_ms);
};

// Loads the module on first call (thread-safe). Throws std::runtime_error naming the module and
// dlerror() when it cannot be loaded.
const WorkloadApi& workload_api();

}  // namespace rdma::workload
