#include "sources/verbs/device_events.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

namespace rdma::verbs {

std::string_view async_event_label(AsyncEvent e) {
  static constexpr std::array<std::string_view, kAsyncEvents> kLabels{
      "port_err", "port_active", "lid_change", "sm_change", "client_reregister", "gid_change", "pkey_change", "device_fatal"};
  return kLabels[static_cast<std::size_t>(e)];
}

std::optional<AsyncEvent> classify_async_event(int type) {
  switch (type) {
    case IBV_EVENT_PORT_ERR: return AsyncEvent::kPortErr;
    case IBV_EVENT_PORT_ACTIVE: return AsyncEvent::kPortActive;
    case IBV_EVENT_LID_CHANGE: return AsyncEvent::kLidChange;
    case IBV_EVENT_SM_CHANGE: return AsyncEvent::kSmChange;
    case IBV_EVENT_CLIENT_REREGISTER: return AsyncEvent::kClientReregister;
    case IBV_EVENT_GID_CHANGE: return AsyncEvent::kGidChange;
    case IBV_EVENT_PKEY_CHANGE: return AsyncEvent::kPkeyChange;
    case IBV_EVENT_DEVICE_FATAL: return AsyncEvent::kDeviceFatal;
    default: return std::nullopt;
  }
}

// ---- PortEventBook

void PortEventBook::seen(const std::string& device, std::uint32_t port, bool active, Clock::time_point now) {
  auto& ports = devices_[device].ports;
  if (ports.count(port)) return;
  Port& p = ports[port];
  p.s.active = active;
  p.since = now;
}

void PortEventBook::event(const std::string& device, std::uint32_t port, AsyncEvent e) {
  Device& d = devices_[device];
  if (e == AsyncEvent::kDeviceFatal) {
    ++d.device_fatal;
    return;
  }
  auto it = d.ports.find(port);
  if (it == d.ports.end()) return;  // a port number the device did not list: not ours to invent
  ++it->second.s.events[static_cast<std::size_t>(e)];
}

bool PortEventBook::state(const std::string& device, std::uint32_t port, bool active, Clock::time_point now,
                          std::chrono::system_clock::time_point wall) {
  auto d = devices_.find(device);
  if (d == devices_.end()) return false;
  auto it = d->second.ports.find(port);
  if (it == d->second.ports.end()) return false;
  Port& p = it->second;
  if (p.s.active == active) return false;
  if (!p.s.active) p.s.not_active_seconds += std::chrono::duration<double>(now - p.since).count();
  p.s.active = active;
  p.since = now;
  ++p.s.state_changes;
  p.s.last_change = wall;
  return true;
}

void PortEventBook::forget(const std::string& device) { devices_.erase(device); }

EventSnapshot PortEventBook::snapshot(Clock::time_point now) const {
  EventSnapshot out;
  for (const auto& [name, d] : devices_) {
    DeviceEventState& s = out.devices[name];
    s.device_fatal = d.device_fatal;
    for (const auto& [num, p] : d.ports) {
      PortEventState ps = p.s;
      if (!ps.active) ps.not_active_seconds += std::chrono::duration<double>(now - p.since).count();
      s.ports.emplace(num, ps);
    }
  }
  return out;
}

// ---- DeviceEvents

DeviceEvents::DeviceEvents(std::chrono::milliseconds rescan_every) : rescan_every_(rescan_every) {
  stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd_ < 0) return;  // running stays false: the snapshot says so
  running_ = true;
  rescan();  // before the thread: the first scrape and context() find the devices open
  thread_ = std::thread([this] { run(); });
}

DeviceEvents::~DeviceEvents() {
  if (thread_.joinable()) {
    std::uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

EventSnapshot DeviceEvents::snapshot() const {
  std::lock_guard lock(mu_);
  EventSnapshot out = book_.snapshot(PortEventBook::Clock::now());
  out.unopenable = unopenable_;
  out.running = running_;
  return out;
}

std::shared_ptr<ibv_context> DeviceEvents::context(const std::string& device) {
  std::lock_guard lock(mu_);
  auto it = devices_.find(device);
  return it == devices_.end() ? nullptr : it->second.ctx;
}

std::unique_ptr<DeviceEvents::Subscription> DeviceEvents::subscribe(Listener listener) {
  std::lock_guard lock(mu_);
  const std::uint64_t id = next_listener_++;
  listeners_.emplace(id, std::move(listener));
  return std::make_unique<Subscription>(*this, id);
}

DeviceEvents::Subscription::~Subscription() {
  std::lock_guard lock(owner_.mu_);  // listeners run under it: none is running once this returns
  owner_.listeners_.erase(id_);
}

void DeviceEvents::notify(const std::string& device) {
  for (const auto& [id, l] : listeners_) l(PortChange{device});
}

void DeviceEvents::run() {
  auto next_scan = std::chrono::steady_clock::now() + rescan_every_;
  std::vector<pollfd> fds;
  std::vector<std::string> names;
  while (true) {
    if (std::chrono::steady_clock::now() >= next_scan) {
      rescan();
      next_scan = std::chrono::steady_clock::now() + rescan_every_;
    }
    fds.assign(1, pollfd{stop_fd_, POLLIN, 0});
    names.clear();
    {
      std::lock_guard lock(mu_);
      for (const auto& [name, d] : devices_) {
        fds.push_back(pollfd{d.ctx->async_fd, POLLIN, 0});
        names.push_back(name);
      }
    }
    ++passes_;
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_scan - std::chrono::steady_clock::now());
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<std::int64_t>(0, wait.count())));
    if (n < 0 && errno != EINTR) {
      running_ = false;
      return;
    }
    if (fds[0].revents) return;
    std::lock_guard lock(mu_);
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto it = devices_.find(names[i - 1]);
      if (it != devices_.end()) drain(it->first, it->second);
    }
  }
}

// Reads every queued event (the fd is non-blocking), counts it and, when one may have changed
// a port, queries the ports and tells the subscribers.
void DeviceEvents::drain(const std::string& name, Open& d) {
  ibv_async_event ae{};
  bool ports = false;
  for (int guard = 0; guard < 4096 && ibv_get_async_event(d.ctx.get(), &ae) == 0; ++guard) {
    if (auto e = classify_async_event(ae.event_type)) {
      book_.event(name, *e == AsyncEvent::kDeviceFatal ? 0 : ae.element.port_num, *e);
      ports |= *e != AsyncEvent::kDeviceFatal && *e != AsyncEvent::kPkeyChange;
    }
    ibv_ack_async_event(&ae);
  }
  if (ports) {
    query_ports(name, d, false);
    notify(name);
  }
}

bool DeviceEvents::query_ports(const std::string& name, Open& d, bool first) {
  bool changed = false;
  const auto now = PortEventBook::Clock::now();
  const auto wall = std::chrono::system_clock::now();
  for (std::uint32_t p = 1; p <= d.ports; ++p) {
    ibv_port_attr attr{};
    if (ibv_query_port(d.ctx.get(), static_cast<std::uint8_t>(p), &attr) != 0) continue;
    const bool active = attr.state == IBV_PORT_ACTIVE;
    if (first) book_.seen(name, p, active, now);
    else changed |= book_.state(name, p, active, now, wall);
  }
  return changed;
}

// Lists the devices: opens the new ones, lets go of the vanished, and queries every port (a
// change an event did not announce is still timed, at the rescan's resolution).
void DeviceEvents::rescan() {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  std::set<std::string, std::less<>> listed;
  std::lock_guard lock(mu_);
  for (int i = 0; list && i < count; ++i) {
    const std::string name = ibv_get_device_name(list[i]);
    listed.insert(name);
    if (devices_.count(name)) continue;
    ibv_context* raw = ibv_open_device(list[i]);
    ibv_device_attr attr{};
    if (!raw || ibv_query_device(raw, &attr) != 0) {
      if (raw) ibv_close_device(raw);
      if (std::find(unopenable_.begin(), unopenable_.end(), name) == unopenable_.end() && unopenable_.size() < 1024)
        unopenable_.push_back(name);
      continue;
    }
    const int fl = fcntl(raw->async_fd, F_GETFL);
    fcntl(raw->async_fd, F_SETFL, fl | O_NONBLOCK);
    Open d{std::shared_ptr<ibv_context>(raw, [](ibv_context* c) { ibv_close_device(c); }), attr.phys_port_cnt};
    query_ports(name, d, true);
    devices_.emplace(name, std::move(d));
  }
  if (list) ibv_free_device_list(list);
  for (auto it = devices_.begin(); it != devices_.end();) {
    if (listed.count(it->first)) {
      // A change that no event announced (missed, or a driver that sends none) is still timed,
      // at the rescan's resolution, and told.
      if (query_ports(it->first, it->second, false)) notify(it->first);
      ++it;
      continue;
    }
    book_.forget(it->first);
    it = devices_.erase(it);  // closed when the last holder lets go
  }
}

}  // namespace rdma::verbs
