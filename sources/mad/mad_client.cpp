#include "sources/mad/mad_client.h"

#include <infiniband/umad.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <unordered_map>

namespace rdma::mad {

std::string_view outcome_label(Outcome o) {
  switch (o) {
    case Outcome::kOk: return "ok";
    case Outcome::kTimeout: return "timeout";
    case Outcome::kStatus: return "mad_status";
    case Outcome::kSendError: return "send_error";
    case Outcome::kMalformed: return "malformed";
  }
  return "unknown";
}

namespace {
std::once_flag umad_init_once;
void ensure_umad_init() {
  std::call_once(umad_init_once, [] { umad_init(); });
}
std::uint64_t be64(std::uint64_t v) { return __builtin_bswap64(v); }  // GUIDs come in network order

LocalPort from_umad(const umad_port_t& p, const umad_ca_t& ca) {
  LocalPort lp;
  lp.ca = ca.ca_name;
  lp.port = p.portnum;
  lp.lid = static_cast<std::uint16_t>(p.base_lid);
  lp.port_guid = be64(p.port_guid);
  lp.node_guid = be64(ca.node_guid);
  lp.state = static_cast<int>(p.state);
  lp.link_layer = p.link_layer;
  return lp;
}
}  // namespace

std::mutex& umad_setup_mutex() {
  static std::mutex mu;
  return mu;
}

std::vector<LocalPort> list_local_ports(std::string* error) {
  ensure_umad_init();
  std::lock_guard setup(umad_setup_mutex());
  std::vector<LocalPort> out;
  // umad_get_cas_names() invents "mthca0" when there is no CA; the device list does not.
  umad_device_node* head = umad_get_ca_device_list();
  for (umad_device_node* n = head; n; n = n->next) {
    umad_ca_t ca{};
    if (umad_get_ca(n->ca_name, &ca) < 0) {
      if (error) *error = std::string("umad_get_ca(") + n->ca_name + ") failed";
      continue;
    }
    for (int i = 0; i <= ca.numports && i < UMAD_CA_MAX_PORTS + 1; ++i)
      if (ca.ports[i]) out.push_back(from_umad(*ca.ports[i], ca));
    umad_release_ca(&ca);
  }
  if (head) umad_free_ca_device_list(head);
  return out;
}

std::shared_ptr<MadClient> MadClient::shared(const std::string& ca, int port, std::string* error, int* open_errno) {
  if (open_errno) *open_errno = 0;
  static std::map<std::pair<std::string, int>, std::weak_ptr<MadClient>> clients;
  ensure_umad_init();
  std::lock_guard lock(umad_setup_mutex());
  // Resolve the default CA/port first so that "" and the explicit name share one client.
  umad_port_t p{};
  if (umad_get_port(ca.empty() ? nullptr : ca.c_str(), port, &p) < 0) {
    if (error) *error = "umad_get_port(" + (ca.empty() ? std::string("default") : ca) + ", " + std::to_string(port) + ") failed";
    return nullptr;
  }
  const std::pair<std::string, int> key{p.ca_name, p.portnum};
  umad_release_port(&p);
  if (auto existing = clients[key].lock()) return existing;
  errno = 0;
  const int fd = umad_open_port(key.first.c_str(), key.second);
  if (fd < 0) {
    // libibumad returns -EIO for any failed open(); errno still holds open()'s own.
    const int err = errno ? errno : -fd;
    if (open_errno) *open_errno = err;
    if (error) *error = "umad_open_port(" + key.first + ", " + std::to_string(key.second) + "): " + std::strerror(err);
    return nullptr;
  }
  const int agent = umad_register(fd, kPerfMgtClass, 1, 0, nullptr);
  if (agent < 0) {
    umad_close_port(fd);
    if (error) *error = "umad_register(PerfMgt) on " + key.first + " failed";
    return nullptr;
  }
  auto client = std::shared_ptr<MadClient>(new MadClient(key.first, key.second, fd, agent));
  clients[key] = client;
  return client;
}

MadClient::Turn::Turn(MadClient& client, std::chrono::steady_clock::time_point by) : c(client) {
  std::unique_lock lock(c.mu_);
  const std::uint64_t ticket = c.next_ticket_++;
  held_ = c.turn_.wait_until(lock, by, [&] { return c.serving_ == ticket; });
  if (!held_) c.abandoned_.insert(ticket);  // the holder before it skips it when done
}

MadClient::Turn::~Turn() {
  if (!held_) return;
  {
    std::lock_guard lock(c.mu_);
    ++c.serving_;
    while (c.abandoned_.erase(c.serving_)) ++c.serving_;
  }
  c.turn_.notify_all();
}

MadClient::~MadClient() {
  std::lock_guard setup(umad_setup_mutex());
  umad_unregister(fd_, agent_);
  umad_close_port(fd_);
}

std::vector<PmaReply> MadClient::query(std::span<const PmaQuery> queries, const QueryOptions& opts, QueryStats* stats) {
  using Clock = std::chrono::steady_clock;
  Turn turn(*this, opts.start_by);
  if (!turn.held()) return {};
  std::vector<PmaReply> replies(queries.size());
  QueryStats local_stats;
  QueryStats& st = stats ? *stats : local_stats;
  const unsigned window = opts.window ? opts.window : 1;
  const int timeout_ms = static_cast<int>(std::max<std::int64_t>(1, opts.timeout.count()));
  // Our own deadline backs up the kernel's send timeout (the umad2sim shim has none): a little
  // later than the kernel's, so that its timeout reply normally arrives first.
  const auto deadline_after = opts.timeout + std::chrono::milliseconds(20);

  struct InFlight {
    std::size_t index;
    Clock::time_point deadline;
  };
  std::unordered_map<std::uint32_t, InFlight> in_flight;
  std::deque<std::size_t> to_send;
  for (std::size_t i = 0; i < queries.size(); ++i) to_send.push_back(i);

  const std::size_t umad_len = umad_size() + kMadSize;
  std::vector<std::uint8_t> sbuf(umad_len), rbuf(umad_len);

  auto fail_or_retry = [&](std::size_t index, Outcome why) {
    PmaReply& r = replies[index];
    if (why == Outcome::kTimeout) ++st.timeouts;
    if (r.attempts <= opts.retries && why == Outcome::kTimeout) {
      to_send.push_back(index);
    } else {
      r.outcome = why;
    }
  };

  while (!to_send.empty() || !in_flight.empty()) {
    while (!to_send.empty() && in_flight.size() < window) {
      const std::size_t index = to_send.front();
      to_send.pop_front();
      const PmaQuery& q = queries[index];
      const std::uint32_t tid = ++next_tid_;
      auto mad = build_pma_get(tid, q.attr, q.port_select);
      std::memset(sbuf.data(), 0, sbuf.size());
      umad_set_addr(sbuf.data(), q.lid, 1, 0, static_cast<int>(0x80010000u));
      std::memcpy(umad_get_mad(sbuf.data()), mad.data(), mad.size());
      ++replies[index].attempts;
      ++st.sent;
      if (umad_send(fd_, agent_, sbuf.data(), static_cast<int>(kMadSize), timeout_ms, 0) < 0) {
        replies[index].outcome = Outcome::kSendError;
        continue;
      }
      in_flight.emplace(tid, InFlight{index, Clock::now() + deadline_after});
    }
    if (in_flight.empty()) continue;

    auto next_deadline = Clock::time_point::max();
    for (const auto& [tid, f] : in_flight) next_deadline = std::min(next_deadline, f.deadline);
    const auto now = Clock::now();
    int wait_ms = 0;
    if (next_deadline > now)
      wait_ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(next_deadline - now).count());
    int len = static_cast<int>(kMadSize);
    const int rc = umad_recv(fd_, rbuf.data(), &len, wait_ms);
    if (rc >= 0) {
      const auto* m = static_cast<const std::uint8_t*>(umad_get_mad(rbuf.data()));
      const auto hdr = parse_header(std::span<const std::uint8_t>(m, static_cast<std::size_t>(std::max(len, 0))));
      auto it = hdr ? in_flight.find(static_cast<std::uint32_t>(hdr->tid)) : in_flight.end();
      if (it == in_flight.end()) {
        ++st.stray;
      } else {
        const std::size_t index = it->second.index;
        in_flight.erase(it);
        PmaReply& r = replies[index];
        const int ustatus = umad_status(rbuf.data());
        if (ustatus != 0) {
          // The kernel (or simulator) gave the request back: timed out or undeliverable.
          fail_or_retry(index, Outcome::kTimeout);
        } else if (len < static_cast<int>(kMadSize) || hdr->mgmt_class != kPerfMgtClass || hdr->method != 0x81 ||
                   hdr->attr_id != static_cast<std::uint16_t>(queries[index].attr)) {
          r.outcome = Outcome::kMalformed;
        } else if (hdr->status != 0) {
          r.outcome = Outcome::kStatus;
          r.status = hdr->status;
        } else {
          std::memcpy(r.data.data(), m + kPmaDataOffset, kPmaDataSize);
          r.outcome = Outcome::kOk;
        }
      }
    }
    // Expire whatever passed its deadline (also after a reply: a busy fd must not starve them).
    const auto after = Clock::now();
    for (auto it = in_flight.begin(); it != in_flight.end();) {
      if (it->second.deadline <= after) {
        const std::size_t index = it->second.index;
        it = in_flight.erase(it);
        fail_or_retry(index, Outcome::kTimeout);
      } else {
        ++it;
      }
    }
  }
  return replies;
}

}  // namespace rdma::mad
