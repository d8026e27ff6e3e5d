#include "collectors/prober/node_leaves.h"

#include "sources/cgroup/node_list.h"

namespace rdma::collectors::prober {

namespace kube = exporter::kube;

std::string node_page_url(const std::string& api, const std::string& leaf_label, const std::string& continue_token) {
  // No resourceVersion=0: a list served from the watch cache ignores `limit` on older servers, and
  // one page of the whole fleet is over the decoder's bounds. A paged list reads etcd, a page at a time.
  std::string q = "/api/v1/nodes?labelSelector=" + kube::query_value(leaf_label) + "&limit=" + std::to_string(kNodePageLimit);
  if (!continue_token.empty()) q += "&continue=" + kube::query_value(continue_token);
  return kube::url_of(api, q);
}

NodeLeaves list_node_leaves(const kube::KubeApi& api, const kube::Endpoint& endpoint, const std::string& leaf_label,
                            const std::atomic<bool>* cancel) {
  NodeLeaves out;
  auto fail = [&](std::string reason, std::string cause, std::string message) {
    out.outcome = kube::Answer::Outcome::kFailed;
    out.reason = std::move(reason), out.cause = std::move(cause), out.message = std::move(message);
    out.node_leaf.clear();
    return out;
  };
  std::string token;
  const std::size_t max_pages = kMaxLabelledNodes / kNodePageLimit + 1;
  do {
    if (out.pages == max_pages)
      return fail("kubernetes_decode", "pages",
                  "Kubernetes API " + endpoint.api + ": the node list goes on past " + std::to_string(max_pages) +
                      " pages of " + std::to_string(kNodePageLimit) + " (at most " +
                      std::to_string(kMaxLabelledNodes) + " nodes are read)");
    kube::Request request;
    request.url = node_page_url(endpoint.api, leaf_label, token);
    // Metadata only (names and labels, no status): the full Node objects are tens of KiB each.
    request.accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    request.what = "listing the nodes labelled " + leaf_label;
    request.permission = "get/list nodes";
    request.max_bytes = cgroup::kMaxNodeListBytes;
    request.cancel = cancel;
    auto answer = kube::get(api, endpoint, request);
    if (answer.outcome != kube::Answer::Outcome::kOk) {
      out.outcome = answer.outcome;
      out.reason = std::move(answer.reason), out.cause = std::move(answer.cause), out.message = std::move(answer.message);
      out.node_leaf.clear();
      return out;
    }
    ++out.pages;
    cgroup::NodeList page;
    if (auto err = cgroup::decode_node_list(answer.body, {leaf_label}, page); !err.empty())
      return fail("kubernetes_decode", "json", "Kubernetes API " + endpoint.api + ": the node list: " + err);
    out.dropped += page.dropped;
    for (auto& n : page.nodes) {
      if (n.values[0].empty()) {
        ++out.unlabelled;
        continue;
      }
      if (out.node_leaf.size() == kMaxLabelledNodes)
        return fail("kubernetes_decode", "nodes",
                    "Kubernetes API " + endpoint.api + ": more than " + std::to_string(kMaxLabelledNodes) +
                        " labelled nodes");
      out.node_leaf.emplace_back(std::move(n.name), std::move(n.values[0]));
    }
    // A server that hands back the token it was given would page forever: the page bound ends it.
    token = std::move(page.next);
  } while (!token.empty());
  out.outcome = kube::Answer::Outcome::kOk;
  return out;
}

}  // namespace rdma::collectors::prober
