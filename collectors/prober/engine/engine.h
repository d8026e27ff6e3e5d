// The prober's brain, with no verbs and no sockets: which peers to probe from which local port
// to which of their ports, when, the per-link state machine (connect, probe, lose, fail, back off, reconnect) and the
// statistics. It drives a Transport; the real one is verbs + TCP (verbs_transport.h), the unit
// tests use a fake. Not thread-safe: one loop thread owns it; it publishes Snapshots.
//
// Link states:  kIdle --connect--> kConnecting --connected--> kUp --error/stall--> kBackoff
//                                      |  (failed/timeout)                            |
//                                      +---------------> kBackoff --retry_at--> kConnecting
// A probe that does not complete successfully within `timeout` (no completion, or an error
// completion) is lost. An error completion, a failed post or too many probes in flight tear the
// link down; it reconnects with exponential backoff. Peers that leave are dropped (their series
// go away); a peer that returns starts afresh. A local port that leaves ACTIVE parks its links
// (kIdle, QP closed, probes in flight dropped uncounted) until it is ACTIVE again.
//
// Pairing: before a peer has links, the transport reads its port table and pairs this host's
// ports with the peer's rail by rail (pairing.h); the links of a peer are its pairs x flows. The
// pairs are asked again every pairing_refresh; a peer that does not answer keeps the pairs it had
// (its links then fail: a stopped peer looks lossy), one never paired has no links and counts as
// unpaired, asked again with backoff.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "collectors/prober/wire/handshake.h"
#include "collectors/prober/wire/path_tracer.h"
#include "collectors/prober/engine/localize.h"
#include "collectors/prober/engine/trace_book.h"
#include "collectors/prober/engine/trace_scheduler.h"

namespace rdma::collectors::prober {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Seconds = std::chrono::duration<double>;

struct LocalPort {
  std::string device;
  std::uint32_t port = 1;
  bool operator<(const LocalPort& o) const { return device != o.device ? device < o.device : port < o.port; }
  bool operator==(const LocalPort&) const = default;
};

struct PeerSpec {
  std::string name;        // series label; defaults to address
  std::string address;     // numeric IP of the peer's responder
  std::uint16_t tcp_port = 0;
  std::string group;       // aggregation label beyond max_peers
  std::string source;      // "static" or "dns"
  std::string local_device;  // empty: every local port
  std::uint32_t local_port = 0;  // 0: every port of the device
  int gid_index = -1;      // -1: automatic (RoCE v2, same address family)
  bool operator==(const PeerSpec&) const = default;
};

// A local port paired with one of a peer's ports (pairing.h, from the peer's port table).
struct PeerPort {
  LocalPort local;
  std::string device;      // the peer's device; empty: the responder chooses (it sent no port table)
  std::uint32_t port = 0;  // the peer's port number (0 with an empty device)
  std::string rail;        // the pair's rail label, "" when unknown
  Gid source{}, dest{};    // the pair's GIDs; zero: the transport chooses
  // InfiniBand: the LIDs of the local port and of the peer's port (its port table), for the pma
  // collector's routes (sources/model/probe_links.h); 0 on RoCE or when unknown.
  std::uint16_t source_lid = 0, dest_lid = 0;
  bool operator==(const PeerPort&) const = default;
};

// What the engine asks of the fabric. connect() and pair() are asynchronous: their results come
// back from the loop as TransportEvents.
struct ConnectRequest {
  std::uint64_t link = 0;
  PeerSpec peer;
  LocalPort local;
  unsigned flow = 0;  // which of the link's flows (its own QP, so its own UDP source port)
  PeerPort target;    // the pair this link probes (target.local == local)
  // The GRH flow label to set (RoCE v2: the UDP source port is derived from it, trace_packet.h);
  // 0: the kernel derives one from the QP numbers.
  std::uint32_t flow_label = 0;
};

struct TransportEvent {
  // kPortState: `local` became ACTIVE (ok) or left ACTIVE (!ok); `link` is unused.
  // kPaired: the answer to pair() number `link`: `pairs` (ok), or why not (`reason`).
  // kConnectStarted: the handshake of connect() for `link` began at `at` (it may have waited for
  // a free connector worker); the connect time and timeout count from there.
  enum class Kind : std::uint8_t { kConnected, kConnectFailed, kCompletion, kPortState, kPaired, kConnectStarted };
  Kind kind = Kind::kCompletion;
  std::uint64_t link = 0;
  std::uint64_t probe = 0;     // kCompletion
  bool ok = false;             // kCompletion: IBV_WC_SUCCESS
  std::string reason;          // failure label: "connect", "handshake", "rejected_busy", "retry_exceeded", ...
  TimePoint at{};              // when the transport saw it (completion: right after the poll)
  std::optional<double> nic_seconds;  // kCompletion: NIC-clock round trip when timestamps exist
  bool self = false;           // kConnectFailed: the responder is this process
  LocalPort local;             // kPortState
  std::vector<PeerPort> pairs; // kPaired
  std::optional<TraceTarget> trace;  // kConnected, RoCE v2: what the path tracer needs of the flow
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual void connect(const ConnectRequest& r) = 0;
  // Reads the peer's port table and pairs this host's ports with it; answers with a kPaired
  // event for `request`. A responder that sends no table is paired from every local port.
  virtual void pair(std::uint64_t request, const PeerSpec& peer) = 0;
  // Posts one signaled RDMA WRITE; returns the post time, or nullopt (reason set) on failure.
  virtual std::optional<TimePoint> post_probe(std::uint64_t link, std::uint64_t probe, std::string& reason) = 0;
  // Tears the link's queue pair down (and any connect in progress). Later events for it are ignored.
  virtual void close(std::uint64_t link) = 0;
  // True when the transport sends kConnectStarted for every connect() it begins: the engine then
  // times a connect from its start, and one still queued after connect_queue_limit is given up
  // without counting against the link (it never got a fair attempt).
  virtual bool reports_connect_start() const { return false; }
};

struct EngineConfig {
  std::chrono::milliseconds interval{1000};
  double jitter = 0.1;  // fraction of interval, uniform +-
  std::chrono::milliseconds timeout{1000};
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds backoff_initial{1000};
  std::chrono::milliseconds backoff_max{30000};
  // Each reconnect (and pairing retry) waits its backoff times a uniform factor in
  // [1 - backoff_jitter, 1]: links that failed together (one dead peer's) do not retry in step.
  double backoff_jitter = 0;
  // With a transport that reports connect starts: how long a connect may wait for a worker.
  std::chrono::milliseconds connect_queue_limit{20000};
  std::chrono::milliseconds rotate_interval{60000};
  std::vector<double> buckets;  // ascending, seconds
  std::size_t max_peers = 64;   // per-peer series up to this many peers, else groups
  std::size_t sample_size = 64; // peers probed at a time beyond max_peers
  std::size_t max_links = 1024; // queue pairs this prober opens at most
  std::uint32_t max_in_flight = 4;  // probes posted but not completed on one QP before teardown
  // ECMP coverage: RC QPs per link (peer x local port), each probed at `interval`; every
  // flow_rotation one flow of each link is re-created (a new QP: a new UDP source port), so the
  // 5-tuples probed change over time. 0: never.
  std::uint32_t flows = 1;
  std::chrono::milliseconds flow_rotation{0};
  std::chrono::milliseconds window{30000};  // per-flow sent/lost windows for localize()
  // Wake-ups fall on a grid of this step on the steady clock: the probes due within one step are
  // posted in one wake-up (the CQ is polled right after each post, so a probe's RTT does not
  // include the posts after it), at most one step late. 0: wake at each due time.
  std::chrono::microseconds wake_grid{0};
  // How often a paired peer's port table is read again (a NIC added, a rail relabelled).
  std::chrono::milliseconds pairing_refresh{60000};
  std::uint64_t seed = 0;       // 0: random
  TraceOptions trace;           // hops and hop timeout of the path traces (with set_tracer)
};

struct Histogram {
  std::vector<std::uint64_t> counts;  // per bucket, not cumulative; last = above the top bound
  std::uint64_t count = 0;
  double sum = 0;
  void observe(const std::vector<double>& bounds, double v);
};

// Statistics of one series set: one peer (per-peer mode) or one group (aggregated mode).
struct Stats {
  Histogram rtt;
  Histogram nic_rtt;              // only with completion timestamps
  double host_overhead_seconds = 0;  // sum of (software RTT - NIC RTT)
  std::uint64_t sent = 0;
  std::uint64_t lost = 0;
  std::uint64_t connects = 0;
  std::map<std::string, std::uint64_t> errors;
};

struct PeerView {  // per-peer mode
  LocalPort local;
  std::string peer, group;
  bool up = false;       // some flow is connected and its last probe succeeded
  bool local_up = true;  // the local port is ACTIVE (else the link is parked, not probed)
  double connect_seconds = -1;  // last handshake duration, <0 = never connected
  Stats stats;
};
struct GroupView {  // aggregated mode
  LocalPort local;
  std::string group;
  std::uint64_t peers = 0, probed = 0, up = 0;
  Stats stats;
};

// One link's pair (per-peer mode), for rdma_prober_link_info.
struct LinkInfo {
  std::string peer;
  PeerPort pair;
};

// One flow's path traces (per-peer mode and aggregated alike), for /prober/traces.
struct FlowTrace {
  FlowOutcome flow;  // its ids (sent and lost are the current window's so far: not used)
  std::uint32_t flow_label = 0;
  std::uint16_t sport = 0;
  std::uint32_t dest_qpn = 0;
  std::vector<std::string> path, fresh;  // source address first; empty: none
  std::string result;                    // the last trace's: complete, partial or why not; "" none yet
  double traced_unix = 0;                // when the last trace ended (Unix seconds), 0: never
  // How the window the snapshot's suspects come from judged the flow: lossy, clean, unjudged
  // (too few probes: neither), or "" (not in that window: created since).
  std::string state;
};

// A suspect link of the last window with the evidence behind it (docs/prober.md, "Path tracing").
struct SuspectEvidence {
  model::SuspectLink link;  // with the ids (flow_id()) of the lossy flows it explains
  double named_unix = 0;    // when it was first named, in an unbroken run of judgements
};

struct Snapshot {
  bool aggregated = false;
  std::vector<std::pair<LocalPort, bool>> local_ports;  // every local port, ACTIVE or not
  std::vector<FlowOutcome> window;  // the last complete window, one entry per flow (empty before the first)
  std::uint64_t windows = 0;        // complete windows so far
  std::vector<double> buckets;
  std::vector<PeerView> peers;
  std::vector<GroupView> groups;
  std::vector<LinkInfo> link_info;               // per-peer mode: each pair probed, once
  // Per-peer mode: each peer probed, and whether it has pairs (its table read, a rail in common).
  std::vector<std::pair<std::string, bool>> paired;
  std::uint64_t peers_unpaired = 0;              // peers probed now without pairs
  std::map<std::string, std::uint64_t> pairing_failures;  // by reason
  // Path tracing (with a tracer): every flow's traces, the last window's suspects on the rails
  // whose verdicts include path, and the book (paths seen per link).
  // One window's answer, computed together in the engine's loop: the verdicts of `window`, the
  // state of each flow in `traces` (FlowTrace::state) and the suspects named from them. A reader
  // of one snapshot never mixes windows.
  std::vector<FlowTrace> traces;
  std::vector<Finding> findings;  // localize(window)
  std::vector<model::SuspectLink> suspects;
  std::vector<SuspectEvidence> evidence;  // suspects[i]'s evidence, same order
  // Rails whose 5-tuples traced to different paths on repeated traces (per-packet spraying,
  // adaptive routing, or a route change) within the hold time: their suspects are withheld,
  // since one trace describes none of a sprayed flow's paths.
  std::set<std::string> spraying;
  std::map<std::string, std::uint64_t> withheld;  // suspects not named, by rail, because it sprays
  std::uint64_t spray_evidence = 0;  // repeated traces of one 5-tuple that disagreed, since start
  std::shared_ptr<const TraceBook> book;
  std::uint64_t peers_known = 0, links = 0, links_up = 0, late_completions = 0, self_excluded = 0,
                link_limit_hits = 0;
};

class Engine {
 public:
  Engine(EngineConfig cfg, Transport& transport, std::vector<LocalPort> locals);

  // Replaces the peer set (static + DNS). Links of peers that left are closed.
  void set_peers(std::vector<PeerSpec> peers, TimePoint now);
  void handle(const TransportEvent& e);
  // Connects, posts due probes, expires lost probes, rotates the sample.
  void tick(TimePoint now);
  // When tick() has something to do next (epoll timeout): `now` when something is due, else the
  // next due time rounded up to wake_grid.
  TimePoint next_deadline(TimePoint now) const;
  Snapshot snapshot() const;
  // Traces every flow when it is created and again when a window judges it lossy (with priority);
  // results go to the trace book. Null (the default): no tracing. Must outlive the engine's use.
  void set_tracer(TraceScheduler* t) { tracer_ = t; }

  enum class State : std::uint8_t { kIdle, kConnecting, kUp, kBackoff, kSelf };
  bool local_up(const LocalPort& l) const { return !down_.count(l); }
  // For tests: the state of the link between `peer` (name) and `local` (flow 0; its first pair).
  std::optional<State> state(const std::string& peer, const LocalPort& local, unsigned flow = 0) const;

 private:
  struct Probe {
    std::uint64_t id;
    TimePoint posted;
    TimePoint deadline;
    bool expired = false;  // counted lost; still in flight on the QP
  };
  struct Link {
    std::uint64_t id;
    PeerSpec peer;
    LocalPort local;
    PeerPort target;
    unsigned flow = 0;
    // Flow label: chosen from the link's key, its flow index and how often this flow was
    // re-created by rotation (choose_flow_label); reconnects after a failure keep it, so a lossy
    // flow keeps its 5-tuple (and its path) while it is traced again.
    std::uint64_t rotations = 0;
    std::uint32_t flow_label = 0;
    State state = State::kIdle;
    TimePoint connect_started{}, retry_at{}, next_probe{};
    bool attempt_started = false;  // kConnecting: the transport began the handshake (connect_started is its start)
    std::chrono::milliseconds backoff{0};
    std::vector<Probe> in_flight;
    bool last_ok = true;  // the last finished probe succeeded
    double connect_seconds = -1;
    std::string stats_key;
    Stats* stats = nullptr;  // stats_[stats_key]: map nodes are stable, and a link's key is never erased
    // The current window (localize()). A probe due while the flow is failing (backoff, or
    // reconnecting after a failure) counts as sent and lost there: a dead peer looks lossy, not idle.
    std::uint64_t window_sent = 0, window_lost = 0;
    bool failing = false;       // torn down or failed to connect since it was last up
    TimePoint missed_next{};    // failing: when the next probe would have been due
    std::uint64_t queued = 0;   // the seq of its live entry in due_, 0: none (parked, kSelf)
    TimePoint queued_at{};      // that entry's time
    // Path tracing: what the transport said of the flow at connect, the label last traced (a
    // reconnect that keeps the label keeps the trace), whether the last window judged it lossy.
    std::optional<TraceTarget> trace_target;
    std::uint32_t traced_label = 0;
    bool lossy = false;
    std::string trace_result;
    double traced_unix = 0;
    // Turned lossy and its fresh trace not back yet: it names nothing until then (the fresh
    // trace is the second look at its 5-tuple that tells a sprayed rail, and may narrow it).
    bool fresh_pending = false;
  };
  // One entry of the due-time heap. A link has at most one live entry (seq == Link::queued);
  // entries of links since requeued or closed are stale and dropped when they reach the top.
  struct Due {
    TimePoint at;
    std::uint64_t link, seq;
    bool operator>(const Due& o) const { return at != o.at ? at > o.at : link > o.link; }
  };
  // peer name, local port, the peer's device and port, flow
  using LinkKey = std::tuple<std::string, LocalPort, std::string, std::uint32_t, unsigned>;
  // What is known of a peer's ports, by peer name.
  struct PeerPairing {
    std::string address;       // the peer's responder the pairs came from
    std::uint16_t tcp_port = 0;
    std::optional<std::vector<PeerPort>> pairs;  // nullopt: never paired
    std::uint64_t asked = 0;   // the pair() request in flight, 0: none
    TimePoint ask_at{};        // when to ask (again)
    std::chrono::milliseconds backoff{0};
  };
  std::string stats_key(const PeerSpec& p, const LocalPort& l) const;
  bool aggregated() const { return peers_.size() > cfg_.max_peers; }
  bool wanted(const PeerSpec& p, const LocalPort& l) const;
  void rebuild_links();
  // The wait after `last` (0: the first failure): backoff_initial, doubling up to backoff_max; for
  // reconnects and for port table requests alike.
  std::chrono::milliseconds next_backoff(std::chrono::milliseconds last) const;
  // fair = false: the link never got a real attempt (its connect waited for a worker too long):
  // an error is counted, but no probe is lost and the window does not read it as failing.
  void teardown(Link& l, TimePoint now, const std::string& reason, bool fair = true);
  TimePoint connect_deadline(const Link& l) const;
  std::chrono::milliseconds jittered_backoff(std::chrono::milliseconds b);
  void set_local_state(const LocalPort& local, bool up);
  void park(Link& l);
  void close_window(TimePoint now);
  FlowOutcome outcome_of(const Link& l) const;  // the flow's ids (sent, lost: zero)
  bool request_trace(Link& l, bool fresh);  // false: no tracer, no target, or the queue is full
  void forget_traces(const Link& l);
  void take_traces(TimePoint now);
  void traces_of(Snapshot& s) const;  // snapshot()'s tracing part
  // The last window's answer (findings, suspects and their evidence), recomputed in tick() when a
  // window closed or the trace book changed: what snapshot() publishes together.
  void judge_window(TimePoint now);
  // A repeated trace of one 5-tuple (a lossy flow's fresh one) that answered a different hop
  // where both answered: the rail's paths are not one per 5-tuple.
  void note_spraying(const Link& l, const std::vector<std::string>& before, const std::vector<std::string>& after,
                     TimePoint now);
  bool spraying(const std::string& rail, TimePoint now) const;
  void rotate_flows(TimePoint now);
  std::uint32_t link_flow_label(const Link& l) const;
  void handle_link(Link& l, const TransportEvent& e);
  void handle_paired(const TransportEvent& e);
  void ask_pairings(TimePoint now);
  std::vector<const PeerSpec*> probed_peers() const;  // all of them, or the rotating sample
  TimePoint jittered(TimePoint from);
  void tick_link(Link& l, TimePoint now);
  TimePoint link_next(const Link& l, TimePoint now) const;  // when tick() has something to do for l
  void requeue(Link& l);  // l's due time may have changed: give it a new heap entry if it did
  void drop_stale();      // pops stale entries off the top, so that next_deadline() reads a live one
  TimePoint global_next(TimePoint now) const;  // window end, flow rotation, sample rotation
  Stats& stats_of(const Link& l) { return *l.stats; }  // no string-keyed lookup per link per tick

  EngineConfig cfg_;
  Transport& transport_;
  std::vector<LocalPort> locals_;
  // Local ports not ACTIVE: their links are parked (no QP, not probed, nothing counted) until the
  // port is ACTIVE again, so a pulled cable never reads as every peer lost.
  std::set<LocalPort> down_;
  std::vector<PeerSpec> peers_;
  std::map<std::string, PeerPairing> pairing_;
  std::map<std::uint64_t, std::string> pair_requests_;  // request -> peer name
  std::uint64_t next_pair_request_ = 1;
  TimePoint next_ask_ = TimePoint::min();  // the earliest ask_at of the probed peers not asked
  std::map<std::string, std::uint64_t> pairing_failures_;
  bool relink_ = false;  // pairs changed since the last tick(): rebuild the links there
  std::size_t rotation_ = 0;          // first peer of the current sample
  TimePoint rotated_at_{};
  TimePoint window_start_{}, flows_rotated_at_{};
  bool started_ = false;              // window_start_ and flows_rotated_at_ are set
  std::uint64_t flow_turn_ = 0;       // which flow index the next rotation re-creates
  std::vector<FlowOutcome> last_window_;
  std::uint64_t windows_ = 0;
  std::map<std::uint64_t, Link> links_;
  std::map<std::string, Stats> stats_;
  std::uint64_t next_link_ = 1, next_probe_ = 1;
  std::uint64_t late_ = 0, link_limit_hits_ = 0;
  // When each link has something to do next, earliest first: a wake-up pops the links due and
  // requeues them, O(log n) each, instead of scanning all links. Whatever may change a link's
  // due time (connects, teardowns, parking, completions) requeues it at once; a link whose due
  // time did not move keeps its entry.
  std::vector<Due> due_;  // std::push_heap/pop_heap with std::greater: a min-heap
  std::uint64_t due_seq_ = 0;
  std::vector<std::uint64_t> batch_;  // tick()'s scratch, kept to reuse its capacity
  std::mt19937_64 rng_;
  // Mixed into every link's flow label start (the seed, else random): a restarted prober probes
  // other source ports of the same slots, as a new QP used to.
  std::uint64_t flow_salt_ = 0;
  TraceScheduler* tracer_ = nullptr;
  TraceBook book_;
  // judge_window()'s answer and what it was computed from.
  struct Judged {
    std::uint64_t windows = ~0ull, book_version = ~0ull;
    std::vector<Finding> findings;
    std::vector<SuspectEvidence> evidence;
    std::map<std::string, std::string> states;  // flow id -> lossy, clean, unjudged
    std::set<std::string> spraying;
    std::map<std::string, std::uint64_t> withheld;
  } judged_;
  // A rail reads as spraying for this many windows after its last evidence (10 minutes at the
  // default 30 s window): adaptive routing is configuration that lasts, and a 5-tuple is traced
  // again only when it turns lossy, so the evidence must outlive the traces that found it.
  static constexpr int kSprayHoldWindows = 20;
  std::map<std::string, TimePoint> spray_seen_;  // rail -> the last evidence of spraying
  std::uint64_t spray_evidence_ = 0;             // repeated traces that disagreed, since start
  std::uint64_t book_version_ = 0;
  mutable std::uint64_t book_copied_ = ~0ull;
  mutable std::shared_ptr<const TraceBook> book_copy_;  // snapshot(): copied when book_ changed
};

// Default RTT histogram bounds in seconds, 1, 2, 5 steps from 1 µs to 100 ms: the default of the
// prober's `buckets` setting, and of an EngineConfig without buckets.
inline constexpr std::array<double, 16> kDefaultBuckets{1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4,
                                                        5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1};

}  // namespace rdma::collectors::prober
