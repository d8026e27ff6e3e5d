// The checks collectors validate their settings with (CollectorSettings over Options: integer in
// range, positive duration, choice, error for a key), and that every collector's messages name
// the key as the user can write it: the YAML key (with file:line:col) for a value from the config
// file, the flag for one from the command line.
#include <catch2/catch.hpp>

#include <regex>

#include "exporter/app.h"
#include "exporter/collector.h"
#include "exporter/logging.h"
#include "exporter/options.h"
#include "tests/lib/temp_tree.h"

using namespace rdma::exporter;

namespace {

Options::CommandLine cli_of(const Options& o, std::vector<std::string> args) {
  std::vector<const char*> argv{"rdma_exporter"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return o.parse_command_line(static_cast<int>(argv.size()), argv.data());
}

// One setting of each checked kind, declared as the core declares a collector's settings.
Options demo_options() {
  Options o;
  o.declare({"collector.demo.max-peers", OptionType::kInt, "64", "", "collectors.demo.max_peers"});
  o.declare({"collector.demo.interval", OptionType::kDuration, "1s", "", "collectors.demo.interval"});
  o.declare({"collector.demo.verbs", OptionType::kString, "auto", "", "collectors.demo.verbs"});
  return o;
}

// The demo options resolved from a config file text and flags.
Options demo(const std::string& yaml, std::vector<std::string> flags = {}) {
  Options o = demo_options();
  o.resolve_yaml_text(yaml, "c.yml", cli_of(o, std::move(flags)));
  return o;
}

}  // namespace

TEST_CASE("settings: integer in a range") {
  const auto file = demo("collectors:\n  demo:\n    max_peers: 0\n");
  const CollectorSettings s(file, "demo");
  CHECK_THROWS_WITH(s.integer("max-peers", 1, 100),
                    "c.yml:3:16: key 'collectors.demo.max_peers': must be between 1 and 100, got 0");
  CHECK(s.integer("max-peers", 0, 100) == 0);
  const auto flag = demo("", {"--collector.demo.max-peers=101"});
  CHECK_THROWS_WITH(CollectorSettings(flag, "demo").integer("max-peers", 1, 100),
                    "flag --collector.demo.max-peers: must be between 1 and 100, got 101");
  CHECK(CollectorSettings(flag, "demo").integer("max-peers", 1, 101) == 101);
  CHECK_THROWS_AS(s.integer("max-peers", 1, 100), ConfigError);
}

TEST_CASE("settings: positive duration") {
  const auto file = demo("collectors:\n  demo:\n    interval: 0s\n");
  CHECK_THROWS_WITH(CollectorSettings(file, "demo").positive_duration("interval"),
                    "c.yml:3:15: key 'collectors.demo.interval': must be a positive duration, got 0ms");
  const auto flag = demo("", {"--collector.demo.interval=0ms"});
  CHECK_THROWS_WITH(CollectorSettings(flag, "demo").positive_duration("interval"),
                    "flag --collector.demo.interval: must be a positive duration, got 0ms");
  CHECK(CollectorSettings(demo(""), "demo").positive_duration("interval") == Duration(1000));
  CHECK(CollectorSettings(demo("", {"--collector.demo.interval=1ms"}), "demo").positive_duration("interval") ==
        Duration(1));
}

TEST_CASE("settings: choice of values") {
  const auto file = demo("collectors:\n  demo:\n    verbs: sometimes\n");
  const CollectorSettings s(file, "demo");
  CHECK_THROWS_WITH(s.choice("verbs", {"auto", "true", "false"}),
                    "c.yml:3:12: key 'collectors.demo.verbs': must be auto, true or false, got 'sometimes'");
  CHECK_THROWS_WITH(s.choice("verbs", {"sysfs", "mad"}), Catch::EndsWith("must be sysfs or mad, got 'sometimes'"));
  CHECK_THROWS_WITH(s.choice("verbs", {"auto"}), Catch::EndsWith("must be auto, got 'sometimes'"));
  CHECK(s.choice("verbs", {"auto", "sometimes"}) == "sometimes");
  CHECK(CollectorSettings(demo(""), "demo").choice("verbs", {"auto", "true", "false"}) == "auto");
  const auto flag = demo("collectors:\n  demo:\n    verbs: 'true'\n", {"--collector.demo.verbs=no"});
  CHECK_THROWS_WITH(CollectorSettings(flag, "demo").choice("verbs", {"auto", "true", "false"}),
                    "flag --collector.demo.verbs: must be auto, true or false, got 'no'");
}

TEST_CASE("settings: an error for a key says where the value came from") {
  CHECK(std::string(CollectorSettings(demo("collectors:\n  demo:\n    verbs: x\n"), "demo").error("verbs", "bad").what()) ==
        "c.yml:3:12: key 'collectors.demo.verbs': bad");
  CHECK(std::string(CollectorSettings(demo("", {"--collector.demo.verbs=x"}), "demo").error("verbs", "bad").what()) ==
        "flag --collector.demo.verbs: bad");
  CHECK(std::string(CollectorSettings(demo(""), "demo").error("verbs", "bad").what()) ==
        "default: key 'collectors.demo.verbs': bad");
  CHECK(CollectorSettings(demo(""), "demo").where("max-peers") == "default: key 'collectors.demo.max_peers'");
  // A key the collector did not declare is a bug in the collector, not a bad configuration.
  CHECK_THROWS_AS(CollectorSettings(demo(""), "demo").error("max_peers", "bad"), std::logic_error);
}

TEST_CASE("settings: the core's own options use the same checks") {
  Options o;
  declare_options(o);
  o.resolve_yaml_text("log:\n  level: loud\n", "c.yml", cli_of(o, {}));
  CHECK_THROWS_WITH(log_settings(o), "c.yml:2:10: key 'log.level': must be debug, info, warn or error, got 'loud'");
  o.resolve_yaml_text("", "", cli_of(o, {"--log.format=xml", "--scrape.timeout=0s"}));
  CHECK_THROWS_WITH(log_settings(o), "flag --log.format: must be logfmt or json, got 'xml'");
  CHECK_THROWS_WITH(build_scraper(o), "flag --scrape.timeout: must be a positive duration, got 0ms");
  // A value of the wrong type: the same start.
  CHECK_THROWS_WITH(o.resolve_yaml_text("scrape:\n  timeout: soon\n", "c.yml", cli_of(o, {})),
                    "c.yml:2:12: key 'scrape.timeout': invalid value 'soon', expected a duration such as 10s or 500ms");
  CHECK_THROWS_WITH(o.resolve_yaml_text("", "", cli_of(o, {"--scrape.timeout=soon"})),
                    "flag --scrape.timeout: invalid value 'soon', expected a duration such as 10s or 500ms");
}

// Each bad value below makes its collector's create() throw. From the file, the message must name
// a YAML key that exists (collectors.prober.max_peers, as the YAML spells it); from the command
// line, a flag that exists (--collector.prober.max-peers).
TEST_CASE("settings: every collector's messages name keys that exist") {
  struct Case {
    std::string collector, key, value;
    std::vector<std::pair<std::string, std::string>> also;  // other settings the check needs
  };
  const std::vector<Case> cases = {
      {"prober", "max-peers", "0", {}},
      {"prober", "max-qps", "70000", {}},
      {"prober", "peers-limit", "0", {}},
      {"prober", "payload-size", "0", {}},
      {"prober", "responder-max-qps", "0", {}},
      {"prober", "dns-port", "65536", {}},
      {"prober", "jitter-percent", "91", {}},
      {"prober", "interval", "0s", {}},
      {"prober", "timeout", "0s", {}},
      {"prober", "connect-timeout", "0s", {}},
      {"prober", "backoff-max", "0s", {}},
      {"prober", "rotate-interval", "0s", {}},
      {"prober", "dns-refresh", "0s", {}},
      {"prober", "poll-window", "1s", {}},
      {"prober", "buckets", "0.1,0.01", {}},
      {"prober", "listen-address", "10.0.0.1", {}},
      {"prober", "device", "mlx5_(", {}},
      {"prober", "secret-file", "/nonexistent/secret", {}},
      {"prober", "trace-rate", "0", {}},
      {"prober", "trace-burst", "65", {}},
      {"prober", "trace-workers", "17", {}},
      {"prober", "trace-workers", "0", {}},
      {"prober", "trace-per-port", "0", {}},
      {"prober", "trace-per-port", "9", {}},
      {"prober", "trace-start-interval", "61s", {}},
      {"prober", "trace-start-burst", "0", {}},
      {"prober", "trace-max-hops", "17", {}},
      {"prober", "trace-timeout", "6s", {}},
      {"prober", "topology-leaf-label", "leaf label", {}},
      {"prober", "topology-leaf-label", "example.com/", {}},
      {"prober", "topology-leaf-label", "network.topology.nvidia.com/leaf", {{"topology-file", "/etc/slurm/topology.conf"}}},
      {"prober", "kubernetes-api", "http://10.96.0.1", {{"topology-leaf-label", "network.topology.nvidia.com/leaf"}}},
      {"prober", "topology-refresh", "5s", {}},
      {"pma", "timeout", "0s", {}},
      {"pma", "retries", "21", {}},
      {"pma", "window", "0", {}},
      {"pma", "fabric-port", "255", {{"fabric", "true"}}},
      {"pma", "fabric-period", "0s", {{"fabric", "true"}}},
      {"pma", "fabric-discovery-period", "0s", {{"fabric", "true"}}},
      {"pma", "node-name-map", "/nonexistent/map", {{"fabric", "true"}}},
      {"port", "verbs", "sometimes", {}},
      {"hw_counters", "netlink", "maybe", {}},
      {"netdev", "roce-priority", "8", {}},
      {"netdev", "extra-stats", std::string(40, 'x'), {}},
  };
  Options declared;
  declare_options(declared);
  auto yaml_key_exists = [&](const std::string& path) {
    for (const auto& s : declared.specs())
      if (s.yaml_path == path) return true;
    return false;
  };
  const GlobalContext global{"/nonexistent", "/proc"};
  for (const auto& c : cases) {
    const CollectorDescriptor* d = nullptr;
    for (const auto* r : registered_collectors())
      if (r->name == c.collector) d = r;
    REQUIRE(d);
    auto create_error = [&](const std::string& yaml, std::vector<std::string> flags) {
      Options o;
      declare_options(o);
      o.resolve_yaml_text(yaml, "c.yml", cli_of(o, std::move(flags)));
      try {
        d->create(CollectorSettings(o, c.collector), global);
      } catch (const ConfigError& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    };
    INFO(c.collector << "." << c.key << " = " << c.value);

    std::string yaml = "collectors:\n  " + c.collector + ":\n";
    for (const auto& [k, v] : c.also) yaml += "    " + yaml_key(k) + ": '" + v + "'\n";
    yaml += "    " + yaml_key(c.key) + ": '" + c.value + "'\n";
    const auto from_file = create_error(yaml, {});
    INFO("from the file: " << from_file);
    std::smatch m;
    REQUIRE(std::regex_search(from_file, m, std::regex("^c\\.yml:[0-9]+:[0-9]+: key '([^']+)': ")));
    CHECK(m[1] == "collectors." + c.collector + "." + yaml_key(c.key));
    CHECK(yaml_key_exists(m[1]));

    std::vector<std::string> flags;
    for (const auto& [k, v] : c.also) flags.push_back("--collector." + c.collector + "." + k + "=" + v);
    flags.push_back("--collector." + c.collector + "." + c.key + "=" + c.value);
    const auto from_flag = create_error("", flags);
    INFO("from a flag: " << from_flag);
    REQUIRE(std::regex_search(from_flag, m, std::regex("^flag --([^:]+): ")));
    CHECK(m[1] == "collector." + c.collector + "." + c.key);
    CHECK_NOTHROW(cli_of(declared, {"--" + m[1].str() + "=" + c.value}));
  }
}

// The prober's secret is read through the bounded reader: a file over the bound is refused whole
// (a wrong path must not become the key), one at the bound is taken.
TEST_CASE("settings: the prober's secret file has a size bound") {
  rdma::testing::TempTree t("secret");
  const std::size_t bound = 64u << 10;
  t.write("at_bound", std::string(bound, 's'));
  t.write("over_bound", std::string(bound + 1, 's'));
  const CollectorDescriptor* d = nullptr;
  for (const auto* r : registered_collectors())
    if (r->name == "prober") d = r;
  REQUIRE(d);
  const GlobalContext global{"/nonexistent", "/proc"};
  auto create_error = [&](const std::string& file) {
    Options o;
    declare_options(o);
    o.resolve_yaml_text("", "", cli_of(o, {"--collector.prober.secret-file=" + t.root() + "/" + file}));
    try {
      d->create(CollectorSettings(o, "prober"), global);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(create_error("at_bound") == "no error");
  CHECK(create_error("over_bound") ==
        "flag --collector.prober.secret-file: " + t.root() + "/over_bound is larger than 65536 bytes");
}
