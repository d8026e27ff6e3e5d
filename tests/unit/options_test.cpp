#include <catch2/catch.hpp>

#include "exporter/app.h"
#include "exporter/options.h"

using namespace rdma::exporter;

namespace {
Options declared() {
  Options o;
  declare_options(o);
  return o;
}
Options::CommandLine parse(const Options& o, std::vector<const char*> args) {
  args.insert(args.begin(), "rdma_exporter");
  return o.parse_command_line(static_cast<int>(args.size()), args.data());
}
}  // namespace

TEST_CASE("durations") {
  CHECK(parse_duration("10s") == Duration(10000));
  CHECK(parse_duration("500ms") == Duration(500));
  CHECK(parse_duration("1h2m3s") == Duration(3723000));
  CHECK_FALSE(parse_duration("10"));
  CHECK_FALSE(parse_duration("s"));
  CHECK_FALSE(parse_duration("-1s"));
  CHECK_FALSE(parse_duration("10x"));
}

TEST_CASE("defaults, flags and --no- flags") {
  auto o = declared();
  auto cli = parse(o, {"--web.listen-address=127.0.0.1:1234", "--path.sysfs", "/tmp/sys", "--no-collector.port"});
  o.resolve(cli);
  CHECK(o.get_string("web.listen-address") == "127.0.0.1:1234");
  CHECK(o.get_string("path.sysfs") == "/tmp/sys");
  CHECK(o.get_string("web.telemetry-path") == "/metrics");
  CHECK(o.get_bool("collector.port") == false);
  CHECK(o.get_duration("scrape.timeout") == Duration(9500));
}

TEST_CASE("unknown flags and bad values are usage errors") {
  auto o = declared();
  CHECK_THROWS_AS(parse(o, {"--web.listen-adress=:1"}), UsageError);
  CHECK_THROWS_AS(parse(o, {"--no-web.listen-address"}), UsageError);
  CHECK_THROWS_AS(parse(o, {"positional"}), UsageError);
  CHECK_THROWS_AS(parse(o, {"--path.sysfs"}), UsageError);  // missing value
  auto cli = parse(o, {"--scrape.timeout=soon"});
  CHECK_THROWS_WITH(o.resolve(cli), Catch::Contains("flag --scrape.timeout") && Catch::Contains("soon"));
}

TEST_CASE("YAML file: values, flags override it") {
  auto o = declared();
  auto cli = parse(o, {"--log.level=debug"});
  o.resolve_yaml_text(
      "web:\n  listen_address: 127.0.0.1:9999\nlog:\n  level: warn\ncollectors:\n  port:\n    enabled: false\n",
      "test.yml", cli);
  CHECK(o.get_string("web.listen-address") == "127.0.0.1:9999");
  CHECK(o.get_string("log.level") == "debug");
  CHECK(o.get_bool("collector.port") == false);
  CHECK(o.origin("web.listen-address") == "test.yml:2:19");
}

TEST_CASE("YAML errors name the file, line and key") {
  auto o = declared();
  Options::CommandLine cli;
  CHECK_THROWS_WITH(o.resolve_yaml_text("web:\n  listen_adress: x\n", "c.yml", cli),
                    Catch::Contains("c.yml:2:3") && Catch::Contains("unknown key 'web.listen_adress'"));
  CHECK_THROWS_WITH(o.resolve_yaml_text("scrape:\n  timeout: [1, 2]\n", "c.yml", cli),
                    Catch::Contains("c.yml:2:12") && Catch::Contains("'scrape.timeout'"));
  CHECK_THROWS_WITH(o.resolve_yaml_text("collectors:\n  port:\n    enabled: maybe\n", "c.yml", cli),
                    Catch::Contains("c.yml:3:14") && Catch::Contains("collectors.port.enabled"));
  CHECK_THROWS_WITH(o.resolve_yaml_text("web: [\n", "c.yml", cli), Catch::Contains("c.yml:") && Catch::Contains("invalid YAML"));
  CHECK_THROWS_WITH(o.resolve_yaml_text("- a\n- b\n", "c.yml", cli), Catch::Contains("expected a mapping"));
  CHECK_THROWS_WITH(o.resolve_yaml_text("collectors:\n  nosuch:\n    enabled: true\n", "c.yml", cli),
                    Catch::Contains("unknown key 'collectors.nosuch'"));
}

TEST_CASE("bad values reach build_scraper as ConfigError") {
  auto o = declared();
  auto cli = parse(o, {"--device.include=mlx5_(", "--path.sysfs=/nonexistent"});
  o.resolve(cli);
  CHECK_THROWS_AS(build_scraper(o), ConfigError);
  auto o2 = declared();
  auto cli2 = parse(o2, {"--collector.port.verbs=sometimes"});
  o2.resolve(cli2);
  CHECK_THROWS_WITH(build_scraper(o2), Catch::Contains("flag --collector.port.verbs") && Catch::Contains("sometimes"));
}
