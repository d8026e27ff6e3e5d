// Out-of-band handshake of the prober (TCP, before any queue pair exists). Versioned,
// length-checked frames; every frame carries an HMAC-SHA256 over header, body and the nonce of
// the other side (empty key when no shared secret is configured, which still catches
// corruption). decode_frame() is a pure function on bytes: unit-tested and fuzzable.
//
//   offset 0  magic "RXPB"        4 bytes
//          4  version (1)         u8
//          5  type                u8   1 challenge, 2 hello, 3 accept, 4 reject, 5 session hello,
//                                      6 port request, 7 port table, 8 targeted hello
//          6  flags (0)           u16
//          8  body length         u32 big endian, must equal the fixed size of the type (a port
//                                      table: at least its count byte, at most kMaxPortTableBody)
//         12  body
//   12 + len  mac                 32 bytes HMAC-SHA256(secret, header | body | peer nonce)
//
// Sequence: responder -> challenge{server nonce}; prober -> hello{client nonce, QP} (mac over the
// server nonce); responder -> accept{QP} or reject{reason} (mac over the client nonce). A hello
// replayed on another connection fails its mac because the server nonce differs.
//
// Type 5 (session hello, added in version 1 as a new type: an older responder finds no size for
// it, answers nothing and closes) asks for one queue pair of an on-demand probe (/probe): a hello
// plus the test kind and the size of the buffer the prober will write into. The responder
// registers a buffer of that size for this connection only, answers accept or reject, and frees
// both when the TCP connection closes. A responder without a shared secret refuses sessions
// (reject no_secret): a bandwidth test competes with production traffic.
//
// Types 6 and 7 (port table, added in version 1 as new types like type 5): after the challenge
// the prober may send a port request{client nonce} (mac over the server nonce); the responder
// answers with its port table (mac over the client nonce): every port with its device, number,
// link layer, state, LID, subnet prefix, rail label and GIDs (each with its type, netdev and
// prefix length), from which the prober pairs its own ports rail by rail. The table is the one
// variable-length body: counts are bounded (kMaxTablePorts, kMaxPortGids) and every string is
// length-prefixed and bounded, so a table is never larger than kMaxPortTableBody. An older
// responder finds no size for type 6, answers nothing and closes: the prober then pairs as
// before the table existed.
//
// Type 8 (targeted hello) follows a port table, on a connection of its own: a hello that names
// the responder's port (device and number) the prober paired with, and the GID of that port to
// answer from. The responder answers from exactly that port, or rejects no_port when it is not
// ACTIVE or lacks the GID; it never falls back to another rail.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace rdma::collectors::prober {

inline constexpr std::uint8_t kProtocolVersion = 1;
inline constexpr std::size_t kHeaderSize = 12;
inline constexpr std::size_t kMacSize = 32;
inline constexpr std::size_t kNonceSize = 16;
inline constexpr std::size_t kNameSize = 64;
inline constexpr std::size_t kMaxBody = 256;  // largest fixed body, checked before reading it

using Nonce = std::array<std::uint8_t, kNonceSize>;
using Gid = std::array<std::uint8_t, 16>;

enum class FrameType : std::uint8_t {
  kChallenge = 1, kHello = 2, kAccept = 3, kReject = 4, kSessionHello = 5, kPortRequest = 6, kPortTable = 7,
  kTargetedHello = 8,
};

// Largest buffer a session hello may ask for (a responder may allow less).
inline constexpr std::uint32_t kMaxSessionBuffer = 64u << 20;

// One side's queue pair, as the other side needs it to reach it and to RDMA WRITE into it.
struct Endpoint {
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;
  Gid gid{};
  std::uint16_t lid = 0;
  std::uint8_t mtu = 0;        // enum ibv_mtu
  std::uint8_t is_global = 0;  // 1: route with the GID (RoCE, or IB across subnets)
  std::uint64_t addr = 0;      // memory region to write into (accept) / unused (hello)
  std::uint32_t rkey = 0;
  std::uint32_t length = 0;    // bytes writable at addr
  bool operator==(const Endpoint&) const = default;
};

struct Challenge {
  Nonce nonce{};
  bool operator==(const Challenge&) const = default;
};
struct Hello {
  Nonce nonce{};
  std::uint64_t instance = 0;  // random per process: a responder rejects its own prober (self)
  Endpoint endpoint;
  std::string name;            // node name, at most kNameSize bytes
  bool operator==(const Hello&) const = default;
};
enum class SessionKind : std::uint8_t { kWriteBandwidth = 1, kWriteLatency = 2 };
struct SessionHello {
  Hello hello;          // endpoint.length unused, as in a hello
  SessionKind kind = SessionKind::kWriteBandwidth;
  std::uint32_t buffer_bytes = 0;  // 1..kMaxSessionBuffer: what the prober writes at most
  bool operator==(const SessionHello&) const = default;
};
struct Accept {
  Endpoint endpoint;
  std::string name;
  bool operator==(const Accept&) const = default;
};
enum class RejectReason : std::uint16_t {
  kBusy = 1, kSelf = 2, kNoPort = 3, kQpSetup = 4, kBadRequest = 5,
  kNoSecret = 6,  // a session hello to a responder without a shared secret
};
struct Reject {
  RejectReason reason = RejectReason::kBusy;
  bool operator==(const Reject&) const = default;
};
std::string_view reject_label(RejectReason r);  // "busy", "self", ...

// Bounds of a port table: a GPU node has 8-16 RDMA ports, a RoCE port a handful of GIDs per
// netdev (IPv4, IPv6 global, link-local, v1 and v2 of each). Longer strings are cut to their
// bound on encode; a table over a bound is refused on decode.
inline constexpr std::size_t kMaxTablePorts = 32;
inline constexpr std::size_t kMaxPortGids = 16;
inline constexpr std::size_t kMaxTableString = 64;  // device, netdev, rail label

enum class LinkLayer : std::uint8_t { kInfiniBand = 1, kEthernet = 2 };
enum class GidKind : std::uint8_t { kIb = 1, kRoceV1 = 2, kRoceV2 = 3 };

struct TableGid {
  Gid gid{};
  GidKind kind = GidKind::kRoceV2;
  std::uint8_t prefix_len = 0;  // of the netdev address the GID carries (0..128; 0 when none)
  std::string netdev;           // empty on InfiniBand
  bool operator==(const TableGid&) const = default;
};
struct TablePort {
  std::string device;
  std::uint8_t port = 1;             // 1..255
  LinkLayer link_layer = LinkLayer::kEthernet;
  std::uint8_t state = 0;            // enum ibv_port_state, 0..5
  std::uint16_t lid = 0;
  std::uint64_t subnet_prefix = 0;   // host order
  std::string rail;                  // the responder's rail label, empty when it has none
  std::vector<TableGid> gids;        // at most kMaxPortGids
  bool operator==(const TablePort&) const = default;
};
struct TargetedHello {
  Hello hello;
  std::string device;     // the responder's device, 1..kNameSize printable bytes
  std::uint8_t port = 1;  // 1..255
  Gid gid{};              // the GID of that port the responder answers from (InfiniBand: its GID 0)
  bool operator==(const TargetedHello&) const = default;
};
struct PortRequest {
  Nonce nonce{};  // the client nonce the table's mac covers
  bool operator==(const PortRequest&) const = default;
};
struct PortTable {
  std::string name;              // node name, at most kNameSize bytes
  std::vector<TablePort> ports;  // at most kMaxTablePorts
  bool operator==(const PortTable&) const = default;
};
inline constexpr std::size_t kMaxPortTableBody =
    1 + kNameSize + kMaxTablePorts * (1 + kMaxTableString + 1 + 1 + 1 + 2 + 8 + 1 + kMaxTableString + 1 +
                                      kMaxPortGids * (16 + 1 + 1 + 1 + kMaxTableString));

using Message = std::variant<Challenge, Hello, Accept, Reject, SessionHello, PortRequest, PortTable, TargetedHello>;

enum class DecodeStatus : std::uint8_t {
  kOk,
  kTruncated,    // fewer bytes than the header or the header's length announces
  kBadMagic,
  kBadVersion,
  kBadType,
  kBadLength,    // body length is not the fixed size of the type (or a table's length bounds)
  kBadField,     // e.g. a name with a NUL in the middle, a zero QPN, a count over its bound
  kBadMac,       // wrong secret, wrong nonce, or corrupted
  kTrailing,     // bytes after the mac
};
std::string_view decode_status_label(DecodeStatus s);  // "ok", "truncated", ...

struct Decoded {
  DecodeStatus status = DecodeStatus::kTruncated;
  std::optional<Message> message;
};

// Size of the whole frame announced by a header, or nullopt when the header is invalid (bad
// magic, version, type or length): a stream reader reads kHeaderSize bytes, then this many.
std::optional<std::size_t> frame_size(std::span<const std::uint8_t> header);

// Decodes exactly one frame. `context` is the nonce the mac must cover (empty for a challenge).
Decoded decode_frame(std::span<const std::uint8_t> bytes, std::string_view secret, std::span<const std::uint8_t> context);

std::vector<std::uint8_t> encode_frame(const Message& m, std::string_view secret, std::span<const std::uint8_t> context);

// HMAC-SHA256 and a constant-time comparison (OpenSSL, through exporter/tls/openssl_api.h).
std::array<std::uint8_t, kMacSize> hmac_sha256(std::string_view key, std::span<const std::uint8_t> data);
bool equal_constant_time(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b);
Nonce random_nonce();

}  // namespace rdma::collectors::prober
