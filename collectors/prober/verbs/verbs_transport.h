// The real Transport: libibverbs queue pairs, connected over the TCP handshake of handshake.h.
//   - the loop thread calls wait() (epoll over the devices' completion channels and an eventfd:
//     no busy polling), post_probe() and close();
//   - connector workers (connect_concurrency threads) run the prober side of handshakes
//     (blocking, with timeouts) as HandshakeQueue (connect_queue.h) schedules them: in
//     parallel, peers in turn, one at a time per peer, so that a slow or dead peer never delays
//     the handshakes or probes of others;
//   - the Responder (responder.h) accepts handshakes on its own thread.
// Devices and QP setup are verbs_util.h; sockets and frames handshake_io.h.
// Completion timestamps (ibv_create_cq_ex + IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) are used where
// the device has them: the NIC round trip is the completion timestamp minus the NIC clock read
// (ibv_query_rt_values_ex) just before the post.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collectors/prober/engine/config.h"
#include "collectors/prober/engine/connect_queue.h"
#include "collectors/prober/engine/engine.h"
#include "collectors/prober/verbs/responder.h"
#include "collectors/prober/verbs/transport_options.h"
#include "collectors/prober/verbs/verbs_util.h"
#include "sources/verbs/device_events.h"

namespace rdma::collectors::prober {

struct TransportCounters {
  std::map<std::string, std::uint64_t> responder_handshakes;  // by result: ok, ok_session, bad_mac, busy, ...
  std::map<std::string, std::uint64_t> responder_refused;     // connections not accepted, by reason
  std::map<std::string, std::uint64_t> responder_evicted;     // pending connections closed for newcomers, by reason
  std::uint64_t responder_pending = 0, responder_dead_peers = 0;
  bool responder_up = false;
  std::uint64_t connects_queued = 0, connects_running = 0;
  std::uint64_t responder_qps = 0, prober_qps = 0;
  double loop_cpu = 0, connector_cpu = 0, responder_cpu = 0;  // seconds
  std::uint64_t wakeups = 0;      // epoll_wait returns
  std::uint64_t polled = 0;       // completions found by the post-probe CQ poll (no sleep)
  std::uint64_t poll_misses = 0;  // post-probe polls that ran out of the window
  double post_seconds = 0;        // time spent in ibv_post_send
  double poll_seconds = 0;        // time spent spinning in settle()
  bool timestamps = false;
};

class VerbsTransport final : public Transport {
 public:
  // nullptr (and `why`) when no RDMA device is usable: the prober then stays off. With `events`
  // (the daemon's owner of device contexts), the devices are its shared contexts and their port
  // changes come from its subscription; a device it does not have is opened here as before.
  static std::unique_ptr<VerbsTransport> open(const TransportOptions& opts, std::string& why,
                                              std::shared_ptr<verbs::DeviceEvents> events = nullptr);
  ~VerbsTransport() override;

  std::vector<LocalPort> local_ports() const;
  // Starts the responder and connector threads; throws std::runtime_error (e.g. port in use).
  void start();
  void stop();
  // Polls the CQs until every probe posted since the last call has completed, or for at most
  // poll_window. The loop calls it once after posting a wake-up's probes (each post_probe() has
  // already polled once right after its own post), before any other work that would delay the
  // completions' times; what it finds, the next wait() hands out.
  void settle();
  // Waits up to timeout_ms for completions or connect results and appends them to `out`: first
  // what settle() and post_probe() found (settling any probe still fresh); it arms the completion
  // channel and sleeps only when probes are still outstanding after that.
  void wait(int timeout_ms, std::vector<TransportEvent>& out);
  // Queries every port again and appends a kPortState event for each whose ACTIVE state changed
  // (all: for every port, as it is now). The loop calls it at start (all) and once a second;
  // wait() does the same for a device that reports a port event.
  void port_events(std::vector<TransportEvent>& out, bool all);
  // Records the calling (loop) thread's CPU time for counters(); the loop calls it once a second.
  void sample_loop_cpu();
  // Wakes wait() up (from another thread).
  void wake();

  void connect(const ConnectRequest& r) override;
  bool reports_connect_start() const override { return true; }
  void pair(std::uint64_t request, const PeerSpec& peer) override;
  std::optional<TimePoint> post_probe(std::uint64_t link, std::uint64_t probe, std::string& reason) override;
  void close(std::uint64_t link) override;

  TransportCounters counters() const;

 private:
  struct LinkQp;
  explicit VerbsTransport(const TransportOptions& opts);
  void connector_main();
  // Each returns true when the peer's TCP connect failed (its queued connects fail with it).
  bool do_connect(const ConnectRequest& r, std::uint64_t attempt);
  bool do_pair(std::uint64_t request, const PeerSpec& peer);
  void connect_failed(std::uint64_t link, std::uint64_t attempt, const std::string& reason, bool self = false);
  void push_event(TransportEvent e);
  std::size_t poll_cq(ProbeDevice& d, std::vector<TransportEvent>& out);
  void poll_fresh(std::vector<TransportEvent>& out, bool spin);
  std::optional<TimePoint> post_locked(std::uint64_t link, std::uint64_t probe, std::string& reason);
  void take_events(std::vector<TransportEvent>& out);
  void device_events(ProbeDevice& d, std::vector<TransportEvent>& out);
  // Port changes the shared owner signalled (its thread) since the last call: the devices' ports
  // are queried again, as device_events() does for a device read here.
  void take_port_signals(std::vector<TransportEvent>& out);
  static void port_changes(const ProbeDevice& d, const std::vector<VerbsPort>& changed, std::vector<TransportEvent>& out);
  // A failed completion among out[from..] may be the local port going down under its probe (rxe
  // fails a post on a down netdev at once, hardware flushes): the ports are read again and any
  // change put ahead of the completions, so that the engine parks the link before it would count
  // the probe lost. The async PORT_ERR may be read only after the completion.
  void ports_before_failures(std::vector<TransportEvent>& out, std::size_t from);
  ProbeDevice* device(const std::string& name);

  TransportOptions opts_;
  std::uint64_t instance_ = 0;
  std::vector<std::unique_ptr<ProbeDevice>> devices_;
  int epoll_fd_ = -1, wake_fd_ = -1;

  mutable std::mutex mu_;  // link_qps_, by_qpn_, attempts_, handshakes_, events_
  std::condition_variable cv_;
  std::map<std::uint64_t, std::unique_ptr<LinkQp>> link_qps_;
  std::map<std::pair<const ProbeDevice*, std::uint32_t>, LinkQp*> by_qpn_;
  std::map<std::uint64_t, std::uint64_t> attempts_;  // link -> current connect attempt
  std::uint64_t next_attempt_ = 1;
  HandshakeQueue handshakes_{1};  // sized from opts_ in the constructor
  std::vector<TransportEvent> events_;
  std::atomic<std::uint64_t> wakeups_{0}, polled_{0}, poll_misses_{0};
  std::atomic<bool> have_events_{false};  // events_ is not empty (checked without the lock)
  // Loop thread only: probes posted and not yet settled by the post-probe poll, completions that
  // poll found (handed out by the next wait()), and a reused poll buffer.
  std::vector<std::uint64_t> fresh_;
  std::vector<TransportEvent> settled_;
  struct RawCompletion {
    std::uint64_t wr_id;
    std::uint32_t qpn;
    int status;
    std::optional<std::uint64_t> ts;
  };
  std::vector<RawCompletion> raw_;
  std::atomic<double> loop_cpu_{0}, connector_cpu_{0}, post_seconds_{0}, poll_seconds_{0};
  bool stopping_ = false;
  std::vector<std::thread> connectors_;
  std::shared_ptr<verbs::DeviceEvents> device_events_;
  std::mutex signals_mu_;  // signalled_
  std::set<std::string> signalled_;
  std::atomic<bool> have_signals_{false};
  std::unique_ptr<verbs::DeviceEvents::Subscription> subscription_;  // reset before wake_fd_ closes
  // Declared after what it refers to (opts_, devices_), so that it is destroyed first.
  std::unique_ptr<Responder> responder_;
};

}  // namespace rdma::collectors::prober
