// The YAML config file (Options::resolve_yaml_text) with every registered collector's settings,
// then the scraper build (regexes, durations, collector settings), as on startup and SIGHUP.
#include <cstdint>
#include <string>

#include "exporter/app.h"
#include "exporter/options.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static rdma::exporter::Options::CommandLine cli = [] {
    rdma::exporter::Options::CommandLine c;
    c.values["path.sysfs"] = "/nonexistent-sysfs";
    return c;
  }();
  rdma::exporter::Options o;
  rdma::exporter::declare_options(o);
  try {
    o.resolve_yaml_text(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yml", cli);
  } catch (const rdma::exporter::ConfigError&) {
    return 0;
  } catch (const rdma::exporter::UsageError&) {
    return 0;
  }
  return 0;
}
