#include "collectors/prober/wire/handshake.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "exporter/tls/openssl_api.h"

namespace rdma::collectors::prober {
namespace {

constexpr std::uint8_t kMagic[4] = {'R', 'X', 'P', 'B'};
constexpr std::size_t kEndpointSize = 4 + 4 + 16 + 2 + 1 + 1 + 8 + 4 + 4;  // 44
constexpr std::size_t kChallengeSize = kNonceSize;
constexpr std::size_t kHelloSize = kNonceSize + 8 + kEndpointSize + kNameSize;
constexpr std::size_t kAcceptSize = kEndpointSize + kNameSize;
constexpr std::size_t kRejectSize = 2;
constexpr std::size_t kSessionHelloSize = kHelloSize + 1 + 4;
constexpr std::size_t kPortRequestSize = kNonceSize;
constexpr std::size_t kTargetedHelloSize = kHelloSize + kNameSize + 1 + 16;
constexpr std::size_t kMinPortTableSize = kNameSize + 1;  // a name and a port count of 0
static_assert(kHelloSize <= kMaxBody && kAcceptSize <= kMaxBody && kSessionHelloSize <= kMaxBody &&
              kTargetedHelloSize <= kMaxBody);

std::optional<std::size_t> body_size(std::uint8_t type) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::kChallenge: return kChallengeSize;
    case FrameType::kHello: return kHelloSize;
    case FrameType::kAccept: return kAcceptSize;
    case FrameType::kReject: return kRejectSize;
    case FrameType::kSessionHello: return kSessionHelloSize;
    case FrameType::kPortRequest: return kPortRequestSize;
    case FrameType::kPortTable: return kMaxPortTableBody;  // the bound; the one variable-length body
    case FrameType::kTargetedHello: return kTargetedHelloSize;
  }
  return std::nullopt;
}

bool variable_length(std::uint8_t type) { return type == static_cast<std::uint8_t>(FrameType::kPortTable); }

// Printable ASCII only: these strings end up in label values and log lines.
bool printable(std::span<const std::uint8_t> s) {
  return std::all_of(s.begin(), s.end(), [](std::uint8_t c) { return c >= 0x20 && c < 0x7f; });
}

class Writer {
 public:
  explicit Writer(std::vector<std::uint8_t>& out) : out_(out) {}
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v) { be(v, 2); }
  void u32(std::uint32_t v) { be(v, 4); }
  void u64(std::uint64_t v) { be(v, 8); }
  void bytes(std::span<const std::uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void name(const std::string& s) {
    std::array<std::uint8_t, kNameSize> buf{};
    std::memcpy(buf.data(), s.data(), std::min(s.size(), kNameSize));
    bytes(buf);
  }
  // u8 length, then the bytes, cut to kMaxTableString.
  void str(const std::string& s) {
    const auto n = std::min(s.size(), kMaxTableString);
    u8(static_cast<std::uint8_t>(n));
    bytes(std::span(reinterpret_cast<const std::uint8_t*>(s.data()), n));
  }
  void table(const PortTable& t) {
    name(t.name);
    const auto ports = std::min(t.ports.size(), kMaxTablePorts);
    u8(static_cast<std::uint8_t>(ports));
    for (std::size_t i = 0; i < ports; ++i) {
      const auto& p = t.ports[i];
      str(p.device), u8(p.port), u8(static_cast<std::uint8_t>(p.link_layer)), u8(p.state), u16(p.lid), u64(p.subnet_prefix);
      str(p.rail);
      const auto gids = std::min(p.gids.size(), kMaxPortGids);
      u8(static_cast<std::uint8_t>(gids));
      for (std::size_t g = 0; g < gids; ++g)
        bytes(p.gids[g].gid), u8(static_cast<std::uint8_t>(p.gids[g].kind)), u8(p.gids[g].prefix_len), str(p.gids[g].netdev);
    }
  }
  void hello(const Hello& h) { bytes(h.nonce), u64(h.instance), endpoint(h.endpoint), name(h.name); }
  void endpoint(const Endpoint& e) {
    u32(e.qpn), u32(e.psn), bytes(e.gid), u16(e.lid), u8(e.mtu), u8(e.is_global), u64(e.addr), u32(e.rkey), u32(e.length);
  }

 private:
  void be(std::uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  std::vector<std::uint8_t>& out_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> in) : in_(in) {}
  std::uint8_t u8() { return in_[pos_++]; }
  std::uint16_t u16() { return static_cast<std::uint16_t>(be(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(be(4)); }
  std::uint64_t u64() { return be(8); }
  template <std::size_t N>
  std::array<std::uint8_t, N> array() {
    std::array<std::uint8_t, N> a{};
    std::memcpy(a.data(), in_.data() + pos_, N);
    pos_ += N;
    return a;
  }
  // NUL-padded; a NUL followed by anything but NULs, or a control character, is malformed.
  std::optional<std::string> name() {
    auto raw = in_.subspan(pos_, kNameSize);
    pos_ += kNameSize;
    std::size_t len = 0;
    while (len < raw.size() && raw[len] != 0) ++len;
    for (std::size_t i = len; i < raw.size(); ++i)
      if (raw[i] != 0) return std::nullopt;
    for (std::size_t i = 0; i < len; ++i)
      if (raw[i] < 0x20 || raw[i] == 0x7f) return std::nullopt;
    return std::string(reinterpret_cast<const char*>(raw.data()), len);
  }
  bool have(std::size_t n) const { return in_.size() - pos_ >= n; }
  bool done() const { return pos_ == in_.size(); }
  // u8 length, then that many printable bytes; nullopt past the end, over the bound, or unprintable.
  std::optional<std::string> str() {
    if (!have(1)) return std::nullopt;
    const std::size_t n = u8();
    if (n > kMaxTableString || !have(n)) return std::nullopt;
    auto raw = in_.subspan(pos_, n);
    pos_ += n;
    if (!printable(raw)) return std::nullopt;
    return std::string(reinterpret_cast<const char*>(raw.data()), n);
  }
  Endpoint endpoint() {
    Endpoint e;
    e.qpn = u32(), e.psn = u32(), e.gid = array<16>(), e.lid = u16(), e.mtu = u8(), e.is_global = u8(), e.addr = u64(),
    e.rkey = u32(), e.length = u32();
    return e;
  }

 private:
  std::uint64_t be(int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | in_[pos_++];
    return v;
  }
  std::span<const std::uint8_t> in_;
  std::size_t pos_ = 0;
};

bool valid_endpoint(const Endpoint& e) {
  // QPN is 24 bits and never 0 or 1 (special QPs); PSN is 24 bits; mtu is IBV_MTU_256..4096.
  return e.qpn > 1 && e.qpn < (1u << 24) && e.psn < (1u << 24) && e.mtu >= 1 && e.mtu <= 5 && e.is_global <= 1;
}

std::array<std::uint8_t, kMacSize> frame_mac(std::string_view secret, std::span<const std::uint8_t> header_and_body,
                                             std::span<const std::uint8_t> context) {
  std::vector<std::uint8_t> data(header_and_body.begin(), header_and_body.end());
  data.insert(data.end(), context.begin(), context.end());
  return hmac_sha256(secret, data);
}

}  // namespace

std::string_view reject_label(RejectReason r) {
  switch (r) {
    case RejectReason::kBusy: return "busy";
    case RejectReason::kSelf: return "self";
    case RejectReason::kNoPort: return "no_port";
    case RejectReason::kQpSetup: return "qp_setup";
    case RejectReason::kBadRequest: return "bad_request";
    case RejectReason::kNoSecret: return "no_secret";
  }
  return "unknown";
}

std::string_view decode_status_label(DecodeStatus s) {
  switch (s) {
    case DecodeStatus::kOk: return "ok";
    case DecodeStatus::kTruncated: return "truncated";
    case DecodeStatus::kBadMagic: return "bad_magic";
    case DecodeStatus::kBadVersion: return "bad_version";
    case DecodeStatus::kBadType: return "bad_type";
    case DecodeStatus::kBadLength: return "bad_length";
    case DecodeStatus::kBadField: return "bad_field";
    case DecodeStatus::kBadMac: return "bad_mac";
    case DecodeStatus::kTrailing: return "trailing_bytes";
  }
  return "unknown";
}

namespace {
std::optional<TablePort> read_table_port(Reader& r) {
  TablePort p;
  auto device = r.str();
  if (!device || device->empty() || !r.have(1 + 1 + 1 + 2 + 8)) return std::nullopt;
  p.device = std::move(*device);
  p.port = r.u8();
  const auto link = r.u8();
  p.state = r.u8();
  p.lid = r.u16();
  p.subnet_prefix = r.u64();
  if (p.port == 0 || link < 1 || link > 2 || p.state > 5) return std::nullopt;
  p.link_layer = static_cast<LinkLayer>(link);
  auto rail = r.str();
  if (!rail || !r.have(1)) return std::nullopt;
  p.rail = std::move(*rail);
  const std::size_t gids = r.u8();
  if (gids > kMaxPortGids) return std::nullopt;
  for (std::size_t g = 0; g < gids; ++g) {
    if (!r.have(16 + 1 + 1)) return std::nullopt;
    TableGid t;
    t.gid = r.array<16>();
    const auto kind = r.u8();
    t.prefix_len = r.u8();
    auto netdev = r.str();
    if (!netdev || kind < 1 || kind > 3 || t.prefix_len > 128) return std::nullopt;
    t.kind = static_cast<GidKind>(kind);
    t.netdev = std::move(*netdev);
    p.gids.push_back(std::move(t));
  }
  return p;
}

std::optional<PortTable> read_port_table(Reader& r) {
  PortTable t;
  auto name = r.name();
  if (!name) return std::nullopt;
  t.name = std::move(*name);
  const std::size_t ports = r.u8();
  if (ports > kMaxTablePorts) return std::nullopt;
  for (std::size_t i = 0; i < ports; ++i) {
    auto p = read_table_port(r);
    if (!p) return std::nullopt;
    t.ports.push_back(std::move(*p));
  }
  if (!r.done()) return std::nullopt;  // the counts must account for every byte of the body
  return t;
}

std::optional<Hello> read_hello(Reader& r) {
  Hello h;
  h.nonce = r.array<kNonceSize>();
  h.instance = r.u64();
  h.endpoint = r.endpoint();
  auto name = r.name();
  if (!name || !valid_endpoint(h.endpoint)) return std::nullopt;
  h.name = std::move(*name);
  return h;
}

// Checks the header alone; on success returns the body length.
DecodeStatus check_header(std::span<const std::uint8_t> b, std::size_t& body) {
  if (b.size() < kHeaderSize) return DecodeStatus::kTruncated;
  if (std::memcmp(b.data(), kMagic, 4) != 0) return DecodeStatus::kBadMagic;
  if (b[4] != kProtocolVersion) return DecodeStatus::kBadVersion;
  auto want = body_size(b[5]);
  if (!want) return DecodeStatus::kBadType;
  if (b[6] != 0 || b[7] != 0) return DecodeStatus::kBadField;
  std::uint32_t len = (std::uint32_t{b[8]} << 24) | (std::uint32_t{b[9]} << 16) | (std::uint32_t{b[10]} << 8) | b[11];
  if (variable_length(b[5]) ? (len < kMinPortTableSize || len > *want) : len != *want) return DecodeStatus::kBadLength;
  body = len;
  return DecodeStatus::kOk;
}
}  // namespace

std::optional<std::size_t> frame_size(std::span<const std::uint8_t> header) {
  std::size_t body = 0;
  if (check_header(header, body) != DecodeStatus::kOk) return std::nullopt;
  return kHeaderSize + body + kMacSize;
}

Decoded decode_frame(std::span<const std::uint8_t> b, std::string_view secret, std::span<const std::uint8_t> context) {
  std::size_t body = 0;
  if (auto st = check_header(b, body); st != DecodeStatus::kOk) return {st, std::nullopt};
  const std::size_t total = kHeaderSize + body + kMacSize;
  if (b.size() < total) return {DecodeStatus::kTruncated, std::nullopt};
  if (b.size() > total) return {DecodeStatus::kTrailing, std::nullopt};
  // The mac first: nothing of an unauthenticated body is interpreted.
  auto mac = frame_mac(secret, b.first(kHeaderSize + body), context);
  if (!equal_constant_time(mac, b.subspan(kHeaderSize + body, kMacSize))) return {DecodeStatus::kBadMac, std::nullopt};
  Reader r(b.subspan(kHeaderSize, body));
  switch (static_cast<FrameType>(b[5])) {
    case FrameType::kChallenge: return {DecodeStatus::kOk, Challenge{r.array<kNonceSize>()}};
    case FrameType::kHello: {
      auto h = read_hello(r);
      if (!h) return {DecodeStatus::kBadField, std::nullopt};
      return {DecodeStatus::kOk, std::move(*h)};
    }
    case FrameType::kSessionHello: {
      SessionHello sh;
      auto h = read_hello(r);
      const auto kind = r.u8();
      sh.buffer_bytes = r.u32();
      if (!h || kind < 1 || kind > 2 || sh.buffer_bytes == 0 || sh.buffer_bytes > kMaxSessionBuffer)
        return {DecodeStatus::kBadField, std::nullopt};
      sh.hello = std::move(*h);
      sh.kind = static_cast<SessionKind>(kind);
      return {DecodeStatus::kOk, std::move(sh)};
    }
    case FrameType::kAccept: {
      Accept a;
      a.endpoint = r.endpoint();
      auto name = r.name();
      if (!name || !valid_endpoint(a.endpoint) || a.endpoint.length == 0) return {DecodeStatus::kBadField, std::nullopt};
      a.name = std::move(*name);
      return {DecodeStatus::kOk, std::move(a)};
    }
    case FrameType::kTargetedHello: {
      TargetedHello th;
      auto h = read_hello(r);
      auto device = r.name();
      th.port = r.u8();
      th.gid = r.array<16>();
      if (!h || !device || device->empty() || th.port == 0) return {DecodeStatus::kBadField, std::nullopt};
      th.hello = std::move(*h);
      th.device = std::move(*device);
      return {DecodeStatus::kOk, std::move(th)};
    }
    case FrameType::kPortRequest: return {DecodeStatus::kOk, PortRequest{r.array<kNonceSize>()}};
    case FrameType::kPortTable: {
      auto t = read_port_table(r);
      if (!t) return {DecodeStatus::kBadField, std::nullopt};
      return {DecodeStatus::kOk, std::move(*t)};
    }
    case FrameType::kReject: {
      auto reason = r.u16();
      if (reason < 1 || reason > 6) return {DecodeStatus::kBadField, std::nullopt};
      return {DecodeStatus::kOk, Reject{static_cast<RejectReason>(reason)}};
    }
  }
  return {DecodeStatus::kBadType, std::nullopt};
}

std::vector<std::uint8_t> encode_frame(const Message& m, std::string_view secret, std::span<const std::uint8_t> context) {
  std::vector<std::uint8_t> out;
  out.reserve(kHeaderSize + kMaxBody + kMacSize);
  Writer w(out);
  w.bytes(kMagic);
  w.u8(kProtocolVersion);
  w.u8(static_cast<std::uint8_t>(std::visit(
      [](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Challenge>) return FrameType::kChallenge;
        else if constexpr (std::is_same_v<T, Hello>) return FrameType::kHello;
        else if constexpr (std::is_same_v<T, Accept>) return FrameType::kAccept;
        else if constexpr (std::is_same_v<T, SessionHello>) return FrameType::kSessionHello;
        else if constexpr (std::is_same_v<T, PortRequest>) return FrameType::kPortRequest;
        else if constexpr (std::is_same_v<T, PortTable>) return FrameType::kPortTable;
        else if constexpr (std::is_same_v<T, TargetedHello>) return FrameType::kTargetedHello;
        else return FrameType::kReject;
      },
      m)));
  w.u16(0);
  w.u32(0);  // patched below
  std::visit(
      [&w](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Challenge>) w.bytes(v.nonce);
        else if constexpr (std::is_same_v<T, Hello>) w.hello(v);
        else if constexpr (std::is_same_v<T, SessionHello>) w.hello(v.hello), w.u8(static_cast<std::uint8_t>(v.kind)), w.u32(v.buffer_bytes);
        else if constexpr (std::is_same_v<T, Accept>) w.endpoint(v.endpoint), w.name(v.name);
        else if constexpr (std::is_same_v<T, PortRequest>) w.bytes(v.nonce);
        else if constexpr (std::is_same_v<T, PortTable>) w.table(v);
        else if constexpr (std::is_same_v<T, TargetedHello>) w.hello(v.hello), w.name(v.device), w.u8(v.port), w.bytes(v.gid);
        else w.u16(static_cast<std::uint16_t>(v.reason));
      },
      m);
  const std::uint32_t len = static_cast<std::uint32_t>(out.size() - kHeaderSize);
  for (int i = 0; i < 4; ++i) out[8 + i] = static_cast<std::uint8_t>(len >> (8 * (3 - i)));
  auto mac = frame_mac(secret, out, context);
  out.insert(out.end(), mac.begin(), mac.end());
  return out;
}

std::array<std::uint8_t, kMacSize> hmac_sha256(std::string_view key, std::span<const std::uint8_t> data) {
  std::array<std::uint8_t, kMacSize> out{};
  tls::openssl().hmac_sha256(reinterpret_cast<const std::uint8_t*>(key.data()), key.size(), data.data(), data.size(),
                             out.data());
  return out;
}

bool equal_constant_time(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
  return a.size() == b.size() && tls::openssl().equal_constant_time(a.data(), b.data(), a.size());
}

Nonce random_nonce() {
  Nonce n{};
  if (!tls::openssl().random_bytes(n.data(), n.size())) {
    std::random_device rd;
    for (auto& x : n) x = static_cast<std::uint8_t>(rd());
  }
  return n;
}

}  // namespace rdma::collectors::prober
