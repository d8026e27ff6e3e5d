#include <catch2/catch.hpp>

#include "exporter/error_reporter.h"

using namespace rdma::exporter;

TEST_CASE("capabilities are state: never counted, 0 while any cause lacks one") {
  ErrorReporter r("netdev");
  r.capability("dcbnl", "eth0", true, "");
  r.capability("dcbnl", "veth0", false, "veth0 has no DCB");
  r.capability("ecn_sysfs", "eth0", true, "");
  CHECK(r.capabilities() == std::map<std::string, bool>{{"dcbnl", false}, {"ecn_sysfs", true}});
  CHECK(r.total() == 0);
  CHECK(r.counts().empty());
  // The cause that lacked it gains it (a driver reloaded, a device node appeared): 1 again.
  r.capability("dcbnl", "veth0", true, "");
  CHECK(r.capabilities().at("dcbnl"));
  r.report("io_error", "x", "y");
  CHECK(r.counts() == std::map<std::string, std::uint64_t>{{"io_error", 1}});
}
