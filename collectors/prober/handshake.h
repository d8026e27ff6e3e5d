// Out-of-band handshake of the prober (TCP, before any queue pair exists). Versioned,
// length-checked frames; every frame carries an HMAC-SHA256 over header, body and the nonce of
// the other side (empty key when no shared secret is configured, which still catches
// corruption). decode_frame() is a pure function on bytes: unit-tested and fuzzable.
//
//   offset 0  magic "RXPB"        4 bytes
//          4  version (1)         u8
//          5  type                u8   1 challenge, 2 hello, 3 accept, 4 reject, 5 session hello
//          6  flags (0)           u16
//          8  body length         u32 big endian, must equal the fixed size of the type
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

enum class FrameType : std::uint8_t { kChallenge = 1, kHello = 2, kAccept = 3, kReject = 4, kSessionHello = 5 };

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

using Message = std::variant<Challenge, Hello, Accept, Reject, SessionHello>;

enum class DecodeStatus : std::uint8_t {
  kOk,
  kTruncated,    // fewer bytes than the header or the header's length announces
  kBadMagic,
  kBadVersion,
  kBadType,
  kBadLength,    // body length is not the fixed size of the type
  kBadField,     // e.g. a name with a NUL in the middle, a zero QPN
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
