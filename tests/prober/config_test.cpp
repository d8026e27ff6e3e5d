#include <catch2/catch.hpp>

#include "collectors/prober/engine/config.h"
#include "exporter/options.h"

using namespace rdma::collectors::prober;
using rdma::exporter::ConfigError;

TEST_CASE("static peers from YAML") {
  auto y = YAML::Load(R"(
- address: 10.77.0.2
  name: b
  group: rack1
  local_device: rxe0
  local_port: 1
  gid_index: 1
- {address: 10.77.0.3, tcp_port: 9700}
)");
  auto p = parse_peers(y, "cfg.yml", 9662, 100);
  REQUIRE(p.size() == 2);
  CHECK(p[0].name == "b");
  CHECK(p[0].group == "rack1");
  CHECK(p[0].local_device == "rxe0");
  CHECK(p[0].local_port == 1);
  CHECK(p[0].gid_index == 1);
  CHECK(p[0].tcp_port == 9662);
  CHECK(p[1].tcp_port == 9700);
  CHECK(p[1].gid_index == -1);
  CHECK(parse_peers(YAML::Node(), "cfg.yml", 1, 1).empty());
}

TEST_CASE("bad peer entries name the file, line and key") {
  auto err = [](const std::string& text, std::size_t max = 100) {
    try {
      parse_peers(YAML::Load(text), "cfg.yml", 9662, max);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(err("- {address: a, colour: red}"), Catch::Contains("cfg.yml:1:") && Catch::Contains("colour"));
  CHECK_THAT(err("- {name: a}"), Catch::Contains("without `address`"));
  CHECK_THAT(err("- {address: a, tcp_port: 70000}"), Catch::Contains("tcp_port"));
  CHECK_THAT(err("- {address: a, gid_index: x}"), Catch::Contains("gid_index"));
  CHECK_THAT(err("a: b"), Catch::Contains("list"));
  CHECK_THAT(err("- {address: a}\n- {address: b}", 1), Catch::Contains("more than 1"));
}

TEST_CASE("buckets and listen addresses") {
  CHECK(parse_buckets({"1e-6", "0.001", "0.1"}, "x") == std::vector<double>{1e-6, 0.001, 0.1});
  CHECK_THROWS_AS(parse_buckets({"0.1", "0.01"}, "x"), ConfigError);
  CHECK_THROWS_AS(parse_buckets({"abc"}, "x"), ConfigError);
  CHECK_THROWS_AS(parse_buckets({"-1"}, "x"), ConfigError);
  CHECK_THROWS_AS(parse_buckets({}, "x"), ConfigError);
  auto l = parse_listen(":9662", "x");
  CHECK(l.host.empty());
  CHECK(l.port == 9662);
  l = parse_listen("10.77.0.1:9700", "x");
  CHECK(l.host == "10.77.0.1");
  l = parse_listen("[::1]:9700", "x");
  CHECK(l.host == "::1");
  CHECK_THROWS_AS(parse_listen("10.0.0.1", "x"), ConfigError);
  CHECK_THROWS_AS(parse_listen(":0", "x"), ConfigError);
  CHECK_THROWS_AS(parse_listen(":99x", "x"), ConfigError);
}

TEST_CASE("self exclusion") {
  const std::set<std::string> local{"127.0.0.1", "10.77.0.1", "10.77.0.2"};
  // listening on any address: every local address with our port is us
  CHECK(is_self("10.77.0.2", 9662, {"", 9662}, local));
  CHECK_FALSE(is_self("10.77.0.2", 9663, {"", 9662}, local));
  CHECK_FALSE(is_self("10.77.0.9", 9662, {"", 9662}, local));
  // listening on one address: another local address is another exporter (two in one VM)
  CHECK(is_self("10.77.0.1", 9662, {"10.77.0.1", 9662}, local));
  CHECK_FALSE(is_self("10.77.0.2", 9662, {"10.77.0.1", 9662}, local));
}

TEST_CASE("peers from a static list and a DNS name, self excluded, limited") {
  PeerSources src;
  auto s = PeerSpec{};
  s.name = "static-b";
  s.address = "node-b";
  s.tcp_port = 9662;
  s.source = "static";
  src.statics = {s};
  src.dns_name = "prober.svc";
  src.dns_port = 9662;
  src.dns_group = "pods";
  int calls = 0;
  auto resolver = [&](const std::string& name, std::string& err) -> std::vector<std::string> {
    ++calls;
    if (name == "node-b") return {"10.0.0.2"};
    if (name == "prober.svc") return {"10.0.0.1", "10.0.0.3", "10.0.0.4"};
    err = "Name or service not known";
    return {};
  };
  auto e = expand_peers(src, {"", 9662}, {"10.0.0.1"}, 2, resolver);
  CHECK(calls == 2);
  REQUIRE(e.peers.size() == 2);
  CHECK(e.peers[0].name == "static-b");
  CHECK(e.peers[0].address == "10.0.0.2");
  CHECK(e.peers[1].name == "10.0.0.3");
  CHECK(e.peers[1].group == "pods");
  CHECK(e.peers[1].source == "dns");
  CHECK(e.self_excluded == 1);
  CHECK(e.dropped_over_limit == 1);
  // a name that does not resolve is reported, the rest still works
  src.dns_name = "gone.svc";
  e = expand_peers(src, {"", 9662}, {}, 10, resolver);
  CHECK(e.peers.size() == 1);
  REQUIRE(e.errors.size() == 1);
  CHECK_THAT(e.errors[0], Catch::Contains("gone.svc"));
}

TEST_CASE("real resolution of numeric and loopback names") {
  std::string err;
  auto r = resolve_all("127.0.0.1", err);
  CHECK(r == std::vector<std::string>{"127.0.0.1"});
  CHECK(resolve_all("name.invalid", err).empty());
  CHECK_FALSE(err.empty());
  CHECK(local_addresses().count("127.0.0.1") == 1);
}

TEST_CASE("rail rules from YAML, and bad ones named by file, line and key") {
  auto rules = parse_rails(YAML::Load(R"(
- {rail: "rail$1", device: "^mlx5_(\\d+)$"}
- {rail: storage, netdev: "^eth9"}
)"),
                           "cfg.yml");
  REQUIRE(rules.size() == 2);
  CHECK(rules[0].rail == "rail$1");
  CHECK((rules[0].device && !rules[0].netdev && rules[1].netdev && !rules[1].device));
  CHECK(parse_rails(YAML::Node(), "cfg.yml").empty());
  auto err = [](const std::string& text) {
    try {
      parse_rails(YAML::Load(text), "cfg.yml");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(err("- {rail: r1, device: x, colour: red}"), Catch::Contains("cfg.yml:1:") && Catch::Contains("colour"));
  CHECK_THAT(err("- {device: x}"), Catch::Contains("without `rail`"));
  CHECK_THAT(err("- {rail: r1}"), Catch::Contains("needs `device` or `netdev`"));
  CHECK_THAT(err("- {rail: r1, device: \"(\"}"), Catch::Contains("bad regular expression"));
  CHECK_THAT(err("- {rail: \"" + std::string(65, 'r') + "\", device: x}"), Catch::Contains("1 to 64 printable"));
  CHECK_THAT(err("rail: r1"), Catch::Contains("list"));
}
