#include "sources/netlink/rdma_client.h"

#include <cerrno>

namespace rdma::netlink {

std::unique_ptr<Client> Client::open(std::chrono::milliseconds receive_timeout, int& err) {
  std::unique_ptr<Client> c(new Client(receive_timeout));
  err = c->sock_.open();
  if (err != 0) return nullptr;
  return c;
}

int Client::transact(std::vector<std::uint8_t> request, Decoded& out) {
  bool malformed = false;
  int kernel_error = 0;
  const int err = sock_.transact(std::move(request), [&](const Message& m) {
    Decoded one = decode_messages(m.bytes.data(), m.bytes.size());
    if (one.malformed) {
      malformed = true;
      return true;
    }
    for (auto& s : one.stats) out.stats.push_back(std::move(s));
    for (auto& d : one.devices) out.devices.push_back(std::move(d));
    for (auto& q : one.qps) out.qps.push_back(std::move(q));
    for (auto& r : one.resources) out.resources.push_back(std::move(r));
    kernel_error = one.error;
    return one.done;
  });
  if (err != 0) return err;
  return malformed ? EBADMSG : kernel_error;
}

int Client::refresh_devices() {
  Decoded d;
  const int err = transact(encode_dev_dump(0), d);
  if (err != 0) return err;
  index_.clear();
  for (auto& e : d.devices) index_[e.name] = e.index;
  return 0;
}

int Client::device_index(const std::string& device, bool refresh, std::uint32_t& index) {
  auto it = index_.find(device);
  if (it == index_.end() || refresh) {
    if (int err = refresh_devices(); err != 0) return err;
    it = index_.find(device);
    if (it == index_.end()) return ENODEV;
  }
  index = it->second;
  return 0;
}

int Client::device_request(const std::string& device, const Encoder& encode, const Answered& answered, Decoded& out) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::uint32_t index = 0;
    if (int err = device_index(device, attempt > 0, index); err != 0) return err;
    out = Decoded{};
    const int err = transact(encode(index), out);
    // A stale index (device re-created or renamed) answers EINVAL/ENODEV or another device.
    const bool stale = (err == EINVAL || err == ENODEV) || (err == 0 && !answered(out));
    if (stale && attempt == 0) continue;
    if (err != 0) return err;
    return answered(out) ? 0 : EBADMSG;
  }
  return EINVAL;
}

PortReply Client::read_port(const std::string& device, std::uint32_t port) {
  PortReply r;
  Decoded d;
  r.error = device_request(
      device, [port](std::uint32_t index) { return encode_stat_get(0, index, port); },
      [&](const Decoded& a) { return a.stats.size() == 1 && a.stats[0].dev_name == device && a.stats[0].port == port; },
      d);
  if (r.error == 0) r.counters = std::move(d.stats[0].counters);
  return r;
}

QpReply Client::read_qps(const std::string& device) {
  QpReply r;
  Decoded d;
  r.error = device_request(
      device, [](std::uint32_t index) { return encode_qp_dump(0, index); },
      [&](const Decoded& a) {
        // A device without QPs sends no RES_QP_GET message at all; every message sent must name it.
        for (const auto& m : a.qps)
          if (m.dev_name != device) return false;
        return true;
      },
      d);
  if (r.error == 0)
    for (auto& m : d.qps)
      for (auto& q : m.qps) r.qps.push_back(std::move(q));
  return r;
}

ResourceReply Client::read_resources() {
  ResourceReply r;
  Decoded d;
  r.error = transact(encode_res_dump(0), d);
  if (r.error == 0) r.devices = std::move(d.resources);
  return r;
}

}  // namespace rdma::netlink
