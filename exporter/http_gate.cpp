#include "exporter/http_gate.h"

#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <list>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace rdma::exporter {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kRelayBuffer = 16 * 1024;  // per direction: a full one stops reading that side

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void set_nodelay(int fd) {
  int one = 1;  // as civetweb's tcp_nodelay: without it each reply waits 40 ms on delayed ACKs
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// The end of an HTTP head (the blank line; civetweb also takes bare LFs), or npos.
std::size_t head_end(std::string_view buf) {
  auto crlf = buf.find("\r\n\r\n");
  auto lf = buf.find("\n\n");
  std::size_t end = std::string_view::npos;
  if (crlf != std::string_view::npos) end = crlf + 4;
  if (lf != std::string_view::npos) end = std::min(end, lf + 2);
  return end;
}

bool contains_header(std::string_view head, std::string_view name) {  // name lower case, with ':'
  for (std::size_t pos = head.find('\n'); pos != std::string_view::npos; pos = head.find('\n', pos + 1)) {
    std::string_view line = head.substr(pos + 1);
    if (line.size() < name.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < name.size() && same; ++i)
      same = static_cast<char>(std::tolower(static_cast<unsigned char>(line[i]))) == name[i];
    if (same) return true;
  }
  return false;
}

// "GET /healthz ..." or "HEAD /healthz?x ..." without a body: the one request the gate answers.
// Anything else (a body, pipelined bytes) goes to civetweb, which answers it as before.
HeadVerdict healthz_request(std::string_view buf, std::size_t end) {
  if (end != buf.size()) return HeadVerdict::kRelay;  // pipelined: civetweb keeps the order
  std::string_view head = buf.substr(0, end);
  HeadVerdict kind = HeadVerdict::kRelay;
  if (head.starts_with("GET /healthz")) kind = HeadVerdict::kHealthzGet, head.remove_prefix(12);
  else if (head.starts_with("HEAD /healthz")) kind = HeadVerdict::kHealthzHead, head.remove_prefix(13);
  else return HeadVerdict::kRelay;
  if (head.empty() || (head.front() != ' ' && head.front() != '?')) return HeadVerdict::kRelay;
  if (contains_header(buf.substr(0, end), "content-length:") || contains_header(buf.substr(0, end), "transfer-encoding:"))
    return HeadVerdict::kRelay;
  return kind;
}

// TLS speaks first from the client too: its first record (the ClientHello) plays the head.
bool tls_record_complete(std::string_view buf) {
  if (buf.size() < 5) return false;
  if (static_cast<unsigned char>(buf[0]) != 0x16) return true;  // not a handshake: civetweb refuses it
  std::size_t len = (static_cast<unsigned char>(buf[3]) << 8) | static_cast<unsigned char>(buf[4]);
  return buf.size() >= 5 + len;
}

struct Conn {
  int client = -1;
  int backend = -1;
  bool relaying = false;
  bool connected = false;   // the backend's non-blocking connect finished
  bool client_eof = false;  // the client half-closed: forwarded once to_backend is flushed
  bool backend_eof = false;
  std::string head;         // before relaying: what the client sent so far
  std::string to_backend, to_client;
  std::size_t tb_off = 0, tc_off = 0;
  Clock::time_point deadline;  // waiting: the head deadline; relaying: to connect, then to flush
  std::uint64_t id = 0;        // never reused: an event left from a closed connection finds nothing
};

class Loop {
 public:
  Loop(const HttpGateOptions& o, HttpGateStats& st, int listen_fd, int wake_fd, int backend_port)
      : o_(o), st_(st), listen_fd_(listen_fd), wake_fd_(wake_fd), backend_port_(backend_port) {}
  ~Loop() {
    for (auto& c : conns_) close_conn_fds(c);
    close_fd(ep_);
  }

  void run() {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) {
      spdlog::error("http gate: epoll_create1: {}", std::strerror(errno));
      return;
    }
    add(listen_fd_, EPOLLIN, kListenTag);
    add(wake_fd_, EPOLLIN, kWakeTag);
    epoll_event evs[128];
    for (;;) {
      int n = epoll_wait(ep_, evs, 128, 100);  // 100 ms: the granularity of the deadlines
      if (n < 0 && errno != EINTR) {
        spdlog::error("http gate: epoll_wait: {}", std::strerror(errno));
        return;
      }
      for (int i = 0; i < n; ++i) {
        const std::uint64_t tag = evs[i].data.u64;
        if (tag == kWakeTag) return;
        if (tag == kListenTag) {
          accept_all();
          continue;
        }
        auto it = by_tag_.find(tag);
        if (it == by_tag_.end()) continue;  // closed by an earlier event of this round
        on_event(it->second.first, it->second.second, evs[i].events);
      }
      sweep();
    }
  }

 private:
  using It = std::list<Conn>::iterator;

  static constexpr std::uint64_t kListenTag = ~std::uint64_t{0}, kWakeTag = kListenTag - 1;
  void add(int fd, std::uint32_t events, std::uint64_t tag) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    (void)epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
  }
  void mod(int fd, std::uint32_t events, std::uint64_t tag) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    (void)epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &ev);
  }
  // The epoll tag of a side: the connection's id, and which side.
  static std::uint64_t tag_of(const Conn& c, bool backend) { return c.id * 2 + (backend ? 1 : 0); }

  void close_conn_fds(Conn& c) {
    close_fd(c.client);
    close_fd(c.backend);
  }
  void close_conn(It it) {
    by_tag_.erase(tag_of(*it, false));
    by_tag_.erase(tag_of(*it, true));
    if (it->relaying) --relayed_;
    else --pending_;
    close_conn_fds(*it);
    conns_.erase(it);
  }

  void accept_all() {
    for (;;) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) {  // out of descriptors: the oldest waiting head gives way
          if (evict_oldest_pending()) continue;
          // None to give way: stop watching the port (it would wake this loop at once, again and
          // again) until the next sweep; the kernel's backlog holds the newcomers meanwhile.
          (void)epoll_ctl(ep_, EPOLL_CTL_DEL, listen_fd_, nullptr);
          listen_paused_ = true;
        }
        return;  // EAGAIN, or an aborted connection
      }
      if (pending_ >= o_.max_pending) evict_oldest_pending();
      set_nodelay(fd);
      auto now = Clock::now();
      conns_.push_back(Conn{});
      It it = std::prev(conns_.end());
      it->client = fd;
      it->id = next_id_++;
      it->deadline = now + o_.head_deadline;
      ++pending_;
      by_tag_[tag_of(*it, false)] = {it, false};
      add(fd, EPOLLIN | EPOLLRDHUP, tag_of(*it, false));
    }
  }

  bool evict_oldest_pending() {
    // conns_ is in accept order, so the first waiting one is the oldest.
    for (It it = conns_.begin(); it != conns_.end(); ++it)
      if (!it->relaying) {
        ++st_.evicted;
        close_conn(it);
        return true;
      }
    return false;
  }

  void sweep() {
    auto now = Clock::now();
    if (now < next_sweep_) return;
    next_sweep_ = now + std::chrono::milliseconds(50);
    if (listen_paused_) {
      add(listen_fd_, EPOLLIN, kListenTag);
      listen_paused_ = false;
    }
    for (It it = conns_.begin(); it != conns_.end();) {
      It next = std::next(it);
      if (now >= it->deadline) {
        if (!it->relaying) ++st_.head_timeout;
        close_conn(it);
      }
      it = next;
    }
  }

  void on_event(It it, bool backend, std::uint32_t events) {
    if (!it->relaying) return read_head(it, events);
    Conn& c = *it;
    // The client gone both ways (or reset): nobody is left to answer.
    if (!backend && (events & (EPOLLERR | EPOLLHUP))) return close_conn(it);
    if (backend && !c.connected) {
      int err = 0;
      socklen_t len = sizeof err;
      if ((events & EPOLLERR) || getsockopt(c.backend, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        spdlog::warn("http gate: cannot reach the HTTP workers on 127.0.0.1:{}: {}", backend_port_,
                     std::strerror(err ? err : ECONNREFUSED));
        return close_conn(it);
      }
      c.connected = true;
      c.deadline = Clock::time_point::max();
    }
    if (!pump(c)) return close_conn(it);
    if (c.backend_eof && c.to_client.empty()) return close_conn(it);  // the last answer went out
    interest(c);
  }

  // Moves what each side has into the other; false when the connection is over.
  bool pump(Conn& c) {
    char buf[16384];
    for (bool progress = true; progress;) {
      progress = false;
      if (c.connected && !c.client_eof && c.to_backend.size() - c.tb_off < kRelayBuffer) {
        ssize_t n = ::recv(c.client, buf, sizeof buf, 0);
        if (n > 0) c.to_backend.append(buf, static_cast<std::size_t>(n)), progress = true;
        else if (n == 0) c.client_eof = true, progress = true;
        else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
      }
      if (c.connected && c.tb_off < c.to_backend.size()) {
        ssize_t n = ::send(c.backend, c.to_backend.data() + c.tb_off, c.to_backend.size() - c.tb_off, MSG_NOSIGNAL);
        if (n > 0) c.tb_off += static_cast<std::size_t>(n), progress = true;
        else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
        if (c.tb_off == c.to_backend.size()) c.to_backend.clear(), c.tb_off = 0;
      }
      if (c.connected && c.client_eof && c.to_backend.empty()) (void)::shutdown(c.backend, SHUT_WR);
      if (c.connected && !c.backend_eof && c.to_client.size() - c.tc_off < kRelayBuffer) {
        ssize_t n = ::recv(c.backend, buf, sizeof buf, 0);
        if (n > 0) c.to_client.append(buf, static_cast<std::size_t>(n)), progress = true;
        else if (n == 0) {
          // civetweb ended the connection: what it sent still goes out, within idle_timeout.
          c.backend_eof = true, progress = true;
          c.deadline = Clock::now() + o_.idle_timeout;
        }
        else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
      }
      if (c.tc_off < c.to_client.size()) {
        ssize_t n = ::send(c.client, c.to_client.data() + c.tc_off, c.to_client.size() - c.tc_off, MSG_NOSIGNAL);
        if (n > 0) c.tc_off += static_cast<std::size_t>(n), progress = true;
        else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
        if (c.tc_off == c.to_client.size()) c.to_client.clear(), c.tc_off = 0;
      }
      if (c.backend_eof && c.to_client.empty()) return true;
    }
    return true;
  }

  void interest(Conn& c) {
    std::uint32_t cl = 0, be = 0;
    if (!c.connected) {
      be = EPOLLOUT;
    } else {
      if (!c.client_eof && c.to_backend.size() - c.tb_off < kRelayBuffer) cl |= EPOLLIN | EPOLLRDHUP;
      if (c.tb_off < c.to_backend.size()) be |= EPOLLOUT;
      if (!c.backend_eof && c.to_client.size() - c.tc_off < kRelayBuffer) be |= EPOLLIN | EPOLLRDHUP;
    }
    if (c.tc_off < c.to_client.size()) cl |= EPOLLOUT;
    mod(c.client, cl, tag_of(c, false));
    // A closed backend reports EPOLLHUP whatever is asked: stop watching it.
    if (c.backend_eof) (void)epoll_ctl(ep_, EPOLL_CTL_DEL, c.backend, nullptr);
    else mod(c.backend, be, tag_of(c, true));
  }

  void read_head(It it, std::uint32_t events) {
    Conn& c = *it;
    char buf[4096];
    (void)events;
    for (;;) {
      std::size_t room = o_.max_head > c.head.size() ? o_.max_head - c.head.size() : 0;
      if (room == 0) break;
      ssize_t n = ::recv(c.client, buf, std::min(room, sizeof buf), 0);
      if (n > 0) {
        c.head.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0) {  // half-closed after its head (printf | nc), or gone before it
        c.client_eof = true;
        break;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return close_conn(it);
      break;
    }
    switch (classify_head(c.head, o_.tls, o_.max_head)) {
      case HeadVerdict::kWait:
        if (c.client_eof) close_conn(it);  // gone before its head
        return;
      case HeadVerdict::kHealthzGet: return answer_healthz(it, false);
      case HeadVerdict::kHealthzHead: return answer_healthz(it, true);
      case HeadVerdict::kRelay: return relay(it);
    }
  }

  void answer_healthz(It it, bool head_only) {
    // The answer civetweb gave (exporter/http_server.cpp), then the connection ends: a kubelet
    // probe asks once per connection.
    static constexpr std::string_view kGet =
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 3\r\n"
        "Cache-Control: no-store\r\nConnection: close\r\n\r\nok\n";
    std::string_view a = head_only ? kGet.substr(0, kGet.size() - 3) : kGet;
    (void)::send(it->client, a.data(), a.size(), MSG_NOSIGNAL);  // a fresh socket's buffer holds it
    ++st_.healthz;
    close_conn(it);
  }

  void relay(It it) {
    Conn& c = *it;
    if (relayed_ >= o_.max_relayed) {
      ++st_.relay_full;
      return close_conn(it);
    }
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return close_conn(it);
    set_nodelay(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(backend_port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
      ::close(fd);
      return close_conn(it);
    }
    c.backend = fd;
    c.relaying = true;
    --pending_;
    ++relayed_;
    c.to_backend = std::move(c.head);
    c.head.clear();
    c.deadline = Clock::now() + o_.idle_timeout;  // to connect; then civetweb's timeouts govern
    by_tag_[tag_of(c, true)] = {it, true};
    add(fd, EPOLLOUT, tag_of(c, true));
    interest(c);
  }

  const HttpGateOptions& o_;
  HttpGateStats& st_;
  int listen_fd_, wake_fd_, backend_port_;
  int ep_ = -1;
  std::list<Conn> conns_;  // in accept order
  std::unordered_map<std::uint64_t, std::pair<It, bool>> by_tag_;
  std::uint64_t next_id_ = 1;
  bool listen_paused_ = false;
  std::size_t pending_ = 0, relayed_ = 0;
  Clock::time_point next_sweep_{};
};

}  // namespace

HeadVerdict classify_head(std::string_view bytes, bool tls, std::size_t max_head) {
  if (tls) return tls_record_complete(bytes) || bytes.size() >= max_head ? HeadVerdict::kRelay : HeadVerdict::kWait;
  const std::size_t end = head_end(bytes);
  if (end == std::string_view::npos) return bytes.size() >= max_head ? HeadVerdict::kRelay : HeadVerdict::kWait;
  return healthz_request(bytes, end);
}

HttpGate::HttpGate(HttpGateOptions opts, HttpGateStats& stats) : opts_(std::move(opts)), stats_(stats) {
  auto colon = opts_.listen_address.rfind(':');
  std::string host = opts_.listen_address.substr(0, colon);
  int port = std::stoi(opts_.listen_address.substr(colon + 1));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1)
    throw std::runtime_error("cannot listen on " + opts_.listen_address + " (not an IPv4 address)");
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  if (listen_fd_ < 0 || setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 4096) != 0) {
    int err = errno;
    close_fd(listen_fd_);
    throw std::runtime_error("cannot listen on " + opts_.listen_address + ": " + std::strerror(err));
  }
  // The kernel keeps a connection that has sent nothing away from accept() for a while: such
  // connections then cost no descriptor here (past the backlog, SYN cookies hand them over and
  // the head deadline closes them).
  constexpr int kDeferSeconds = 10;
  (void)setsockopt(listen_fd_, IPPROTO_TCP, TCP_DEFER_ACCEPT, &kDeferSeconds, sizeof kDeferSeconds);
  socklen_t len = sizeof addr;
  if (getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) port_ = ntohs(addr.sin_port);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    close_fd(listen_fd_);
    throw std::runtime_error(std::string("http gate: eventfd: ") + std::strerror(errno));
  }
}

void HttpGate::start(int backend_port) {
  backend_port_ = backend_port;
  thread_ = std::thread([this] { run(); });
}

void HttpGate::run() {
  Loop loop(opts_, stats_, listen_fd_, wake_fd_, backend_port_);
  loop.run();
}

HttpGate::~HttpGate() {
  if (thread_.joinable()) {
    std::uint64_t one = 1;
    (void)::write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  close_fd(listen_fd_);
  close_fd(wake_fd_);
}

}  // namespace rdma::exporter
