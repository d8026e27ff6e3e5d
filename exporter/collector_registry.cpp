#include <algorithm>

#include "exporter/collector.h"

namespace rdma::exporter {
namespace {
std::vector<CollectorDescriptor>& storage() {
  static std::vector<CollectorDescriptor> all;  // filled by static registrars before main()
  return all;
}
}  // namespace

CollectorRegistrar::CollectorRegistrar(CollectorDescriptor d) { storage().push_back(std::move(d)); }

std::vector<const CollectorDescriptor*> registered_collectors() {
  std::vector<const CollectorDescriptor*> out;
  for (const auto& d : storage()) out.push_back(&d);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->name < b->name; });
  return out;
}

}  // namespace rdma::exporter
