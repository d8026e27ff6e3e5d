// Collector "prober": active RDMA WRITE latency probes between exporters (see docs/prober.md).
// A background loop (start/stop) drives the Engine over the VerbsTransport and publishes an
// immutable Snapshot every second; collect() only copies it out.
#include <spdlog/spdlog.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "collectors/prober/engine/config.h"
#include "collectors/prober/engine/engine.h"
#include "collectors/prober/engine/localize.h"
#include "collectors/prober/engine/topology_plan.h"
#include "collectors/prober/engine/trace_scheduler.h"
#include "collectors/prober/engine/traces_endpoint.h"
#include "collectors/prober/node_leaves.h"
#include "sources/cgroup/node_list.h"
#include "collectors/prober/wire/path_tracer.h"
#include "exporter/thread.h"
#include "collectors/prober/ondemand/probe_service.h"
#include "collectors/prober/verbs/verbs_transport.h"
#include "exporter/collector.h"
#include "exporter/kube/kube_client.h"
#include "exporter/tls/openssl_api.h"
#include "sources/common/small_file.h"

namespace rdma::collectors::prober {
namespace {

using exporter::ConfigError;
using exporter::HistogramValue;
using exporter::Labels;
using exporter::MetricSink;

// An HMAC key is tens of bytes; the bound only keeps a wrong path (a log, a device) from being
// read whole into every handshake's key.
inline constexpr std::size_t kMaxSecretBytes = 64u << 10;

struct Settings {
  EngineConfig engine;
  TransportOptions transport;
  PeerSources sources;
  std::chrono::milliseconds dns_refresh{30000};
  std::size_t peers_limit = 4096;
  std::map<std::string, ProbeModule> probe_modules;  // empty: no /probe
  ProbeAccess probe_access;
  bool trace = true;  // path tracing (docs/prober.md, "Path tracing")
  bool traces_allow_unauthenticated = false;  // /prober/traces to anonymous callers
  TraceSchedulerConfig tracing;
  // The topology pinglist (pinglist_plan.h): leaves from a Slurm topology.conf, or from a node
  // label listed through the Kubernetes API (node_leaves.h); both "" = off.
  std::string topology_file;
  std::string topology_leaf_label;
  exporter::kube::Endpoint kube;
  std::chrono::seconds topology_refresh{600};
  std::chrono::seconds plan_rotation{300};
  std::uint64_t plan_seed = 0;
};


// The peers as /probe targets: every numeric address of the static list and the resolved ones.
PeerEndpoints endpoints_of(const std::vector<PeerSpec>& peers) {
  PeerEndpoints out;
  for (const auto& p : peers) out.emplace(p.address, p.tcp_port);
  return out;
}

struct Published {
  Snapshot snap;
  TransportCounters transport;
  std::optional<TraceCounters> tracing;  // with tracing on
  std::uint64_t self_excluded = 0, over_limit = 0, dns_ok = 0, dns_errors = 0;
  std::optional<PlanStatus> plan;  // with a topology file set
  std::chrono::seconds plan_rotation{0};
};

HistogramValue to_histogram(const std::vector<double>& bounds, const Histogram& h) {
  HistogramValue v;
  v.upper_bounds = bounds;
  v.cumulative.assign(bounds.size(), 0);
  std::uint64_t acc = 0;
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    acc += i < h.counts.size() ? h.counts[i] : 0;
    v.cumulative[i] = acc;
  }
  v.count = h.count;
  v.sum = h.sum;
  return v;
}

class ProberCollector final : public exporter::Collector {
 public:
  ProberCollector(Settings s, const std::string& sysfs_root, std::shared_ptr<verbs::DeviceEvents> device_events)
      : s_(std::move(s)),
        device_events_(std::move(device_events)),
        probe_(s_.probe_modules,
               SessionOptions{s_.transport.secret, s_.transport.node_name, s_.transport.device_regex, s_.transport.handshake_timeout},
               s_.transport.listen.port, sysfs_root, s_.probe_access, static_peer_endpoints(s_)) {}
  ~ProberCollector() override { stop(); }

  void start() override {
    std::string why;
    auto t = VerbsTransport::open(s_.transport, why, device_events_);
    if (!t) {
      spdlog::info("prober: off, {}; the rest of the exporter works", why);
      return;
    }
    // A responder that cannot listen (port taken, bad address) is a failure, not a missing
    // capability: it propagates, and the daemon logs it and counts a reload that meets it as failed.
    t->start();
    transport_ = std::move(t);
    s_.engine.max_links = std::max<std::size_t>(1, s_.engine.max_links);
    engine_ = std::make_unique<Engine>(s_.engine, *transport_, transport_->local_ports());
    if (s_.trace) {
      traces_ = std::make_unique<TraceScheduler>(s_.tracing, tracer_);
      engine_->set_tracer(traces_.get());
      traces_->start();
    }
    std::string ports;
    for (const auto& p : transport_->local_ports()) ports += (ports.empty() ? "" : ", ") + p.device + "/" + std::to_string(p.port);
    spdlog::info("prober: on, local ports {}, responder on {}:{}", ports,
                 s_.transport.listen.host.empty() ? "*" : s_.transport.listen.host, s_.transport.listen.port);
    running_ = true;
    resolver_sleep_.reset();
    resolver_stopping_ = false;
    resolver_ = exporter::named_thread("prober-dns", [this] { resolver_main(); });
    loop_ = exporter::named_thread("prober-loop", [this] { loop_main(); });
  }

  void stop() override {
    if (!running_.exchange(false)) return;
    resolver_stopping_ = true;  // a node list in flight ends within about a second
    resolver_sleep_.stop();
    transport_->wake();
    if (resolver_.joinable()) resolver_.join();
    if (loop_.joinable()) loop_.join();
    if (traces_) traces_->stop();  // a trace in progress ends at its next packet (within one trace-timeout)
    transport_->stop();
    model::ib_probe_links().clear();  // a stopped prober's links are not the fabric's state
    // Closes the listening socket and the QPs now, not when the collector is destroyed: the
    // instance a reload starts next binds the same port, and start() may be called again.
    engine_.reset();
    traces_.reset();
    transport_.reset();
  }

  // /probe (docs/probe.md) when probe modules are configured; it runs whether or not the
  // prober's own loop found a device (a request then fails with no_local_port).
  std::vector<exporter::HttpPath> http_paths() override {
    std::vector<exporter::HttpPath> paths{{"/prober/traces", [this](std::string_view query) {
                                             std::shared_ptr<const Published> p;
                                             {
                                               std::lock_guard lock(mu_);
                                               p = published_;
                                             }
                                             return traces_response(p ? &p->snap : nullptr, s_.trace,
                                                                    exporter::request_identity(),
                                                                    s_.traces_allow_unauthenticated, query);
                                           }}};
    if (probe_.enabled())
      paths.push_back({"/probe", [this](std::string_view query) {
                         return probe_.handle(query, exporter::request_identity(), exporter::request_scrape_timeout());
                       }});
    return paths;
  }

  void collect(const exporter::ScrapeContext& ctx, MetricSink& out) override {
    if (probe_.enabled()) probe_.write_metrics(out);
    std::shared_ptr<const Published> p;
    {
      std::lock_guard lock(mu_);
      p = published_;
    }
    out.gauge("rdma_prober_active", "1 when the prober runs (an RDMA device was found and the responder listens), else 0.", {},
              p ? 1.0 : 0.0);
    if (!p) return;
    if (!s_.topology_leaf_label.empty()) node_list_state(ctx, out);
    write_tracing(*p, s_.trace, out);
    // A responder thread that ended on its own (it logged why) leaves this node out of every
    // peer's mesh: an error on every scrape until the prober is restarted (a reload does).
    if (!p->transport.responder_up)
      ctx.errors.report("responder_stopped", "responder", "the prober's responder stopped; peers cannot connect to this node");
    write(*p, out);
  }

 private:
  // Before the resolver's first round (and without a device, when it never runs): the static
  // peers written as numeric addresses; names wait for the resolver.
  static PeerEndpoints static_peer_endpoints(const Settings& s) {
    std::vector<PeerSpec> numeric;
    for (const auto& p : s.sources.statics)
      if (parse_cidr(p.address)) numeric.push_back(p);
    return endpoints_of(numeric);
  }

  static void write(const Published& p, MetricSink& out) {
    const auto& s = p.snap;
    // The verdicts of the last complete window (none before the first).
    if (!s.window.empty()) write_localization_metrics(s.findings, s.window, LocalizeSettings{}, out);
    out.counter("rdma_prober_localization_windows_total",
                "Localization windows closed; the verdicts and link flow counts are the last one's.", {}, s.windows);
    out.gauge("rdma_prober_aggregated",
              "1 when there are more peers than max_peers and series are per peer group over a rotating sample.", {},
              s.aggregated ? 1.0 : 0.0);
    out.gauge_u64("rdma_prober_peers", "Peers known after self exclusion (static list and DNS).", {}, s.peers_known);
    out.gauge_u64("rdma_prober_links", "Flows (peer x paired ports x flows) probed now, each one RC queue pair.", {}, s.links);
    out.gauge_u64("rdma_prober_peers_unpaired",
                  "Peers probed now without a link: their port table was never read, or shares no rail with this host.", {},
                  s.peers_unpaired);
    for (const auto& [reason, n] : s.pairing_failures)
      out.counter("rdma_prober_pairing_failures_total", "Port table requests that failed, by reason (pairing_connect, ...).",
                  {{"reason", reason}}, n);
    for (const auto& [peer, paired] : s.paired)
      out.gauge("rdma_prober_peer_paired",
                "1 when the peer's port table was read and pairs with this host's ports (its links are the pairs); 0: not "
                "read yet, or no rail in common (rails, cross_rail).",
                {{"peer", peer}}, paired ? 1 : 0);
    for (const auto& i : s.link_info)
      out.gauge("rdma_prober_link_info",
                "A local port paired with a peer's port: the rail and the peer's device and port (\"\": the responder chose).",
                {{"device", i.pair.local.device}, {"port", std::to_string(i.pair.local.port)}, {"peer", i.peer},
                 {"peer_device", i.pair.device}, {"peer_port", std::to_string(i.pair.port)}, {"rail", i.pair.rail}},
                1);
    out.gauge_u64("rdma_prober_links_up", "Flows connected whose last probe succeeded.", {}, s.links_up);
    out.gauge_u64("rdma_prober_qps", "Queue pairs open, by role.", {{"role", "prober"}}, p.transport.prober_qps);
    out.gauge_u64("rdma_prober_qps", "Queue pairs open, by role.", {{"role", "responder"}}, p.transport.responder_qps);
    // Both are what the last resolution dropped (they go down when the peer set shrinks): gauges.
    out.gauge_u64("rdma_prober_self_excluded", "Peer addresses (and links) left out now because they are this exporter.", {},
                  p.self_excluded + s.self_excluded);
    if (p.plan) {
      for (const char* state : {"active", "file_error", "api_error", "node_not_found"})
        out.gauge("rdma_prober_plan_state",
                  "1 for the topology plan's state: active (peers from the plan), file_error, api_error (no node list "
                  "read yet), node_not_found (peers from the static list and DNS only).",
                  {{"state", state}}, p.plan->state == state ? 1 : 0);
      out.gauge_u64("rdma_prober_plan_leaves", "Leaves (ToR switches) in the topology plan.", {}, p.plan->leaves);
      out.gauge_u64("rdma_prober_plan_nodes", "Nodes placed under a leaf in the topology plan's membership.", {}, p.plan->nodes);
      out.gauge_u64("rdma_prober_plan_leaf_pairs",
                    "Leaf pairs the plan covers each rotation, fleet-wide: every pair by one prober.", {}, p.plan->leaf_pairs);
      out.gauge_u64("rdma_prober_plan_peers", "Peers this node probes by the plan: its own leaf's, and one per remote leaf pair.",
                    {{"kind", "local"}}, p.plan->local);
      out.gauge_u64("rdma_prober_plan_peers", "Peers this node probes by the plan: its own leaf's, and one per remote leaf pair.",
                    {{"kind", "remote"}}, p.plan->remote);
      out.gauge_u64("rdma_prober_plan_rotation", "The plan's rotation index (wall-clock seconds / the rotation period).", {},
                    p.plan->rotation);
      out.gauge("rdma_prober_plan_rotation_seconds", "The plan's rotation period: its prober and target draws change this often.", {},
                static_cast<double>(p.plan_rotation.count()));
      out.gauge_u64("rdma_prober_plan_file_errors", "Errors in the topology file (each logged once with its line).", {},
                    p.plan->file_errors);
    }
    out.gauge_u64("rdma_prober_peers_over_limit", "Resolved peers left out now by the peers limit.", {}, p.over_limit);
    out.gauge("rdma_prober_responder_up", "1 while the responder thread answers handshakes; 0 when it stopped (an error).", {},
              p.transport.responder_up ? 1 : 0);
    out.gauge_u64("rdma_prober_responder_pending", "Connections to the responder not yet handshaken.", {},
                  p.transport.responder_pending);
    for (const auto& [reason, n] : p.transport.responder_refused)
      out.counter("rdma_prober_responder_refused_total", "Connections the responder could not accept, by reason (accept: errors).",
                  {{"reason", reason}}, n);
    for (const char* reason : {"pending_per_source", "pending_total"}) {
      const auto it = p.transport.responder_evicted.find(reason);
      out.counter("rdma_prober_responder_evicted_total",
                  "Pending connections (not yet handshaken) the responder closed to take in a newer one, by the bound "
                  "reached: pending_per_source (the address's oldest), pending_total (the busiest source prefix's oldest).",
                  {{"reason", reason}}, it == p.transport.responder_evicted.end() ? 0 : it->second);
    }
    out.counter("rdma_prober_responder_dead_peers_total",
                "Served connections that ended in an error, not a close: TCP keepalive or user timeout (the peer vanished "
                "without a FIN) or a reset; their QPs freed.",
                {}, p.transport.responder_dead_peers);
    out.gauge_u64("rdma_prober_handshakes_queued", "Handshakes of this prober waiting for a connector worker.", {},
                  p.transport.connects_queued);
    out.counter("rdma_prober_link_limit_total", "Links not opened because of the max_qps limit.", {}, s.link_limit_hits);
    out.counter("rdma_prober_late_completions_total", "Completions that arrived after their probe was counted lost.", {},
                s.late_completions);
    out.counter("rdma_prober_dns_resolutions_total", "Peer name resolutions, by result.", {{"result", "ok"}}, p.dns_ok);
    out.counter("rdma_prober_dns_resolutions_total", "Peer name resolutions, by result.", {{"result", "error"}}, p.dns_errors);
    for (const auto& [result, n] : p.transport.responder_handshakes)
      out.counter("rdma_prober_responder_handshakes_total", "Handshakes the responder answered, by result (ok or why not).",
                  {{"result", result}}, n);
    out.counter("rdma_prober_loop_wakeups_total", "Wake-ups of the probe loop (epoll returns).", {}, p.transport.wakeups);
    out.counter("rdma_prober_poll_completions_total",
                "Completions found by polling the CQ right after posting (no sleep, no wake-up).", {}, p.transport.polled);
    out.counter("rdma_prober_poll_window_exhausted_total",
                "Post-probe CQ polls that ran out of poll_window; the loop then slept on the completion channel.", {},
                p.transport.poll_misses);
    out.add("rdma_prober_poll_seconds_total", exporter::MetricType::kCounter,
            "Time spent polling the CQ for the completions of the probes just posted (on the CPU, at most poll_window "
            "per wake-up).",
            {}, p.transport.poll_seconds);
    out.add("rdma_prober_post_seconds_total", exporter::MetricType::kCounter,
            "Time spent inside ibv_post_send: a doorbell write on hardware; with Soft-RoCE a system call in which the kernel "
            "does the NIC's work.",
            {}, p.transport.post_seconds);
    for (auto [thread, v] : {std::pair{"loop", p.transport.loop_cpu}, {"connector", p.transport.connector_cpu},
                             {"responder", p.transport.responder_cpu}})
      out.add("rdma_prober_cpu_seconds_total", exporter::MetricType::kCounter, "CPU time used by the prober's threads.",
              {{"thread", thread}}, v);
    out.gauge("rdma_prober_completion_timestamps", "1 when a device gives completion timestamps (NIC RTT reported apart).", {},
              p.transport.timestamps ? 1.0 : 0.0);

    for (const auto& [local, up] : s.local_ports)
      out.gauge("rdma_prober_local_port_up",
                "1 when the local port is ACTIVE and probes from it; 0: its links are parked (no rdma_prober_peer_up).",
                {{"device", local.device}, {"port", std::to_string(local.port)}}, up ? 1 : 0);
    for (const auto& v : s.peers) {
      Labels l{{"device", v.local.device}, {"port", std::to_string(v.local.port)}, {"peer", v.peer}, {"group", v.group}};
      write_stats(s.buckets, v.stats, l, "rdma_prober_", out);
      // A link parked by a local port that is not ACTIVE says nothing about the peer.
      if (v.local_up)
        out.gauge("rdma_prober_peer_up", "1 when the link to the peer is connected and its last probe succeeded.", l, v.up ? 1 : 0);
      if (v.connect_seconds >= 0)
        out.gauge("rdma_prober_connect_duration_seconds", "Duration of the last successful handshake and QP setup.", l,
                  v.connect_seconds);
    }
    for (const auto& g : s.groups) {
      Labels l{{"device", g.local.device}, {"port", std::to_string(g.local.port)}, {"group", g.group}};
      write_stats(s.buckets, g.stats, l, "rdma_prober_group_", out);
      out.gauge_u64("rdma_prober_group_peers", "Peers in the group.", l, g.peers);
      out.gauge_u64("rdma_prober_group_peers_probed", "Peers of the group in the current rotating sample.", l, g.probed);
      out.gauge_u64("rdma_prober_group_peers_up", "Sampled peers of the group whose link is up.", l, g.up);
    }
  }

  // The path tracer's series (docs/metrics.md): its state, what it sent and read, the traces by
  // result, and the suspect links of the last window with the paths seen per link.
  static void write_tracing(const Published& p, bool on, MetricSink& out) {
    const std::string state = !on ? "off" : p.tracing ? p.tracing->state : "available";
    out.gauge("rdma_prober_tracer_state",
              "1 for the path tracer's state: available, off (trace: false), permission or socket (its sockets cannot be "
              "set up on this host).",
              {{"state", state}}, 1);
    if (!p.tracing) return;
    const auto& c = *p.tracing;
    for (const auto& [result, n] : c.results)
      out.counter("rdma_prober_traces_total",
                  "Path traces of the prober's flows by result: complete, partial, or why not (port_in_use, no_answer, "
                  "no_route, permission, socket, stopped).",
                  {{"result", result}}, n);
    out.counter("rdma_prober_trace_packets_total", "TTL-limited trace packets sent.", {}, c.packets);
    out.counter("rdma_prober_trace_answers_total",
                "ICMP answers (time exceeded, unreachable) taken for trace packets: each quotes the packet it answers.", {},
                c.answers);
    for (const auto& [reason, n] : c.ignored)
      out.counter("rdma_prober_trace_answers_ignored_total",
                  "ICMP answers to trace packets not taken, by reason: the quote does not hold the trace packet this "
                  "flow sent (short_quote, not_trace, wrong_qpn, wrong_psn), a repeat (duplicate), after the "
                  "destination (beyond_destination), another ICMP type (other_type) or a local error (local).",
                  {{"reason", reason}}, n);
    out.counter("rdma_prober_trace_queue_full_total", "Trace requests dropped because the queue was full.", {}, c.queue_full);
    out.gauge_u64("rdma_prober_trace_queued", "Trace requests waiting.", {}, c.queued);
    if (p.snap.book) write_suspect_metrics(p.snap.suspects, *p.snap.book, p.snap.window, out);
    write_suspect_evidence(p.snap, out);
  }

  static void write_stats(const std::vector<double>& buckets, const Stats& st, const Labels& l, const std::string& prefix,
                          MetricSink& out) {
    out.add(prefix + "rtt_seconds", exporter::MetricType::kHistogram,
            "Round trip of a signaled RDMA WRITE, from post to completion (software clock).", l, to_histogram(buckets, st.rtt));
    if (st.nic_rtt.count) {
      out.add(prefix + "nic_rtt_seconds", exporter::MetricType::kHistogram,
              "Round trip measured with the NIC clock (completion timestamp minus NIC clock at post).", l,
              to_histogram(buckets, st.nic_rtt));
      out.add(prefix + "host_overhead_seconds_total", exporter::MetricType::kCounter,
              "Sum of software RTT minus NIC RTT: time spent on the host side.", l, st.host_overhead_seconds);
    }
    out.counter(prefix + "probes_sent_total", "Probes posted.", l, st.sent);
    out.counter(prefix + "probes_lost_total", "Probes that did not complete successfully within the timeout.", l, st.lost);
    out.counter(prefix + "connects_total", "Successful handshakes (queue pairs connected).", l, st.connects);
    for (const auto& [reason, n] : st.errors) {
      Labels le = l;
      le.emplace_back("reason", reason);
      out.counter(prefix + "errors_total", "Errors by reason: connect, handshake_*, rejected_*, qp_*, completion_*, stalled, post.",
                  std::move(le), n);
    }
  }

  void resolver_main() {
    const auto local = local_addresses();
    do {
      std::uint64_t ok = 0, errors = 0;
      auto resolver = [&](const std::string& name, std::string& err) {
        auto r = resolve_all(name, err);
        (r.empty() ? errors : ok)++;
        return r;
      };
      PeerSources sources = s_.sources;
      std::optional<PlanStatus> plan;
      if (!s_.topology_file.empty()) plan = plan_peers(sources.statics);
      else if (!s_.topology_leaf_label.empty()) plan = label_plan_peers(sources.statics);
      auto e = expand_peers(sources, s_.transport.listen, local, s_.peers_limit, resolver);
      for (const auto& msg : e.errors) spdlog::debug("prober: cannot resolve {}", msg);
      std::lock_guard lock(mu_);
      probe_.set_known_peers(endpoints_of(e.peers));
      pending_peers_ = std::move(e.peers);
      have_pending_ = true;
      self_excluded_ = e.self_excluded;
      over_limit_ = e.dropped_over_limit;
      plan_ = plan;
      dns_ok_ += ok;
      dns_errors_ += errors;
      transport_->wake();
    } while (!resolver_sleep_.wait_for(s_.dns_refresh));
  }

  void loop_main() {
    std::vector<TransportEvent> events;
    TimePoint last_publish{};
    int timeout_ms = 0;
    transport_->port_events(events, true);  // ports not ACTIVE at start are parked from the first tick
    while (running_) {
      transport_->wait(events.empty() ? timeout_ms : 0, events);
      const auto now = Clock::now();
      bool force = false;
      {
        std::lock_guard lock(mu_);
        if (have_pending_) {
          engine_->set_peers(std::move(pending_peers_), now);
          pending_peers_.clear();
          have_pending_ = false;
          force = true;
        }
      }
      for (const auto& e : events) engine_->handle(e);
      events.clear();
      engine_->tick(now);
      transport_->settle();  // the probes just posted, before the snapshot below can delay them
      if (force || now - last_publish >= std::chrono::seconds(1)) {
        transport_->port_events(events, false);  // handled in the next round (wait() does not sleep then)
        auto p = std::make_shared<Published>();
        p->snap = engine_->snapshot();
        if (p->snap.windows != published_windows_) {  // a window closed: its InfiniBand links for the pma routes
          published_windows_ = p->snap.windows;
          model::ib_probe_links().publish(window_ib_links(p->snap.window, LocalizeSettings{}), 3 * s_.engine.window);
        }
        transport_->sample_loop_cpu();
        p->transport = transport_->counters();
        if (traces_) {
          p->tracing = traces_->counters();
          // Once per change of cause: a host whose trace sockets cannot be set up is state (the
          // gauge), not a log line per trace.
          if (p->tracing->state != trace_state_logged_) {
            if (p->tracing->state != "available")
              spdlog::warn("prober: path traces cannot run here ({}): no suspect links on this node", p->tracing->state);
            trace_state_logged_ = p->tracing->state;
          }
        }
        std::lock_guard lock(mu_);
        p->self_excluded = self_excluded_, p->over_limit = over_limit_, p->dns_ok = dns_ok_, p->dns_errors = dns_errors_;
        p->plan = plan_, p->plan_rotation = s_.plan_rotation;
        published_ = std::move(p);
        last_publish = now;
      }
      const auto next = std::min(engine_->next_deadline(Clock::now()), last_publish + std::chrono::seconds(1));
      const auto wait = next - Clock::now();
      timeout_ms = wait <= Clock::duration::zero()
                       ? 0
                       : static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(wait).count());
    }
  }

  Settings s_;
  std::shared_ptr<verbs::DeviceEvents> device_events_;  // the daemon's device contexts and async events
  ProbeService probe_;
  std::unique_ptr<VerbsTransport> transport_;
  SocketPathTracer tracer_;
  std::unique_ptr<TraceScheduler> traces_;  // with trace: true
  std::string trace_state_logged_ = "available";  // the loop thread's
  std::unique_ptr<Engine> engine_;
  std::atomic<bool> running_{false};
  std::thread loop_, resolver_;
  std::mutex mu_;  // published_, pending peers, resolver counters
  exporter::StopSignal resolver_sleep_;  // the resolver's wait between DNS rounds
  std::shared_ptr<const Published> published_;
  std::uint64_t published_windows_ = 0;  // loop thread: the engine window last published to model::ib_probe_links()
  std::vector<PeerSpec> pending_peers_;
  bool have_pending_ = false;
  std::uint64_t self_excluded_ = 0, over_limit_ = 0, dns_ok_ = 0, dns_errors_ = 0;
  std::optional<PlanStatus> plan_;
  // The node list (resolver thread): the last good membership and when it was read.
  std::atomic<bool> resolver_stopping_{false};
  std::optional<std::vector<std::pair<std::string, std::string>>> label_members_;
  std::optional<Clock::time_point> labels_listed_;
  // For the next scrape (mu_): failures by (reason, cause) with a message and a count, the API's
  // reachability and the last good list's counts.
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::uint64_t>> label_failures_;
  std::optional<bool> kube_reachable_;
  std::string kube_unreachable_why_;
  std::uint64_t label_unlabelled_ = 0, label_pages_ = 0;
  std::set<std::size_t> topology_lines_logged_;  // error lines of the topology file already logged
  std::string plan_state_logged_;

  // This scrape's share of the node list's outcome: failures counted and logged once per cause,
  // the API's reachability as state (a gauge, one log line), the last good list's counts.
  void node_list_state(const exporter::ScrapeContext& ctx, MetricSink& out) {
    std::lock_guard lock(mu_);
    for (const auto& [key, f] : label_failures_)
      for (std::uint64_t i = 0; i < f.second; ++i) ctx.errors.report(key.first, key.second, f.first);
    label_failures_.clear();
    if (kube_reachable_) {
      ctx.errors.capability("kubernetes_api", s_.kube.api, *kube_reachable_,
                            kube_unreachable_why_ + "; the topology plan keeps the last node list read");
      out.gauge("rdma_prober_kubernetes_api_up", "1 when the Kubernetes API answered the last node list, else 0.", {},
                *kube_reachable_ ? 1 : 0);
    }
    out.gauge_u64("rdma_prober_plan_unlabelled_nodes",
                  "Nodes the last node list returned whose leaf label is empty or not a valid label value (left out).", {},
                  label_unlabelled_);
    out.gauge_u64("rdma_prober_plan_list_pages", "Pages (of 500 nodes) the last good node list took.", {}, label_pages_);
  }

  // The node list read again when topology-refresh has passed (or none is held yet: then at each
  // resolution until one is read), and this node's plan for the rotation of the wall clock.
  PlanStatus label_plan_peers(std::vector<PeerSpec>& peers) {
    using Outcome = exporter::kube::Answer::Outcome;
    const auto now = Clock::now();
    if (!labels_listed_ || now - *labels_listed_ >= s_.topology_refresh) {
      auto listed = list_node_leaves(exporter::kube::kube_api(), s_.kube, s_.topology_leaf_label, &resolver_stopping_);
      std::lock_guard lock(mu_);
      switch (listed.outcome) {
        case Outcome::kOk:
          label_members_ = std::move(listed.node_leaf);
          labels_listed_ = now;
          label_unlabelled_ = listed.unlabelled;
          label_pages_ = listed.pages;
          kube_reachable_ = true;
          kube_unreachable_why_.clear();
          break;
        case Outcome::kUnreachable:
          kube_reachable_ = false;
          kube_unreachable_why_ = listed.message;
          break;
        case Outcome::kFailed: {
          auto& f = label_failures_[{listed.reason, listed.cause}];
          f.first = listed.message;
          ++f.second;
          if (listed.reason != "kubernetes_token") kube_reachable_ = true, kube_unreachable_why_.clear();
          break;
        }
        case Outcome::kCancelled:
          break;
      }
    }
    PlanStatus st;
    if (!label_members_) {
      st.state = "api_error";
      return st;
    }
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
    const auto rotation = static_cast<std::uint64_t>(secs.count() / std::max<std::int64_t>(1, s_.plan_rotation.count()));
    st = membership_peers(*label_members_, s_.transport.node_name, rotation, s_.plan_seed, s_.sources.dns_port, peers);
    if (st.state != plan_state_logged_ && st.state != "active")
      spdlog::warn("prober: topology plan {} ({} among the {} nodes labelled {}): peers from the static list and DNS only",
                   st.state, s_.transport.node_name, label_members_->size(), s_.topology_leaf_label);
    plan_state_logged_ = st.state;
    return st;
  }

  // The topology file read now and this node's plan for the rotation of the wall clock (every
  // node agrees on it to within its clock's offset): appended to `peers`.
  PlanStatus plan_peers(std::vector<PeerSpec>& peers) {
    auto file = read_small_file(s_.topology_file, kMaxTopologyFileBytes);
    const std::string& text = file.value;
    PlanStatus st;
    if (!file) {
      st.state = "file_error";
      if (plan_state_logged_ != "unreadable")
        spdlog::warn("prober: topology file {} cannot be read or is over {} bytes: peers from the static list and DNS only",
                     s_.topology_file, kMaxTopologyFileBytes);
      plan_state_logged_ = "unreadable";
      return st;
    }
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
    const auto rotation = static_cast<std::uint64_t>(secs.count() / std::max<std::int64_t>(1, s_.plan_rotation.count()));
    std::vector<slurm::TopologyError> errors;
    st = topology_peers(text, s_.transport.node_name, rotation, s_.plan_seed, s_.sources.dns_port, peers, errors);
    for (const auto& err : errors)
      if (topology_lines_logged_.insert(err.line).second)
        spdlog::warn("prober: topology file {} line {}: {}", s_.topology_file, err.line, err.message);
    if (st.state != plan_state_logged_ && st.state != "active")
      spdlog::warn("prober: topology plan {} ({} in {}): peers from the static list and DNS only", st.state,
                   s_.transport.node_name, s_.topology_file);
    plan_state_logged_ = st.state;
    return st;
  }
};

// kDefaultBuckets as the `buckets` setting's default: "0.000001,0.000002,...,0.1".
std::string default_buckets_text() {
  std::string out;
  for (double b : kDefaultBuckets) {
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, b, std::chars_format::fixed).ptr;
    out += (out.empty() ? "" : ",") + std::string(text, end);
  }
  return out;
}

// "100us", "0.1ms", "50µs", "0": at most 10 ms.
std::chrono::microseconds parse_poll_window(const exporter::CollectorSettings& s) {
  const std::string text = s.string("poll-window");
  std::string unit;
  double v = -1;
  try {
    std::size_t used = 0;
    v = std::stod(text, &used);
    unit = text.substr(used);
  } catch (const std::exception&) {
    v = -1;
  }
  double us = -1;
  if (unit == "us" || unit == "\u00b5s" || (unit.empty() && v == 0)) us = v;
  else if (unit == "ms") us = v * 1000;
  else if (unit == "ns") us = v / 1000;
  if (!(us >= 0 && us <= 10000))
    throw s.error("poll-window", "`" + text + "` is not a duration from 0 to 10ms (e.g. 100us)");
  return std::chrono::microseconds(static_cast<std::int64_t>(us + 0.5));
}

Settings settings_from(const exporter::CollectorSettings& s) {
  Settings out;
  auto& e = out.engine;
  e.interval = s.positive_duration("interval");
  e.jitter = static_cast<double>(s.integer("jitter-percent", 0, 90)) / 100.0;
  e.timeout = s.positive_duration("timeout");
  e.connect_timeout = s.positive_duration("connect-timeout");
  e.backoff_max = s.positive_duration("backoff-max");
  e.backoff_initial = std::min(e.backoff_max, std::chrono::milliseconds(1000));
  e.rotate_interval = s.positive_duration("rotate-interval");
  e.buckets = parse_buckets(s.list("buckets"), s.where("buckets"));
  e.max_peers = static_cast<std::size_t>(s.integer("max-peers", 1, 100000));
  auto sample = s.integer("sample-size");
  e.sample_size = sample <= 0 ? e.max_peers : static_cast<std::size_t>(sample);
  e.max_links = static_cast<std::size_t>(s.integer("max-qps", 1, 65536));
  e.flows = static_cast<std::uint32_t>(s.integer("flows", 1, 16));
  e.flow_rotation = s.duration("flow-rotation");  // 0: never
  e.window = s.positive_duration("window");
  e.pairing_refresh = s.positive_duration("pairing-refresh");
  // Wake-ups on a 50 ms grid at the default 1 s interval (5 % of it, at least 1 ms): 256 peers x 4
  // flows then cost at most 20 wake-ups a second instead of one per probe, each probe at most
  // 5 % of an interval late, inside its +-10 % jitter. A timer wake-up is the loop's main kernel
  // cost on hardware (tens of microseconds of CPU each), a probe's post and poll are not.
  e.wake_grid = std::clamp(std::chrono::duration_cast<std::chrono::microseconds>(e.interval) / 20,
                           std::chrono::microseconds(1000), std::chrono::microseconds(50000));
  out.peers_limit = static_cast<std::size_t>(s.integer("peers-limit", 1, 1000000));
  auto& t = out.transport;
  t.device_regex = s.string("device");
  try {
    std::regex check(t.device_regex);
  } catch (const std::regex_error& err) {
    throw s.error("device", std::string("bad regular expression: ") + err.what());
  }
  t.payload = static_cast<std::size_t>(s.integer("payload-size", 1, 65536));
  t.listen = parse_listen(s.string("listen-address"), s.where("listen-address"));
  t.responder_max_qps = static_cast<std::size_t>(s.integer("responder-max-qps", 1, 65536));
  // The responder's share of the node's worst-case session memory (ProbeLimits, docs/probe.md).
  t.session_max_bytes = ProbeLimits::kResponderSessionBytes;
  t.responder_max_qps_per_source = static_cast<std::size_t>(s.integer("responder-max-qps-per-source", 1, 65536));
  t.responder_max_pending = static_cast<std::size_t>(s.integer("responder-max-pending", 1, 4096));
  t.responder_max_pending_per_source = static_cast<std::size_t>(s.integer("responder-max-pending-per-source", 1, 4096));
  t.responder_pending_timeout = s.positive_duration("responder-pending-timeout");
  t.served_keepalive = s.duration("keepalive-timeout");
  if (t.served_keepalive.count() != 0 && t.served_keepalive < std::chrono::seconds(4))
    throw s.error("keepalive-timeout", "must be 0 (kernel defaults) or at least 4s");
  t.connect_concurrency = static_cast<std::size_t>(s.integer("connect-concurrency", 1, 64));
  e.backoff_jitter = 0.5;  // retries of links that failed together spread over half their backoff
  e.connect_queue_limit = std::max<std::chrono::milliseconds>(std::chrono::seconds(20), 4 * e.connect_timeout);
  t.handshake_timeout = e.connect_timeout;
  t.poll_window = parse_poll_window(s);
  t.traffic_class = {static_cast<std::uint8_t>(s.integer("traffic-class", 0, 255)),
                     static_cast<std::uint8_t>(s.integer("service-level", 0, 15))};
  t.rails = parse_rails(s.yaml("rails"), s.origin("rails"));
  t.cross_rail = s.boolean("cross-rail");
  t.node_name = s.string("node-name");
  if (t.node_name.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    t.node_name = host;
  }
  if (auto path = s.string("secret-file"); !path.empty()) {
    auto secret = read_small_file(path, kMaxSecretBytes);
    if (!secret && secret.sys_errno == EFBIG)
      throw s.error("secret-file", path + " is larger than " + std::to_string(kMaxSecretBytes) + " bytes");
    if (!secret) throw s.error("secret-file", "cannot read " + path);
    t.secret = std::move(secret.value);
    while (!t.secret.empty() && (t.secret.back() == '\n' || t.secret.back() == '\r')) t.secret.pop_back();
    if (t.secret.empty()) throw s.error("secret-file", path + " is empty");
  }
  auto dns_port = s.integer("dns-port", 1, 65535);
  out.sources.statics = parse_peers(s.yaml("peers"), s.origin("peers"), t.listen.port, out.peers_limit);
  out.sources.dns_name = s.string("dns-name");
  out.sources.dns_port = static_cast<std::uint16_t>(dns_port);
  out.sources.dns_group = s.string("dns-group");
  out.topology_file = s.string("topology-file");
  out.topology_leaf_label = s.string("topology-leaf-label");
  if (!out.topology_file.empty() && !out.topology_leaf_label.empty())
    throw s.error("topology-leaf-label", "the plan's membership comes from topology-file or from node labels, not both");
  if (!out.topology_leaf_label.empty()) {
    if (!cgroup::is_label_key(out.topology_leaf_label))
      throw s.error("topology-leaf-label", "`" + out.topology_leaf_label + "` is not a Kubernetes label key "
                                           "(an optional DNS-subdomain prefix and '/', then a name of at most 63 characters)");
    out.kube.api = s.string("kubernetes-api");
    if (out.kube.api.empty()) out.kube.api = exporter::kube::api_from_env();
    if (out.kube.api.empty())
      throw s.error("topology-leaf-label", "needs kubernetes-api or KUBERNETES_SERVICE_HOST in the environment");
    if (out.kube.api.rfind("https://", 0) != 0) throw s.error("kubernetes-api", "must be an https:// URL");
    out.kube.token_file = s.string("kubernetes-token-file");
    out.kube.ca_file = s.string("kubernetes-ca-file");
    try {
      (void)exporter::kube::kube_api();  // a missing module is said at start, not at every list
    } catch (const std::runtime_error& missing) {
      throw s.error("topology-leaf-label", missing.what());
    }
  }
  out.topology_refresh = std::chrono::duration_cast<std::chrono::seconds>(s.positive_duration("topology-refresh"));
  if (out.topology_refresh < std::chrono::seconds(10)) throw s.error("topology-refresh", "must be at least 10s");
  out.plan_rotation = std::chrono::duration_cast<std::chrono::seconds>(s.positive_duration("plan-rotation"));
  if (out.plan_rotation.count() < 1) throw s.error("plan-rotation", "must be at least 1s");
  out.plan_seed = static_cast<std::uint64_t>(s.integer("plan-seed", 0, 1000000000));
  out.dns_refresh = s.positive_duration("dns-refresh");
  out.probe_modules = parse_probe_modules(s.yaml("probe-modules"), s.origin("probe-modules"));
  auto& a = out.probe_access;
  a.allow_unauthenticated = s.boolean("probe-allow-unauthenticated");
  for (const auto& text : s.list("probe-target-cidrs")) {
    auto c = parse_cidr(text);
    if (!c) throw s.error("probe-target-cidrs", "`" + text + "` is not an address or network (e.g. 10.0.0.0/16, fd00::/64)");
    a.target_cidrs.push_back(*c);
  }
  for (const auto& text : s.list("probe-target-ports")) {
    int port = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
    if (ec != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535)
      throw s.error("probe-target-ports", "`" + text + "` is not a TCP port (1..65535)");
    a.target_ports.insert(static_cast<std::uint16_t>(port));
  }
  if (a.target_ports.empty()) a.target_ports = {t.listen.port, out.sources.dns_port};
  std::vector<std::pair<std::string, std::string>> peer_names;
  for (const auto& p : out.sources.statics) peer_names.emplace_back(p.name, p.address);
  a.target_names = peer_target_names(peer_names);
  out.trace = s.boolean("trace");
  out.traces_allow_unauthenticated = s.boolean("traces-allow-unauthenticated");
  out.tracing.rate = static_cast<double>(s.integer("trace-rate", 1, 1000));
  out.tracing.burst = static_cast<double>(s.integer("trace-burst", 1, 64));
  out.tracing.workers = static_cast<unsigned>(s.integer("trace-workers", 1, 16));
  out.tracing.per_port = static_cast<unsigned>(s.integer("trace-per-port", 1, 8));
  out.tracing.start_interval = std::chrono::duration_cast<std::chrono::milliseconds>(s.duration("trace-start-interval"));
  if (out.tracing.start_interval > std::chrono::seconds(60)) throw s.error("trace-start-interval", "at most 60s");
  out.tracing.start_burst = static_cast<double>(s.integer("trace-start-burst", 1, 64));
  e.trace.max_hops = static_cast<unsigned>(s.integer("trace-max-hops", 1, static_cast<std::int64_t>(TraceBook::kMaxHops)));
  e.trace.hop_timeout = s.positive_duration("trace-timeout");
  if (e.trace.hop_timeout > std::chrono::seconds(5)) throw s.error("trace-timeout", "at most 5s (one hop's wait)");
  if (!out.probe_modules.empty() && t.secret.empty())
    throw s.error("probe-modules", "needs a shared secret (collectors.prober.secret_file, --collector.prober.secret-file): "
                                   "responders refuse probe sessions without one");
  return out;
}

}  // namespace

RDMA_REGISTER_COLLECTOR({
    .name = "prober",
    .help = "active RDMA WRITE latency probes between exporters, as histograms (docs/prober.md)",
    .enabled_by_default = false,
    .settings =
        {
            {"listen-address", exporter::OptionType::kString, ":9662", "TCP [host]:port of the responder's handshake."},
            {"secret-file", exporter::OptionType::kString, "", "File with a shared secret; handshakes are HMAC-SHA256 signed with it.",
             true},
            {"peers", exporter::OptionType::kYaml, "",
             "YAML list of peers: address (required), name, tcp_port, group, local_device, local_port, gid_index."},
            {"dns-name", exporter::OptionType::kString, "", "DNS name whose addresses are peers (a headless Service); re-resolved."},
            {"dns-port", exporter::OptionType::kInt, "9662", "Handshake TCP port of the peers found through dns-name."},
            {"dns-refresh", exporter::OptionType::kDuration, "30s", "How often peer names are resolved again."},
            {"dns-group", exporter::OptionType::kString, "", "Group label of the peers found through dns-name."},
            {"topology-file", exporter::OptionType::kString, "",
             "Slurm topology.conf: peers from the topology plan (own leaf, one prober per leaf pair), resolved as names "
             "on dns-port; \"\" = off."},
            {"topology-leaf-label", exporter::OptionType::kString, "",
             "Kubernetes node label whose value is a node's leaf (ToR), e.g. network.topology.nvidia.com/leaf (NVIDIA "
             "Topograph): peers from the topology plan over the nodes that carry it, listed through the API (RBAC: "
             "list nodes); names resolved on dns-port; \"\" = off. Not with topology-file."},
            {"topology-refresh", exporter::OptionType::kDuration, "10m",
             "How often the node list of topology-leaf-label is read again (at least 10s; each read lists the whole "
             "labelled fleet)."},
            {"kubernetes-api", exporter::OptionType::kString, "",
             "The API server's https:// URL for topology-leaf-label; empty: "
             "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT."},
            {"kubernetes-token-file", exporter::OptionType::kString, exporter::kube::kTokenFile,
             "The service account token sent as the bearer token (read again before each list)."},
            {"kubernetes-ca-file", exporter::OptionType::kString, exporter::kube::kCaFile,
             "The CA the API server's certificate must chain to."},
            {"plan-rotation", exporter::OptionType::kDuration, "5m", "How often the topology plan re-draws its probers and targets."},
            {"plan-seed", exporter::OptionType::kInt, "0", "Seed of the topology plan's hashes (the same on every node)."},
            {"device", exporter::OptionType::kString, "", "Regular expression of local RDMA devices to probe from (default all)."},
            {"interval", exporter::OptionType::kDuration, "1s", "Probe interval per link."},
            {"jitter-percent", exporter::OptionType::kInt, "10", "Uniform jitter of the interval, in percent (+-)."},
            {"timeout", exporter::OptionType::kDuration, "1s", "A probe not completed within this is lost."},
            {"connect-timeout", exporter::OptionType::kDuration, "5s", "Limit for a handshake and QP setup."},
            {"backoff-max", exporter::OptionType::kDuration, "30s", "Longest wait between reconnect attempts (doubling from 1s)."},
            {"payload-size", exporter::OptionType::kInt, "64", "Bytes written by each probe."},
            {"poll-window", exporter::OptionType::kString, "50us",
             "After posting a wake-up's probes, poll the CQ this long (e.g. 100us, 0 = never) before sleeping on the "
             "completion channel; costs at most this much CPU per wake-up."},
            {"traffic-class", exporter::OptionType::kInt, "0",
             "Traffic class of probes and answers: the IP TOS byte on RoCE v2 (DSCP * 4 + ECN; NCCL_IB_TC=106 is DSCP 26, "
             "ECN capable), the GRH traffic class on InfiniBand."},
            {"service-level", exporter::OptionType::kInt, "0", "InfiniBand service level (0..15) of probes and answers."},
            {"buckets", exporter::OptionType::kStringList, default_buckets_text(), "RTT histogram bounds in seconds."},
            {"max-peers", exporter::OptionType::kInt, "64", "Per-peer series up to this many peers; beyond, per group over a sample."},
            {"sample-size", exporter::OptionType::kInt, "0", "Peers probed at a time beyond max-peers (0 = max-peers)."},
            {"rotate-interval", exporter::OptionType::kDuration, "1m", "How long a sample is probed before the next one."},
            {"max-qps", exporter::OptionType::kInt, "1024", "Most queue pairs this prober opens."},
            {"flows", exporter::OptionType::kInt, "1",
             "RC queue pairs per link (1..16), each its own UDP source port: ECMP paths probed per peer and local port."},
            {"flow-rotation", exporter::OptionType::kDuration, "1m",
             "With flows > 1: every this long, one flow of each link is re-created (a new QP, a new 5-tuple); 0 = never."},
            {"window", exporter::OptionType::kDuration, "30s", "Window of the per-flow loss counts that fault localization judges."},
            {"rails", exporter::OptionType::kYaml, "",
             "YAML list of rail rules: rail (label; $1.. from the regex groups), device and/or netdev (regexes). A local port "
             "pairs with the peer's port of the same rail; without labels, of the same IP subnet or InfiniBand subnet prefix."},
            {"cross-rail", exporter::OptionType::kBool, "false", "Pair every local port with every peer port of its link layer."},
            {"pairing-refresh", exporter::OptionType::kDuration, "1m", "How often a peer's port table is read again."},
            {"responder-max-qps", exporter::OptionType::kInt, "1024", "Most queue pairs the responder accepts (then: busy)."},
            {"responder-max-qps-per-source", exporter::OptionType::kInt, "256",
             "Most queue pairs the responder holds for one source address (then: busy), with or without a secret."},
            {"responder-max-pending", exporter::OptionType::kInt, "128",
             "Most connections to the responder not yet handshaken; beyond, a newcomer replaces the oldest of the busiest "
             "source prefix (IPv4 /24, IPv6 /64)."},
            {"responder-max-pending-per-source", exporter::OptionType::kInt, "8",
             "Most connections not yet handshaken from one source address; beyond, a newcomer replaces the address's oldest."},
            {"responder-pending-timeout", exporter::OptionType::kDuration, "1s",
             "A connection to the responder not handshaken within this is closed (at most connect-timeout)."},
            {"keepalive-timeout", exporter::OptionType::kDuration, "1m",
             "A handshake connection whose peer vanished without a FIN is closed (its QPs freed) within about this long "
             "(TCP keepalive and TCP_USER_TIMEOUT; 0 = kernel defaults, hours)."},
            {"connect-concurrency", exporter::OptionType::kInt, "8",
             "Handshakes this prober runs at once (peers in turn, one at a time per peer)."},
            {"peers-limit", exporter::OptionType::kInt, "4096", "Most peers taken from the static list and DNS."},
            {"node-name", exporter::OptionType::kString, "", "Name sent in handshakes (default: host name)."},
            {"trace", exporter::OptionType::kBool, "true",
             "Trace each RoCE v2 flow's path (TTL-limited UDP packets from the flow's 5-tuple, ICMP answers from the socket's "
             "error queue) when it is created and when it turns lossy; names suspect links (docs/prober.md, Path tracing)."},
            {"trace-rate", exporter::OptionType::kInt, "10", "Trace packets per second per local port (1..1000)."},
            {"trace-burst", exporter::OptionType::kInt, "10", "Trace packets a local port may send at once (1..64)."},
            {"trace-workers", exporter::OptionType::kInt, "8",
             "Traces in flight at once (1..16), across local ports: each port's traces are limited by trace-per-port."},
            {"trace-per-port", exporter::OptionType::kInt, "1",
             "Traces in flight at once on one local port (1..8). A port's traces ask the same routers to answer the same "
             "address; Linux-based switches answer one ICMP error per second per destination (burst 6) and drop the rest."},
            {"trace-start-interval", exporter::OptionType::kDuration, "1s",
             "One trace start per local port per interval (at most 60s; 0: unpaced), trace-start-burst at once: each trace "
             "costs every router on its path one answer to the port's address (docs/prober.md, Rate)."},
            {"trace-start-burst", exporter::OptionType::kInt, "6", "Trace starts a local port may make at once (1..64)."},
            {"trace-max-hops", exporter::OptionType::kInt, "8", "Most TTLs one trace sends (1..16)."},
            {"trace-timeout", exporter::OptionType::kDuration, "250ms", "How long a trace waits for one hop's answer (at most 5s)."},
            {"probe-modules", exporter::OptionType::kYaml, "",
             "YAML map of on-demand probe modules for /probe (docs/probe.md): name -> kind (write_bw or write_lat), size, "
             "qps, iterations or duration, tx_depth, timeout. None: /probe is off."},
            {"traces-allow-unauthenticated", exporter::OptionType::kBool, "false",
             "Answer /prober/traces (hop addresses: the fabric's routers) to callers without basic auth or a verified "
             "client certificate. Default: they get 403."},
            {"probe-allow-unauthenticated", exporter::OptionType::kBool, "false",
             "Let /probe callers without basic auth or a verified client certificate run probes (to allowed targets "
             "only; their failure reasons collapse to target_unreachable). Default: they get 403."},
            {"probe-target-cidrs", exporter::OptionType::kStringList, "",
             "Networks /probe may target beyond the prober's peers (static and DNS), e.g. 10.0.0.0/16; only at "
             "probe-target-ports."},
            {"probe-target-ports", exporter::OptionType::kStringList, "",
             "Responder TCP ports a probe-target-cidrs target may use (default: listen-address's and dns-port)."},
        },
    .create = [](const exporter::CollectorSettings& s, const exporter::GlobalContext& g) -> std::unique_ptr<exporter::Collector> {
      try {
        tls::openssl();  // handshakes need it on the prober's threads: fail at start, not there
      } catch (const std::runtime_error& e) {
        throw ConfigError(std::string("collectors.prober: ") + e.what());
      }
      return std::make_unique<ProberCollector>(settings_from(s), g.sysfs_root, g.device_events);
    },
});

}  // namespace rdma::collectors::prober
