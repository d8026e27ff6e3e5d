// HttpServer limits over real loopback sockets: documented endpoints only, 405/413, request-head
// limit, concurrent-scrape admission (503 at once), basic auth, request timeout, the accept-side
// gate (head deadline, /healthz without a worker, what the first bytes make it do).
#include <arpa/inet.h>
#include <crypt.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "exporter/exposition.h"
#include "exporter/http_server.h"

using namespace rdma::exporter;

namespace {

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  timeval tv{30, 0};  // a hang fails the test instead of blocking ctest forever
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

// Sends one raw request (with "Connection: close") and returns the whole response.
std::string raw(int port, const std::string& request) {
  int fd = connect_to(port);
  std::size_t off = 0;
  while (off < request.size()) {
    ssize_t n = ::send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close early on an oversized head
    off += static_cast<std::size_t>(n);
  }
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

std::string get(int port, const std::string& path, const std::string& extra = "") {
  return raw(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + extra + "\r\n");
}

// Handlers that stay inside until the test lets them go: how a test holds slots or workers.
struct Hold {
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0;
  bool released = false;
  void enter() {  // in a handler: counts itself in, then waits for release()
    std::unique_lock lock(mu);
    ++inside;
    cv.notify_all();
    cv.wait(lock, [&] { return released; });
  }
  void wait_inside(int n) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return inside >= n; });
  }
  void release() {
    {
      std::lock_guard lock(mu);
      released = true;
    }
    cv.notify_all();
  }
};

int status(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::stoi(response.substr(9, 3));
}

HttpOptions local(int max_scrapes = 4) {
  HttpOptions o;
  o.listen_address = "127.0.0.1:0";
  o.threads = 6;
  o.max_concurrent_scrapes = max_scrapes;
  o.request_timeout_ms = 2000;
  return o;
}

HttpHandlers simple() {
  return {[](auto) { return std::make_shared<const std::string>("up 1\n"); }, [] { return std::string("<html/>"); }};
}

}  // namespace

TEST_CASE("http: only the documented endpoints answer", "[http]") {
  HttpServer s(local(), simple());
  CHECK(status(get(s.port(), "/metrics")) == 200);
  CHECK(get(s.port(), "/metrics").find("up 1") != std::string::npos);
  CHECK(status(get(s.port(), "/metrics?x=1")) == 200);
  CHECK(status(get(s.port(), "/healthz")) == 200);
  CHECK(status(get(s.port(), "/")) == 200);
  for (const char* p : {"/metrics/", "/favicon.ico", "/../etc/passwd", "/index.html", "/healthz/x", "/%2e%2e/x"}) {
    INFO(p);
    CHECK(status(get(s.port(), p)) == 404);
  }
  CHECK(status(raw(s.port(), "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")) == 405);
  CHECK(status(raw(s.port(), "DELETE / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")) == 405);
  CHECK(status(raw(s.port(), "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")) == 200);
  CHECK(s.stats().not_found.load() == 6);
  CHECK(s.stats().bad_method.load() == 2);
}

TEST_CASE("http: request bodies and oversized heads are refused", "[http]") {
  auto o = local();
  o.max_request_size = 4096;
  HttpServer s(o, simple());
  CHECK(status(raw(s.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")) ==
        413);
  CHECK(s.stats().too_large.load() == 1);
  // A head over max_request_size never reaches a handler: civetweb answers 413/431 or closes.
  std::string big = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(8192, 'a') + "\r\n\r\n";
  auto r = raw(s.port(), big);
  CHECK(status(r) != 200);
  CHECK(r.find("up 1") == std::string::npos);
  CHECK(status(get(s.port(), "/healthz")) == 200);  // and the server is still fine
}

TEST_CASE("http: scrapes over the limit get 503 at once, other endpoints keep answering", "[http]") {
  Hold hold;
  HttpHandlers h{[&](auto) {
                   hold.enter();
                   return std::make_shared<const std::string>("up 1\n");
                 },
                 [] { return std::string("<html/>"); }};
  HttpServer s(local(2), h);
  auto a = std::async(std::launch::async, [&] { return status(get(s.port(), "/metrics")); });
  auto b = std::async(std::launch::async, [&] { return status(get(s.port(), "/metrics")); });
  hold.wait_inside(2);
  auto third = get(s.port(), "/metrics");  // answered while both slots are held
  CHECK(status(third) == 503);
  CHECK(third.find("Retry-After: 1") != std::string::npos);
  CHECK(status(get(s.port(), "/healthz")) == 200);
  hold.release();
  CHECK(a.get() == 200);
  CHECK(b.get() == 200);
  CHECK(status(get(s.port(), "/metrics")) == 200);  // slots are given back
  CHECK(s.stats().too_many_scrapes.load() == 1);
}

TEST_CASE("http: basic auth on every path", "[http][auth]") {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  REQUIRE(crypt_gensalt_rn("$2b$", 4, nullptr, 0, salt, sizeof salt));
  crypt_data data{};
  auto o = local();
  o.web.basic_auth_users = {{"prometheus", crypt_rn("s3cret", salt, &data, sizeof data)}};
  HttpServer s(o, simple());
  auto denied = get(s.port(), "/metrics");
  CHECK(status(denied) == 401);
  CHECK(denied.find("WWW-Authenticate: Basic realm=\"rdma_exporter\"") != std::string::npos);
  CHECK(denied.find("up 1") == std::string::npos);
  CHECK(status(get(s.port(), "/")) == 401);
  CHECK(status(get(s.port(), "/nope")) == 401);  // no path discovery without credentials
  CHECK(status(get(s.port(), "/metrics", "Authorization: Basic cHJvbWV0aGV1czp3cm9uZw==\r\n")) == 401);
  auto ok = get(s.port(), "/metrics", "Authorization: Basic cHJvbWV0aGV1czpzM2NyZXQ=\r\n");
  CHECK(status(ok) == 200);
  CHECK(ok.find("up 1") != std::string::npos);
  CHECK(s.stats().unauthorized.load() == 4);
  // Liveness for the kubelet's plain httpGet probes: reveals nothing, needs no credentials.
  auto health = get(s.port(), "/healthz");
  CHECK(status(health) == 200);
  CHECK(health.find("up 1") == std::string::npos);
  CHECK(s.stats().unauthorized.load() == 4);
}

TEST_CASE("http: the scraper's timeout header, less the offset, reaches the handler", "[http]") {
  std::mutex mu;
  std::vector<std::optional<std::chrono::milliseconds>> seen;
  HttpHandlers h{[&](std::optional<std::chrono::milliseconds> t) {
                   std::lock_guard lock(mu);
                   seen.push_back(t);
                   return std::make_shared<const std::string>("up 1\n");
                 },
                 [] { return std::string("<html/>"); }};
  HttpServer s(local(), h);
  CHECK(status(get(s.port(), "/metrics", "X-Prometheus-Scrape-Timeout-Seconds: 10\r\n")) == 200);
  CHECK(status(get(s.port(), "/metrics", "X-Prometheus-Scrape-Timeout-Seconds: banana\r\n")) == 200);
  CHECK(status(get(s.port(), "/metrics")) == 200);
  std::lock_guard lock(mu);
  REQUIRE(seen.size() == 3);
  CHECK(seen[0] == std::chrono::milliseconds(9500));
  CHECK_FALSE(seen[1]);  // a bad header is ignored, the scrape still answers
  CHECK_FALSE(seen[2]);
}

TEST_CASE("http: X-Prometheus-Scrape-Timeout-Seconds parsing", "[http]") {
  using std::chrono::milliseconds;
  const milliseconds off(500);
  CHECK(scrape_timeout_from_header("10", off) == milliseconds(9500));
  CHECK(scrape_timeout_from_header("9.75", off) == milliseconds(9250));
  CHECK(scrape_timeout_from_header(" 2 ", off) == milliseconds(1500));
  CHECK(scrape_timeout_from_header("0.4", off) == milliseconds(400));  // offset only while time is left
  CHECK(scrape_timeout_from_header("0.5", off) == milliseconds(500));
  CHECK(scrape_timeout_from_header("10", milliseconds(0)) == milliseconds(10000));
  CHECK(scrape_timeout_from_header("100000000000", off) == milliseconds(1'000'000'000'000 - 500));  // huge: capped later
  for (const char* bad : {"", " ", "0", "-1", "abc", "10s", "1e3", "nan", "inf", "-inf", "0x10", "+5", "1,5", "0.0001",
                          "5 5"}) {
    INFO(bad);
    CHECK_FALSE(scrape_timeout_from_header(bad, off));
  }
  CHECK_FALSE(scrape_timeout_from_header(nullptr, off));
}

TEST_CASE("http: a client that stops sending is dropped after the request timeout", "[http]") {
  auto o = local();
  o.request_timeout_ms = 300;
  HttpServer s(o, simple());
  int fd = connect_to(s.port());
  std::string partial = "GET /metrics HTTP/1.1\r\nHost: x\r\n";  // never finished
  REQUIRE(::send(fd, partial.data(), partial.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(partial.size()));
  char buf[256];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);  // the 30 s SO_RCVTIMEO only guards against a hang
  CHECK(n >= 0);                               // closed (0) or an error reply, not a timeout (-1)
  if (n > 0) CHECK(std::string(buf, static_cast<std::size_t>(n)).find("200 OK") == std::string::npos);
  ::close(fd);
  CHECK(status(get(s.port(), "/healthz")) == 200);
}

TEST_CASE("http: the server stops promptly with an idle keep-alive connection open", "[http]") {
  auto s = std::make_unique<HttpServer>(local(), simple());
  int fd = connect_to(s->port());
  std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";  // keep-alive
  REQUIRE(::send(fd, req.data(), req.size(), MSG_NOSIGNAL) > 0);
  char buf[512];
  REQUIRE(::recv(fd, buf, sizeof buf, 0) > 0);
  s.reset();  // returns (ctest's timeout is the backstop) with the connection still open
  // The stop closed the idle connection: end of stream or a reset, not the 30 s receive timeout.
  // What is still unread of the response (civetweb may send headers and body apart, so the first
  // recv can end early) comes first.
  ssize_t n;
  int err = 0;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
  }
  err = errno;
  CHECK((n == 0 || (n < 0 && err != EAGAIN && err != EWOULDBLOCK)));
  ::close(fd);
}

TEST_CASE("http: a collector's extra path answering the text format is gzipped when the client accepts it", "[http]") {
  HttpHandlers h = simple();
  const std::string text(2000, 'x');  // compresses to a fraction
  h.extra_path = [&](std::string_view path, std::string_view) -> std::optional<HttpResponse> {
    if (path == "/pma") return HttpResponse{200, std::string(kTextContentType), text};
    if (path == "/pma/targets") return HttpResponse{200, "application/json", text};
    return std::nullopt;
  };
  HttpServer s(local(1), h);
  auto r = get(s.port(), "/pma?target=1", "Accept-Encoding: gzip\r\n");
  CHECK(status(r) == 200);
  CHECK(r.find("Content-Encoding: gzip") != std::string::npos);
  const std::string body = r.substr(r.find("\r\n\r\n") + 4);
  CHECK(body.size() < text.size() / 4);
  CHECK(body.compare(0, 2, "\x1f\x8b") == 0);  // the gzip magic
  r = get(s.port(), "/pma?target=1");  // not asked: the text as it is
  CHECK(r.find("Content-Encoding") == std::string::npos);
  CHECK(r.substr(r.find("\r\n\r\n") + 4) == text);
  r = get(s.port(), "/pma/targets", "Accept-Encoding: gzip\r\n");  // not the text format: as it is
  CHECK(r.find("Content-Encoding") == std::string::npos);
}

TEST_CASE("http: a collector's extra path gets the raw query and is admitted apart from the scrapes", "[http]") {
  Hold hold;
  HttpHandlers h = simple();
  h.metrics_text = [&](auto) {
    hold.enter();
    return std::make_shared<const std::string>("up 1\n");
  };
  h.extra_path = [](std::string_view path, std::string_view query) -> std::optional<HttpResponse> {
    if (path != "/probe") return std::nullopt;
    if (query == "throw") throw std::runtime_error("boom");
    return HttpResponse{200, "text/plain; version=0.0.4", "query=" + std::string(query) + "\n"};
  };
  HttpServer s(local(1), h);
  auto r = get(s.port(), "/probe?module=write_bw&target=node%2D2");
  CHECK(status(r) == 200);
  CHECK(r.find("query=module=write_bw&target=node%2D2\n") != std::string::npos);
  CHECK(r.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  CHECK(status(get(s.port(), "/probe?throw")) == 500);
  CHECK(status(get(s.port(), "/probe/x")) == 404);
  CHECK(s.stats().not_found.load() == 1);
  // the one scrape slot is held by a scrape: the extra path is still answered (its own pool)
  auto a = std::async(std::launch::async, [&] { return status(get(s.port(), "/metrics")); });
  hold.wait_inside(1);
  CHECK(status(get(s.port(), "/probe?module=a&target=b")) == 200);
  CHECK(status(get(s.port(), "/metrics")) == 503);  // while a second scrape is refused
  hold.release();
  CHECK(a.get() == 200);
  CHECK(s.stats().too_many_other.load() == 0);
}

TEST_CASE("http: connections without a complete head within head_timeout hold no worker and are closed", "[http]") {
  auto o = local();
  o.threads = 2;
  o.head_timeout_ms = 300;
  HttpServer s(o, simple());
  // More connections than workers: silent ones, one-byte ones and a half-sent head (slowloris).
  std::vector<int> held;
  for (int i = 0; i < 8; ++i) held.push_back(connect_to(s.port()));
  for (int i = 0; i < 8; ++i) {
    int fd = connect_to(s.port());
    REQUIRE(::send(fd, "G", 1, MSG_NOSIGNAL) == 1);
    held.push_back(fd);
  }
  int slow = connect_to(s.port());
  std::string partial = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  REQUIRE(::send(slow, partial.data(), partial.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(partial.size()));
  held.push_back(slow);
  // Every worker is free: the scrape and the probe are answered while all of them are held.
  CHECK(status(get(s.port(), "/metrics")) == 200);
  CHECK(status(get(s.port(), "/healthz")) == 200);
  // Those that sent bytes are closed at the head deadline (end of stream, not the 30 s guard);
  // the silent ones the kernel may still hold back from accept() (TCP_DEFER_ACCEPT).
  for (std::size_t i = 8; i < held.size(); ++i) {
    char buf[256];
    ssize_t n = ::recv(held[i], buf, sizeof buf, 0);
    CHECK(n == 0);
  }
  for (int fd : held) ::close(fd);
  CHECK(s.stats().gate.head_timeout.load() >= 9);
}

TEST_CASE("http: /healthz is answered while every worker runs a scrape", "[http]") {
  Hold hold;
  HttpHandlers h{[&](auto) {
                   hold.enter();
                   return std::make_shared<const std::string>("up 1\n");
                 },
                 [] { return std::string("<html/>"); }};
  auto o = local(0);
  o.threads = 2;
  HttpServer s(o, h);
  auto a = std::async(std::launch::async, [&] { return status(get(s.port(), "/metrics")); });
  auto b = std::async(std::launch::async, [&] { return status(get(s.port(), "/metrics")); });
  hold.wait_inside(2);
  // Both workers are inside a scrape: the gate answers the kubelet itself, GET and HEAD.
  auto health = get(s.port(), "/healthz");
  CHECK(status(health) == 200);
  CHECK(health.substr(health.find("\r\n\r\n") + 4) == "ok\n");
  auto head = raw(s.port(), "HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(status(head) == 200);
  CHECK(head.find("ok\n") == std::string::npos);
  CHECK(status(get(s.port(), "/healthz?verbose=1")) == 200);
  hold.release();
  CHECK(a.get() == 200);
  CHECK(b.get() == 200);
  CHECK(s.stats().gate.healthz.load() == 3);
}

TEST_CASE("http: collectors' paths have their own admission pool, never the scrapes' slots", "[http]") {
  Hold hold;
  HttpHandlers h = simple();
  h.extra_path = [&](std::string_view path, std::string_view) -> std::optional<HttpResponse> {
    if (path != "/pma") return std::nullopt;
    hold.enter();
    return HttpResponse{200, "text/plain; charset=utf-8", "pma\n"};
  };
  auto o = local(1);  // one scrape slot
  o.max_concurrent_other = 2;
  HttpServer s(o, h);
  auto a = std::async(std::launch::async, [&] { return status(get(s.port(), "/pma?target=1")); });
  auto b = std::async(std::launch::async, [&] { return status(get(s.port(), "/pma?target=2")); });
  hold.wait_inside(2);
  auto third = get(s.port(), "/pma?target=3");
  CHECK(status(third) == 503);
  CHECK(third.find("--web.max-concurrent-other-requests") != std::string::npos);
  CHECK(status(get(s.port(), "/metrics")) == 200);  // the scrape's one slot is free
  hold.release();
  CHECK(a.get() == 200);
  CHECK(b.get() == 200);
  CHECK(s.stats().too_many_other.load() == 1);
  CHECK(s.stats().too_many_scrapes.load() == 0);
}

TEST_CASE("http gate: what the first bytes of a connection make the gate do", "[http]") {
  using V = HeadVerdict;
  CHECK(classify_head("", false, 100) == V::kWait);
  CHECK(classify_head("G", false, 100) == V::kWait);
  CHECK(classify_head("GET /metrics HTTP/1.1\r\nHost: x\r\n", false, 100) == V::kWait);  // slowloris
  CHECK(classify_head("GET /metrics HTTP/1.1\r\nHost: x\r\n", false, 20) == V::kRelay);  // too long: civetweb refuses
  CHECK(classify_head("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", false, 100) == V::kRelay);
  CHECK(classify_head("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", false, 100) == V::kHealthzGet);
  CHECK(classify_head("HEAD /healthz?x=1 HTTP/1.0\n\n", false, 100) == V::kHealthzHead);
  CHECK(classify_head("GET /healthzz HTTP/1.1\r\n\r\n", false, 100) == V::kRelay);
  CHECK(classify_head("POST /healthz HTTP/1.1\r\n\r\n", false, 100) == V::kRelay);
  CHECK(classify_head("GET /healthz HTTP/1.1\r\ncontent-LENGTH: 1\r\n\r\n", false, 100) == V::kRelay);  // a body
  CHECK(classify_head("GET /healthz HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n", false, 100) == V::kRelay);  // pipelined
  // TLS: the whole first record (5-byte header + its length), whatever it holds.
  CHECK(classify_head(std::string_view("\x16\x03\x01\x00\x05hell", 9), true, 100) == V::kWait);
  CHECK(classify_head(std::string_view("\x16\x03\x01\x00\x05hello", 10), true, 100) == V::kRelay);
  CHECK(classify_head("GET /healthz HTTP/1.1\r\n\r\n", true, 100) == V::kRelay);  // not TLS: civetweb refuses it
}
