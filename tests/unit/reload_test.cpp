// What a SIGHUP reload does with each collector: the decision (plan_reload), what counts as the
// same settings (effective_settings), and Scraper::reload with collectors that record their
// starts and stops (order, reuse of the instance, undoing a reload whose new collector fails).
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <stdexcept>

#include "exporter/app.h"
#include "exporter/collector.h"
#include "exporter/options.h"
#include "exporter/scraper.h"
#include "tests/lib/samples.h"
#include "tests/lib/temp_tree.h"

using namespace rdma::exporter;

namespace {

const CollectorDescriptor& descriptor(const std::string& name) {
  for (const auto* d : registered_collectors())
    if (d->name == name) return *d;
  throw std::logic_error("no collector " + name);
}

Options resolved(const std::string& yaml, std::vector<const char*> args = {}) {
  Options o;
  declare_options(o);
  args.insert(args.begin(), "rdma_exporter");
  auto cli = o.parse_command_line(static_cast<int>(args.size()), args.data());
  o.resolve_yaml_text(yaml, yaml.empty() ? "" : "test.yml", cli);
  return o;
}

std::string settings_of(const std::string& collector, const std::string& yaml, std::vector<const char*> args = {}) {
  return effective_settings(resolved(yaml, std::move(args)), descriptor(collector));
}

// Records every start and stop as "<name>#<instance> start|stop" in one shared journal.
struct Journal {
  std::vector<std::string> events;
  int instances = 0;
  std::set<std::string> failing;  // instances ("b#4") whose start() throws
};

class Recorder final : public Collector {
 public:
  Recorder(std::string name, Journal& j) : name_(std::move(name)), j_(j), id_(++j.instances) {}
  void start() override {
    j_.events.push_back(tag() + " start");
    if (j_.failing.count(tag())) throw std::runtime_error("port taken");
  }
  void stop() override { j_.events.push_back(tag() + " stop"); }
  void collect(const ScrapeContext&, MetricSink& out) override {
    out.gauge("test_instance", "Instance id of the collector that answered.", {{"collector", name_}}, id_);
  }

 private:
  std::string tag() const { return name_ + "#" + std::to_string(id_); }
  std::string name_;
  Journal& j_;
  int id_;
};

struct Fixture {
  rdma::testing::TempTree sys{"reload_test"};
  Journal journal;

  Scraper::Config config(std::vector<std::pair<std::string, std::string>> collectors) {
    sys.write("class/infiniband/.keep", "");
    Scraper::Config c;
    c.discoverer = std::make_shared<const rdma::model::Discoverer>(rdma::model::DiscoveryOptions{sys.root(), "", ""});
    c.timeout = Duration(10000);
    for (auto& [name, settings] : collectors)
      c.collectors.push_back({name, settings, [this, name] { return std::make_unique<Recorder>(name, journal); }});
    return c;
  }
};

using rdma::testing::number;

// The instance id each collector answered a scrape with.
std::map<std::string, double> instances(Scraper& s) {
  std::map<std::string, double> out;
  const auto sink = s.collect();
  if (const auto* f = rdma::testing::family(sink, "test_instance"))
    for (const auto& sample : f->samples) out[sample.labels.at(0).second] = number(sample.value);
  return out;
}

}  // namespace

TEST_CASE("plan_reload keeps equal settings, restarts changed ones, starts and stops the rest") {
  auto plan = plan_reload({{"a", "x"}, {"b", "y"}, {"c", "z"}}, {{"a", "x"}, {"b", "y2"}, {"d", "w"}});
  CHECK(plan.keep == std::vector<std::string>{"a"});
  CHECK(plan.restart == std::vector<std::string>{"b"});
  CHECK(plan.start == std::vector<std::string>{"d"});
  CHECK(plan.stop == std::vector<std::string>{"c"});
  auto same = plan_reload({{"a", "x"}}, {{"a", "x"}});
  CHECK(same.keep.size() == 1);
  CHECK((same.restart.empty() && same.start.empty() && same.stop.empty()));
}

TEST_CASE("effective settings: a collector's own values and the global inputs, wherever they come from") {
  const auto base = settings_of("hw_counters", "");
  // The same value from the file, from a flag, or as the default: the same settings.
  CHECK(settings_of("hw_counters", "collectors:\n  hw_counters:\n    wrap_extension: true\n") == base);
  CHECK(settings_of("hw_counters", "", {"--collector.hw_counters.wrap-extension=true"}) == base);
  // Another collector's settings, the log level, the scrape timeout, the web settings: not its own.
  CHECK(settings_of("hw_counters", "collectors:\n  prober:\n    interval: 2s\n") == base);
  CHECK(settings_of("hw_counters", "log:\n  level: debug\nscrape:\n  timeout: 3s\n") == base);
  CHECK(settings_of("hw_counters", "", {"--web.max-requests=3"}) == base);
  // Its own values and what it reads through the discovery: changed.
  CHECK(settings_of("hw_counters", "collectors:\n  hw_counters:\n    wrap_extension: false\n") != base);
  CHECK(settings_of("hw_counters", "", {"--path.sysfs=/elsewhere"}) != base);
  CHECK(settings_of("hw_counters", "device:\n  include: '^mlx5_0$'\n") != base);
  CHECK(settings_of("hw_counters", "device:\n  exclude: 'rxe'\n") != base);
}

TEST_CASE("effective settings: YAML values compare by content, not by layout") {
  const auto flow = settings_of("prober", "collectors:\n  prober:\n    peers: [{address: 10.0.0.1, name: a}]\n");
  const auto block = settings_of("prober", "\n\ncollectors:\n  prober:\n    peers:\n      - address: 10.0.0.1\n        name: a\n");
  CHECK(flow == block);
  CHECK(settings_of("prober", "collectors:\n  prober:\n    peers: [{address: 10.0.0.2, name: a}]\n") != flow);
  // A list value is not confused with one string that has the same commas.
  CHECK(settings_of("prober", "collectors:\n  prober:\n    buckets: [0.1, 0.2]\n") ==
        settings_of("prober", "", {"--collector.prober.buckets=0.1,0.2"}));
}

TEST_CASE("effective settings: a rotated file behind a file setting counts as a change") {
  rdma::testing::TempTree dir("reload_secret");
  dir.write("secret", "one\n");
  const std::string flag = "--collector.prober.secret-file=" + dir.root() + "/secret";
  const auto before = settings_of("prober", "", {flag.c_str()});
  CHECK(settings_of("prober", "", {flag.c_str()}) == before);
  dir.write("secret", "two\n");
  CHECK(settings_of("prober", "", {flag.c_str()}) != before);
}

TEST_CASE_METHOD(Fixture, "reload: unchanged collectors keep their running instance, untouched") {
  Scraper s(config({{"a", "x"}, {"b", "y"}}));
  CHECK(s.start().empty());
  const auto before = instances(s);
  journal.events.clear();
  auto r = s.reload(config({{"a", "x"}, {"b", "y"}}));
  CHECK(r.failures.empty());
  CHECK(r.plan.keep == std::vector<std::string>{"a", "b"});
  CHECK(journal.events.empty());  // neither stopped nor started again
  CHECK(journal.instances == 2);  // and no new instance even created
  CHECK(instances(s) == before);
}

TEST_CASE_METHOD(Fixture, "reload: a changed collector stops before its new instance starts") {
  Scraper s(config({{"a", "x"}, {"b", "y"}, {"c", "z"}}));
  CHECK(s.start().empty());
  journal.events.clear();
  auto r = s.reload(config({{"a", "x"}, {"b", "y2"}, {"d", "w"}}));
  CHECK(r.failures.empty());
  // b#2 (old) stops before b#4 (new) starts: a port the old one listened on is free again.
  CHECK(journal.events == std::vector<std::string>{"b#2 stop", "c#3 stop", "b#4 start", "d#5 start"});
  CHECK(instances(s) == std::map<std::string, double>{{"a", 1}, {"b", 4}, {"d", 5}});
  CHECK(s.collector_names() == std::vector<std::string>{"a", "b", "d"});
}

TEST_CASE_METHOD(Fixture, "reload: a new instance that cannot start undoes the reload") {
  Scraper s(config({{"a", "x"}, {"b", "y"}}));
  CHECK(s.start().empty());
  journal.events.clear();
  journal.failing = {"b#4"};  // the new b; the old one may start again
  auto r = s.reload(config({{"a", "x2"}, {"b", "y2"}}));
  REQUIRE(r.failures.size() == 1);
  CHECK(r.failures[0] == "b: port taken");
  CHECK(r.restore_failures.empty());
  // Both new instances stop, both old ones start again, and scrapes still see the old ones.
  CHECK(journal.events == std::vector<std::string>{"a#1 stop", "b#2 stop", "a#3 start", "b#4 start", "a#3 stop",
                                                   "b#4 stop", "a#1 start", "b#2 start"});
  CHECK(instances(s) == std::map<std::string, double>{{"a", 1}, {"b", 2}});
  // A later good reload still works from there.
  CHECK(s.reload(config({{"a", "x"}, {"b", "y2"}})).failures.empty());
  CHECK(instances(s) == std::map<std::string, double>{{"a", 1}, {"b", 5}});
}

TEST_CASE_METHOD(Fixture, "reload: an old instance that cannot start again is reported apart") {
  Scraper s(config({{"b", "y"}}));
  CHECK(s.start().empty());
  journal.failing = {"b#1", "b#2"};  // the new one fails, and so does the old one's second start
  auto r = s.reload(config({{"b", "y2"}}));
  CHECK(r.failures == std::vector<std::string>{"b: port taken"});
  CHECK(r.restore_failures == std::vector<std::string>{"b: port taken"});
  CHECK(s.collector_names() == std::vector<std::string>{"b"});
}

TEST_CASE_METHOD(Fixture, "reload: a collector that rejects its settings changes nothing") {
  Scraper s(config({{"a", "x"}}));
  CHECK(s.start().empty());
  journal.events.clear();
  auto bad = config({{"a", "x2"}});
  bad.collectors[0].create = []() -> std::unique_ptr<Collector> { throw ConfigError("test.yml:1: bad value"); };
  CHECK_THROWS_AS(s.reload(std::move(bad)), ConfigError);
  CHECK(journal.events.empty());
  CHECK(instances(s) == std::map<std::string, double>{{"a", 1}});
}

TEST_CASE_METHOD(Fixture, "reload: a failing before_switch (the web config) changes nothing") {
  Scraper s(config({{"a", "x"}}));
  CHECK(s.start().empty());
  journal.events.clear();
  bool called = false;
  CHECK_THROWS_AS(s.reload(config({{"a", "x2"}}), [&] { called = true, throw std::runtime_error("bad certificate"); }),
                  std::runtime_error);
  CHECK(called);
  CHECK(journal.instances == 2);  // the new instance was created (its settings checked) ...
  CHECK(journal.events.empty());  // ... and dropped unstarted; the old one never stopped
  CHECK(instances(s) == std::map<std::string, double>{{"a", 1}});
}

TEST_CASE_METHOD(Fixture, "reload: error counts of a restarted collector carry over") {
  Scraper s(config({{"a", "x"}}));
  s.start();
  // Count one error through the scrape path: the collector's instance reports it.
  class Failing final : public Collector {
   public:
    void collect(const ScrapeContext& ctx, MetricSink&) override { ctx.errors.report("test", "cause", "message"); }
  };
  auto with_errors = config({{"a", "x2"}});
  with_errors.collectors[0].create = [] { return std::make_unique<Failing>(); };
  REQUIRE(s.reload(std::move(with_errors)).failures.empty());
  auto errors = [&] {
    const auto found = rdma::testing::find(s.collect(), "rdma_exporter_collector_errors_total");
    return found ? found->number() : 0.0;
  };
  CHECK(errors() == 1);
  CHECK(errors() == 2);
  REQUIRE(s.reload(config({{"a", "x3"}})).failures.empty());
  CHECK(errors() == 2);  // the new instance reports none, the count stays
}
