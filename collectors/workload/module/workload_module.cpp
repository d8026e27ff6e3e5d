// librdma_exporter_workload.so: the CRI and PodResources clients (grpc++, generated from the
// pinned .proto files in sources/cri/proto). Loaded by workload_api() only when configured.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>

#include "collectors/workload/module/workload_api.h"
#include "cri_runtime_v1.grpc.pb.h"
#include "podresources_v1.grpc.pb.h"

namespace rdma::workload {
namespace {

// CRI listings of a busy node reach several MiB (kubelet allows 16 MiB).
constexpr int kMaxMessage = 16 * 1024 * 1024;

std::shared_ptr<grpc::Channel> channel(const std::string& socket) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessage);
  return grpc::CreateCustomChannel("unix://" + socket, grpc::InsecureChannelCredentials(), args);
}

void deadline(grpc::ClientContext& ctx, int timeout_ms) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
}

std::string failure(const char* call, const std::string& socket, const grpc::Status& s) {
  return std::string(call) + " on " + socket + ": " + std::to_string(static_cast<int>(s.error_code())) + " " +
         s.error_message();
}

CriListing cri_list(const std::string& socket, int timeout_ms) {
  CriListing out;
  auto stub = runtime::v1::RuntimeService::NewStub(channel(socket));
  runtime::v1::ListPodSandboxResponse pods;
  {
    grpc::ClientContext ctx;
    deadline(ctx, timeout_ms);
    if (auto s = stub->ListPodSandbox(&ctx, runtime::v1::ListPodSandboxRequest{}, &pods); !s.ok()) {
      out.error = failure("ListPodSandbox", socket, s);
      return out;
    }
  }
  runtime::v1::ListContainersResponse containers;
  {
    grpc::ClientContext ctx;
    deadline(ctx, timeout_ms);
    if (auto s = stub->ListContainers(&ctx, runtime::v1::ListContainersRequest{}, &containers); !s.ok()) {
      out.error = failure("ListContainers", socket, s);
      return out;
    }
  }
  std::map<std::string, const runtime::v1::PodSandboxMetadata*> sandbox;
  for (const auto& p : pods.items()) {
    sandbox[p.id()] = &p.metadata();
    out.names.push_back({"", p.metadata().uid(), p.metadata().namespace_(), p.metadata().name(), ""});
  }
  for (const auto& c : containers.containers()) {
    auto it = sandbox.find(c.pod_sandbox_id());
    if (it == sandbox.end()) continue;  // its sandbox went between the two calls
    out.names.push_back({c.id(), it->second->uid(), it->second->namespace_(), it->second->name(), c.metadata().name()});
  }
  return out;
}

PodResourcesListing podresources_list(const std::string& socket, int timeout_ms) {
  PodResourcesListing out;
  auto stub = v1::PodResourcesLister::NewStub(channel(socket));
  grpc::ClientContext ctx;
  deadline(ctx, timeout_ms);
  v1::ListPodResourcesResponse resp;
  if (auto s = stub->List(&ctx, v1::ListPodResourcesRequest{}, &resp); !s.ok()) {
    out.error = failure("PodResources List", socket, s);
    return out;
  }
  for (const auto& p : resp.pod_resources())
    for (const auto& c : p.containers())
      for (const auto& d : c.devices())
        out.allocations.push_back({p.namespace_(), p.name(), c.name(), d.resource_name(),
                                   {d.device_ids().begin(), d.device_ids().end()}});
  return out;
}

constexpr WorkloadApi kApi{kWorkloadApiVersion, &cri_list, &podresources_list};

}  // namespace
}  // namespace rdma::workload

// The module's one export.
extern "C" __attribute__((visibility("default"))) const rdma::workload::WorkloadApi* rdma_exporter_workload_api() {
  return &rdma::workload::kApi;
}
