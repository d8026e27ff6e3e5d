// Netlink requests, and walking netlink bytes: the messages of one recv() buffer and the
// attributes of a message or of a nested attribute. Every length is checked against the bytes it
// claims to cover, and nothing is read in place (fields are copied out), so any byte string, at
// any alignment, is safe: these walkers serve the pure decoders (RDMA nldev, genetlink, dcbnl)
// and the socket's receive loop.
// libmnl builds the requests and runs the socket; its parsers read headers in place (they need
// aligned bytes) and compare lengths as signed int (a length >= 2^31 would pass), so they are not
// used on received bytes.
#pragma once

#include <linux/netlink.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sources/common/result.h"

namespace rdma::netlink {

using Bytes = std::span<const std::uint8_t>;

constexpr std::size_t align4(std::size_t n) { return (n + 3) & ~std::size_t{3}; }

// A fixed-size value from the start of `p`; false (and `out` untouched) when `p` is shorter.
template <class T>
bool read_value(Bytes p, T& out) {
  if (p.size() < sizeof(T)) return false;
  std::memcpy(&out, p.data(), sizeof(T));
  return true;
}

// NLA_NUL_STRING: up to the first NUL; a string without NUL is taken whole.
std::string read_string(Bytes p);

// One message of a buffer: its header (a copy) and all of its bytes, header included.
struct Message {
  nlmsghdr header{};
  Bytes bytes;
  Bytes payload() const { return bytes.subspan(sizeof(nlmsghdr)); }
};

// Calls f(const Message&) for each message of `buf`; false when a message's length is shorter
// than its header or runs past the buffer, or bytes are left that are not a whole message (f has
// then been called for the messages before).
template <class F>
bool for_each_message(Bytes buf, F&& f) {
  std::size_t off = 0;
  while (off < buf.size()) {
    Message m;
    if (!read_value(buf.subspan(off), m.header)) return false;
    const std::size_t len = m.header.nlmsg_len;
    if (len < sizeof(nlmsghdr) || len > buf.size() - off) return false;
    m.bytes = buf.subspan(off, len);
    f(static_cast<const Message&>(m));
    off += std::min(align4(len), buf.size() - off);  // the last message may lack its padding
  }
  return true;
}

// Calls f(type, payload) for each attribute of `p` (type without NLA_F_NESTED and
// NLA_F_NET_BYTEORDER); false when an attribute overruns `p`. Trailing bytes shorter than an
// attribute header are padding.
template <class F>
bool for_each_attr(Bytes p, F&& f) {
  std::size_t off = 0;
  while (off + sizeof(nlattr) <= p.size()) {
    nlattr a;
    read_value(p.subspan(off), a);
    if (a.nla_len < sizeof(nlattr) || a.nla_len > p.size() - off) return false;
    f(static_cast<std::uint16_t>(a.nla_type & NLA_TYPE_MASK), p.subspan(off + sizeof(nlattr), a.nla_len - sizeof(nlattr)));
    off += align4(a.nla_len);
  }
  return true;
}

// The attributes of a message after its family header (genlmsghdr, dcbmsg; 0 for RDMA nldev),
// which is aligned to 4 bytes; false when the message is shorter than the family header.
template <class F>
bool for_each_attr(const Message& m, std::size_t family_header, F&& f) {
  const Bytes payload = m.payload();
  if (payload.size() < align4(family_header)) return false;
  return for_each_attr(payload.subspan(align4(family_header)), std::forward<F>(f));
}

// A request (NLM_F_REQUEST) of `type`: the family header (genlmsghdr, dcbmsg; `header_len`
// bytes from `header`), then what `attributes` puts with libmnl's mnl_attr_put_*. Tests build
// kernel-like replies with it too (the decoders do not look at the flags).
std::vector<std::uint8_t> build_request(std::uint16_t type, const void* header, std::size_t header_len,
                                        const std::function<void(nlmsghdr*)>& attributes = {});

// For an NLMSG_ERROR message: the errno it carries, 0 for an ACK; nullopt when the payload is
// shorter than the code or the code is not -errno as the kernel writes it (errno <= 4095,
// MAX_ERRNO; INT_MIN would overflow the negation).
std::optional<int> error_code(const Message& m);

// The first message of `bytes`, the answer to a request that expects one message back (a GET
// without NLM_F_DUMP): an NLMSG_ERROR is its errno (EOPNOTSUPP -> kNotSupported), an ACK or
// bytes that do not start with a whole message are kMalformed.
Result<Message> single_reply(Bytes bytes);

}  // namespace rdma::netlink
