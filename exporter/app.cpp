#include "exporter/app.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <regex>

#include "exporter/collector.h"
#include "exporter/http_server.h"
#include "exporter/logging.h"
#include "exporter/web_config.h"
#include "sources/common/small_file.h"
#include "sources/verbs/device_events.h"

namespace rdma::exporter {
namespace {

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string landing_page(const std::string& telemetry_path, const std::vector<std::string>& collectors) {
  auto bi = build_info();
  std::string html =
      "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>rdma_exporter</title></head><body>"
      "<h1>rdma_exporter</h1><p>Prometheus exporter for RDMA fabrics (InfiniBand, RoCE).</p>"
      "<p>Version " + html_escape(bi.version) + " (revision " + html_escape(bi.revision) + ")</p><ul>"
      "<li><a href=\"" + html_escape(telemetry_path) + "\">Metrics</a></li>"
      "<li><a href=\"/healthz\">Health</a></li></ul><h2>Enabled collectors</h2><ul>";
  for (const auto& c : collectors) html += "<li>" + html_escape(c) + "</li>";
  html += "</ul></body></html>\n";
  return html;
}

// Counted across reloads (each reload builds a new Scraper); exposed through its self-metrics hook.
struct DaemonStats {
  std::atomic<std::uint64_t> reloads_success{0};
  std::atomic<std::uint64_t> reloads_failure{0};
  std::atomic<bool> last_reload_ok{true};
  std::atomic<const HttpStats*> http{nullptr};
};

void daemon_self_metrics(const DaemonStats& st, MetricSink& out) {
  out.gauge("rdma_exporter_config_last_reload_successful",
            "1 when the last configuration reload (SIGHUP) succeeded or none was attempted, else 0.", {},
            st.last_reload_ok.load() ? 1.0 : 0.0);
  const char* help = "Configuration reloads (SIGHUP) by result.";
  out.counter("rdma_exporter_config_reloads_total", help, {{"result", "success"}}, st.reloads_success.load());
  out.counter("rdma_exporter_config_reloads_total", help, {{"result", "failure"}}, st.reloads_failure.load());
  if (const HttpStats* h = st.http.load()) {
    const char* rh =
        "HTTP requests refused, by reason (concurrency limit, auth, unknown path, method, body, a head that did not "
        "arrive in time, too many connections).";
    for (auto [reason, n] : {std::pair{"too_many_scrapes", &h->too_many_scrapes},
                             {"too_many_other_requests", &h->too_many_other}, {"unauthorized", &h->unauthorized},
                             {"not_found", &h->not_found}, {"method_not_allowed", &h->bad_method},
                             {"request_too_large", &h->too_large}, {"scrape_failed", &h->scrape_failed},
                             {"head_timeout", &h->gate.head_timeout}, {"connections_evicted", &h->gate.evicted},
                             {"relay_full", &h->gate.relay_full}})
      out.counter("rdma_exporter_http_requests_rejected_total", rh, {{"reason", reason}}, n->load());
  }
}

}  // namespace

void declare_options(Options& o) {
  o.declare({"web.listen-address", OptionType::kString, ":9661", "Address to listen on for HTTP, [host]:port."});
  o.declare({"web.telemetry-path", OptionType::kString, "/metrics", "Path under which to expose metrics."});
  o.declare({"web.max-requests", OptionType::kInt, "0",
             "Worker threads serving HTTP requests, one per open (keep-alive) connection; 0: "
             "web.max-concurrent-scrapes + web.max-concurrent-other-requests + 8, so that every admitted request has one."});
  o.declare({"web.config.file", OptionType::kString, "",
             "Web config file (exporter-toolkit format): TLS and basic auth. See docs/security.md."});
  o.declare({"web.max-concurrent-scrapes", OptionType::kInt, "64",
             "Scrapes served at once (they share one collection); the excess get 503 immediately (0: no limit)."});
  o.declare({"web.max-concurrent-other-requests", OptionType::kInt, "32",
             "Requests to collectors' paths (/pma, /probe, /prober/traces, ...) served at once, apart from the scrapes' "
             "slots; the excess get 503 immediately (0: no limit)."});
  o.declare({"web.head-timeout", OptionType::kDuration, "1s",
             "Time from connect to a complete request head (TLS: the ClientHello); a connection holds no worker before it "
             "and is closed after it."});
  o.declare({"web.timeout-offset", OptionType::kDuration, "500ms",
             "Subtracted from a scraper's X-Prometheus-Scrape-Timeout-Seconds to leave time for the answer."});
  o.declare({"web.request-timeout", OptionType::kDuration, "10s", "Timeout of every HTTP socket read and write."});
  o.declare({"web.max-request-size", OptionType::kInt, "16384", "Largest request line plus headers, in bytes."});
  o.declare({"path.sysfs", OptionType::kString, "/sys", "sysfs mount point."});
  o.declare({"path.procfs", OptionType::kString, "/proc", "procfs mount point (the workload collector reads <procfs>/<pid>/cgroup)."});
  o.declare({"device.include", OptionType::kString, "", "Regular expression of RDMA device names to read (default all)."});
  o.declare({"device.exclude", OptionType::kString, "", "Regular expression of RDMA device names never to read."});
  o.declare({"scrape.timeout", OptionType::kDuration, "9500ms",
             "Per-scrape timeout for every collector; a scraper's X-Prometheus-Scrape-Timeout-Seconds less "
             "web.timeout-offset lowers it (the default is Prometheus' default 10s less the default offset)."});
  o.declare({"log.level", OptionType::kString, "info", "Log level: debug, info, warn, error."});
  o.declare({"log.format", OptionType::kString, "logfmt", "Log format: logfmt or json."});
  o.declare({"collector.disable-defaults", OptionType::kBool, "false",
             "Disable every collector that is not explicitly enabled.", "collectors.disable_defaults"});
  for (const auto* d : registered_collectors()) {
    o.declare({"collector." + d->name, OptionType::kBool, "", "Enable the " + d->name + " collector: " + d->help,
               "collectors." + d->name + ".enabled"});
    for (const auto& s : d->settings)
      o.declare({"collector." + d->name + "." + s.key, s.type, s.default_value, s.help,
                 "collectors." + d->name + "." + yaml_key(s.key)});
  }
}

namespace {
// Changes when the file's content does; a hash, so that a secret is not kept twice in memory.
std::string file_fingerprint(const std::string& path) {
  if (path.empty()) return "";
  auto file = read_small_file(path, kMaxNamesFileBytes);
  if (!file) return "unreadable";  // create() reports it; here it only has to differ from a content
  const std::string& text = file.value;
  return std::to_string(text.size()) + "/" + std::to_string(std::hash<std::string>{}(text));
}

std::string join(const std::vector<std::string>& v, std::string_view sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : std::string(sep)) + s;
  return out;
}
}  // namespace

std::string effective_settings(const Options& o, const CollectorDescriptor& d) {
  std::string out;
  auto add = [&](const std::string& key, const std::string& value) { out += key + "=" + value + "\n"; };
  // Every collector reads the host through the shared discovery (sysfs root, device filters) and
  // GlobalContext: a change there restarts them all.
  for (const char* global : {"path.sysfs", "path.procfs", "device.include", "device.exclude"})
    add(global, o.render(global));
  for (const auto& s : d.settings) {
    const std::string flag = "collector." + d.name + "." + s.key;
    add(flag, o.render(flag));
    if (s.names_file) add(flag + " content", file_fingerprint(o.get_string(flag)));
  }
  return out;
}

namespace {
// One for the process: created with the first scraper, kept across reloads (its counts are the
// daemon's, not a collector instance's).
std::shared_ptr<verbs::DeviceEvents> daemon_device_events() {
  static const auto events = std::make_shared<verbs::DeviceEvents>();
  return events;
}
}  // namespace

Scraper::Config scraper_config(const Options& o) {
  GlobalContext global{o.get_string("path.sysfs"), o.get_string("path.procfs"), daemon_device_events()};
  model::DiscoveryOptions dopts{global.sysfs_root, o.get_string("device.include"), o.get_string("device.exclude")};
  Scraper::Config config;
  try {
    config.discoverer = std::make_shared<const model::Discoverer>(dopts);
  } catch (const std::regex_error& e) {
    throw ConfigError(o.origin("device.include") + " / " + o.origin("device.exclude") +
                      ": invalid device regular expression: " + e.what());
  }
  bool disable_defaults = o.get_bool("collector.disable-defaults");
  for (const auto* d : registered_collectors()) {
    const auto& v = o.get("collector." + d->name);
    bool enabled = std::holds_alternative<bool>(v) ? std::get<bool>(v) : (d->enabled_by_default && !disable_defaults);
    if (!enabled) continue;
    config.collectors.push_back({d->name, effective_settings(o, *d), [&o, d, global] {
                                   return d->create(CollectorSettings(o, d->name), global);
                                 }});
  }
  config.timeout = o.get_positive_duration("scrape.timeout");
  return config;
}

std::unique_ptr<Scraper> build_scraper(const Options& o) { return std::make_unique<Scraper>(scraper_config(o)); }

// The port collector keeps its sysfs files open between scrapes: 37 descriptors for a one-port
// mlx5 device (9 device, 6 port, 22 counters/), and the discovery 4 (the device's directory,
// ports/, each port, device/net), about 330 on an 8-NIC host, beside up to 72 HTTP
// threads' sockets, well under the usual soft limit of 1,024, but a host with many ports or VFs
// could reach it. As Go programs do since Go 1.19, the soft limit is raised to the hard one
// (systemd's default hard limit is 524,288); select() is not used (CivetWeb polls), so a
// descriptor above 1,024 is harmless.
namespace {
void raise_fd_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
  const rlim_t was = lim.rlim_cur;
  lim.rlim_cur = lim.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &lim) == 0) spdlog::debug("open file limit raised from {} to {}", was, lim.rlim_max);
  else spdlog::warn("cannot raise the open file limit from {}: {}", was, std::strerror(errno));
}
}  // namespace

int run(int argc, const char* const* argv) {
  Options options;
  declare_options(options);
  Options::CommandLine cli;
  try {
    cli = options.parse_command_line(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "rdma_exporter: error: " << e.what() << "\n\n" << options.usage("rdma_exporter");
    return 2;
  }
  if (cli.help) {
    std::cout << options.usage("rdma_exporter");
    return 0;
  }
  if (cli.version) {
    auto bi = build_info();
    std::cout << "rdma_exporter version " << bi.version << " (revision " << bi.revision << ", " << bi.compiler << ")\n";
    return 0;
  }
  std::unique_ptr<Scraper> scraper;
  WebConfig web;
  DaemonStats stats;
  try {
    options.resolve(cli);
    setup_logging(log_settings(options));
    raise_fd_limit();
    if (auto path = options.get_string("web.config.file"); !path.empty()) web = load_web_config(path);
    scraper = build_scraper(options);
    scraper->set_self_metrics_hook([&stats](MetricSink& out) { daemon_self_metrics(stats, out); });
  } catch (const std::exception& e) {
    std::cerr << "rdma_exporter: error: " << e.what() << "\n";
    return 2;
  }

  // Block the stop signals in every thread; the main thread waits for them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // At start-up a collector that cannot start stays off and the rest serve (a reload that meets
  // the same is undone instead: see below).
  for (const auto& failure : scraper->start()) spdlog::error("collector did not start, running without it: {}", failure);
  HttpOptions http;
  http.listen_address = options.get_string("web.listen-address");
  http.telemetry_path = options.get_string("web.telemetry-path");
  http.max_concurrent_scrapes =
      static_cast<int>(std::clamp<std::int64_t>(options.get_int("web.max-concurrent-scrapes"), 0, 1 << 20));
  http.max_concurrent_other =
      static_cast<int>(std::clamp<std::int64_t>(options.get_int("web.max-concurrent-other-requests"), 0, 1 << 20));
  http.threads = static_cast<int>(std::clamp<std::int64_t>(options.get_int("web.max-requests"), 0, 4096));
  if (http.threads == 0)
    http.threads = static_cast<int>(std::min<std::int64_t>(
        std::int64_t{http.max_concurrent_scrapes ? http.max_concurrent_scrapes : 64} +
            (http.max_concurrent_other ? http.max_concurrent_other : 32) + 8,
        4096));
  http.head_timeout_ms =
      static_cast<int>(std::clamp<std::int64_t>(options.get_duration("web.head-timeout").count(), 1, 60000));
  http.timeout_offset = std::max(Duration(0), options.get_duration("web.timeout-offset"));
  http.request_timeout_ms =
      static_cast<int>(std::clamp<std::int64_t>(options.get_duration("web.request-timeout").count(), 1, 1 << 30));
  http.max_request_size =
      static_cast<std::size_t>(std::clamp<std::int64_t>(options.get_int("web.max-request-size"), 1024, 1 << 24));
  http.web = web;
  std::unique_ptr<HttpServer> server;
  try {
    server = std::make_unique<HttpServer>(
        http, HttpHandlers{[&](std::optional<Duration> client_timeout) { return scraper->scrape_text(client_timeout); },
                           [&] { return landing_page(http.telemetry_path, scraper->collector_names()); },
                           [&](std::string_view path, std::string_view query) { return scraper->serve_path(path, query); }});
  } catch (const std::exception& e) {
    spdlog::error("cannot start HTTP server: {}", e.what());
    scraper->stop();
    return 1;
  }
  stats.http.store(&server->stats());
  const std::string names = join(scraper->collector_names(), ",");
  spdlog::info("listening on {} (port {}, {}{}), telemetry path {}, collectors [{}], sysfs {}", http.listen_address,
               server->port(), server->tls() ? "https" : "http", web.basic_auth_users.empty() ? "" : ", basic auth",
               http.telemetry_path, names, options.get_string("path.sysfs"));

  for (;;) {
    int sig = 0;
    if (sigwait(&stop_signals, &sig) != 0) continue;
    if (sig != SIGHUP) {
      spdlog::info("received signal {}, shutting down", sig);
      break;
    }
    // SIGHUP: reload the config file; a bad one keeps the running configuration. Collectors
    // whose effective settings are unchanged keep running untouched; the changed ones restart;
    // if one of those cannot start, the collectors' reload is undone (Scraper::reload).
    try {
      Options fresh;
      declare_options(fresh);
      fresh.resolve(cli);
      const auto log = log_settings(fresh);
      auto next = scraper_config(fresh);
      // The web config too (rotated certificates, changed users); applied only when it and the
      // collectors' settings are valid, before the collectors change, so that a bad one changes
      // nothing. It stays applied when a collector then fails to start.
      WebConfig next_web;
      if (auto path = fresh.get_string("web.config.file"); !path.empty()) next_web = load_web_config(path);
      const auto r = scraper->reload(std::move(next), [&] { server->reload_web_config(next_web); });
      for (const auto& f : r.restore_failures)
        spdlog::error("collector did not start again with its previous settings, it is off: {}", f);
      if (!r.failures.empty())
        throw std::runtime_error("collector did not start: " + join(r.failures, "; ") +
                                 (r.restore_failures.empty() ? " (the previous collectors run again)" : ""));
      setup_logging(log);
      ++stats.reloads_success;
      stats.last_reload_ok.store(true);
      spdlog::info("configuration reloaded; collectors kept [{}], restarted [{}], started [{}], stopped [{}]",
                   join(r.plan.keep, ","), join(r.plan.restart, ","), join(r.plan.start, ","), join(r.plan.stop, ","));
    } catch (const std::exception& e) {
      ++stats.reloads_failure;
      stats.last_reload_ok.store(false);
      spdlog::error("configuration reload failed, keeping the running configuration: {}", e.what());
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  server.reset();  // stops accepting and waits for in-flight requests
  scraper->stop();
  spdlog::info("stopped in {:.3f} s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

}  // namespace rdma::exporter
