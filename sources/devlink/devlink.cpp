#include "sources/devlink/devlink.h"

#include <linux/devlink.h>
#include <linux/genetlink.h>

#include <cerrno>

#include "sources/netlink/genetlink.h"

namespace rdma::devlink {
namespace {

using netlink::Bytes;
using netlink::Message;

// enum devlink_health_reporter_state (include/net/devlink.h: not in the UAPI headers).
constexpr std::uint8_t kReporterHealthy = 0;

template <class T>
bool fixed(Bytes v, T& out) {
  return v.size() == sizeof(T) && netlink::read_value(v, out);
}

// The handle attributes every devlink message starts with; false on a bad port index.
bool handle_attr(std::uint16_t type, Bytes v, Handle& h, std::optional<std::uint32_t>* port) {
  switch (type) {
    case DEVLINK_ATTR_BUS_NAME: h.bus = netlink::read_string(v); return true;
    case DEVLINK_ATTR_DEV_NAME: h.device = netlink::read_string(v); return true;
    case DEVLINK_ATTR_PORT_INDEX:
      if (port) {
        std::uint32_t p = 0;
        if (!fixed(v, p)) return false;
        *port = p;
      }
      return true;
    default: return true;
  }
}

bool decode_versions(Bytes v, std::vector<Version>& out) {
  Version ver;
  const bool ok = netlink::for_each_attr(v, [&](std::uint16_t t, Bytes s) {
    if (t == DEVLINK_ATTR_INFO_VERSION_NAME) ver.name = netlink::read_string(s);
    else if (t == DEVLINK_ATTR_INFO_VERSION_VALUE) ver.value = netlink::read_string(s);
  });
  if (!ok || ver.name.empty()) return false;
  out.push_back(std::move(ver));
  return true;
}

// Walks a dump: each message to `decode` until NLMSG_DONE; an NLMSG_ERROR is its errno.
template <class T, class Decode>
Result<std::vector<T>> walk_dump(Bytes bytes, Decode decode) {
  using R = Result<std::vector<T>>;
  std::vector<T> out;
  ReadError error = ReadError::kNone;
  int sys = 0;
  bool done = false;
  const bool whole = netlink::for_each_message(bytes, [&](const Message& m) {
    if (done || error != ReadError::kNone) return;
    if (m.header.nlmsg_type == NLMSG_DONE) {
      done = true;
      return;
    }
    if (m.header.nlmsg_type == NLMSG_ERROR) {
      const auto e = netlink::error_code(m);
      if (!e) error = ReadError::kMalformed;
      else if (*e != 0) { error = classify_errno(*e); sys = *e; }
      done = true;
      return;
    }
    auto one = decode(m);
    if (!one) { error = one.error; return; }
    if (out.size() < kMaxDumpEntries) out.push_back(std::move(one.value));
  });
  if (error != ReadError::kNone) return R::failure(error, sys);
  if (!whole) return R::failure(ReadError::kMalformed);
  return R::success(std::move(out));
}

}  // namespace

bool DeviceInfo::update_pending() const {
  for (const auto& s : stored)
    for (const auto& r : running)
      if (s.name == r.name && s.value != r.value) return true;
  return false;
}

Result<HealthReporter> decode_health_reporter(const Message& m) {
  using R = Result<HealthReporter>;
  HealthReporter r;
  bool ok_nested = true, have_reporter = false;
  const bool ok = netlink::for_each_attr(m, sizeof(genlmsghdr), [&](std::uint16_t type, Bytes v) {
    if (type != DEVLINK_ATTR_HEALTH_REPORTER) {
      if (!handle_attr(type, v, r.handle, &r.port)) ok_nested = false;
      return;
    }
    have_reporter = true;
    const bool walk = netlink::for_each_attr(v, [&](std::uint16_t t, Bytes s) {
      std::uint8_t u8 = 0;
      std::uint64_t u64 = 0;
      switch (t) {
        case DEVLINK_ATTR_HEALTH_REPORTER_NAME: r.name = netlink::read_string(s); break;
        case DEVLINK_ATTR_HEALTH_REPORTER_STATE:
          if (!fixed(s, u8)) ok_nested = false;
          r.healthy = u8 == kReporterHealthy;
          break;
        case DEVLINK_ATTR_HEALTH_REPORTER_ERR_COUNT:
          if (!fixed(s, u64)) ok_nested = false;
          r.error_count = u64;
          break;
        case DEVLINK_ATTR_HEALTH_REPORTER_RECOVER_COUNT:
          if (!fixed(s, u64)) ok_nested = false;
          r.recover_count = u64;
          break;
        case DEVLINK_ATTR_HEALTH_REPORTER_GRACEFUL_PERIOD:
          if (!fixed(s, u64)) ok_nested = false;
          else r.graceful_period_ms = u64;
          break;
        case DEVLINK_ATTR_HEALTH_REPORTER_AUTO_RECOVER:
          if (!fixed(s, u8)) ok_nested = false;
          else r.auto_recover = u8 != 0;
          break;
        default: break;
      }
    });
    if (!walk) ok_nested = false;
  });
  if (!ok || !ok_nested || !have_reporter || r.name.empty() || r.handle.bus.empty() || r.handle.device.empty())
    return R::failure(ReadError::kMalformed);
  return R::success(std::move(r));
}

Result<DeviceInfo> decode_info(const Message& m) {
  using R = Result<DeviceInfo>;
  DeviceInfo info;
  bool ok_nested = true;
  const bool ok = netlink::for_each_attr(m, sizeof(genlmsghdr), [&](std::uint16_t type, Bytes v) {
    switch (type) {
      case DEVLINK_ATTR_INFO_DRIVER_NAME: info.driver = netlink::read_string(v); break;
      case DEVLINK_ATTR_INFO_SERIAL_NUMBER: info.serial = netlink::read_string(v); break;
      case DEVLINK_ATTR_INFO_VERSION_FIXED: ok_nested &= decode_versions(v, info.fixed); break;
      case DEVLINK_ATTR_INFO_VERSION_RUNNING: ok_nested &= decode_versions(v, info.running); break;
      case DEVLINK_ATTR_INFO_VERSION_STORED: ok_nested &= decode_versions(v, info.stored); break;
      default: handle_attr(type, v, info.handle, nullptr); break;
    }
  });
  // The kernel sends one nest per version; a device has a handful (bound what a reply may carry).
  constexpr std::size_t kMaxVersions = 64;
  if (!ok || !ok_nested || info.handle.bus.empty() || info.handle.device.empty() ||
      info.fixed.size() + info.running.size() + info.stored.size() > kMaxVersions)
    return R::failure(ReadError::kMalformed);
  return R::success(std::move(info));
}

Result<std::vector<HealthReporter>> decode_health_dump(Bytes bytes) {
  return walk_dump<HealthReporter>(bytes, decode_health_reporter);
}
Result<std::vector<DeviceInfo>> decode_info_dump(Bytes bytes) { return walk_dump<DeviceInfo>(bytes, decode_info); }

std::vector<std::uint8_t> build_dump(std::uint16_t family_id, std::uint8_t cmd) {
  auto req = netlink::build_genl_request(family_id, cmd, DEVLINK_GENL_VERSION, {});
  reinterpret_cast<nlmsghdr*>(req.data())->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  return req;
}

Client::Client(std::chrono::milliseconds receive_timeout) : client_(DEVLINK_GENL_NAME, receive_timeout) {}

namespace {
// Runs one dump on `sock`, collecting its messages' bytes (bounded) for the pure decoder.
Result<std::vector<std::uint8_t>> run_dump(netlink::Socket& sock, std::vector<std::uint8_t> request) {
  using R = Result<std::vector<std::uint8_t>>;
  constexpr std::size_t kMaxDumpBytes = 4u << 20;
  std::vector<std::uint8_t> all;
  bool overflow = false;
  const int err = sock.transact(std::move(request), [&](const Message& m) {
    if (all.size() + netlink::align4(m.bytes.size()) <= kMaxDumpBytes) {
      all.insert(all.end(), m.bytes.begin(), m.bytes.end());
      all.resize(netlink::align4(all.size()));
    } else {
      overflow = true;
    }
    return m.header.nlmsg_type == NLMSG_DONE || m.header.nlmsg_type == NLMSG_ERROR;
  });
  if (err != 0) return R::failure(err == EBADMSG ? ReadError::kMalformed : classify_errno(err), err);
  (void)overflow;  // the entries past the bound are dropped, as kMaxDumpEntries does
  return R::success(std::move(all));
}
}  // namespace

Result<std::vector<HealthReporter>> Client::health_reporters() {
  using R = Result<std::vector<HealthReporter>>;
  auto id = client_.family();
  if (!id) return R::failure(id.error, id.sys_errno);
  auto bytes = run_dump(client_.socket(), build_dump(id.value, DEVLINK_CMD_HEALTH_REPORTER_GET));
  if (!bytes) return R::failure(bytes.error, bytes.sys_errno);
  return decode_health_dump(bytes.value);
}

Result<std::vector<DeviceInfo>> Client::infos() {
  using R = Result<std::vector<DeviceInfo>>;
  auto id = client_.family();
  if (!id) return R::failure(id.error, id.sys_errno);
  auto bytes = run_dump(client_.socket(), build_dump(id.value, DEVLINK_CMD_INFO_GET));
  if (!bytes) return R::failure(bytes.error, bytes.sys_errno);
  return decode_info_dump(bytes.value);
}

}  // namespace rdma::devlink
