// The daemon's one owner of libibverbs device contexts, and of their asynchronous events.
//
// Every ibv_context gets a copy of each async event of its device (port up/down, LID, GID, P_Key
// and SM changes, a fatal device error), queued in the kernel until the context reads it: a
// context that nobody reads grows that queue for as long as it is open. So the daemon opens each
// device once, here; a background thread drains every context's events, counts them per device,
// port and event, follows each port's ACTIVE state (the time of its last change, the time spent
// not ACTIVE) and tells subscribers (the prober) that a device's ports changed. Users of a device
// (the port collector's verbs attributes, the prober's queue pairs) share its context through
// context(): it stays open while any of them holds it.
//
// The thread lists the devices again every rescan interval, so a device that appears later (rxe
// added, a driver reloaded) is opened then and one that vanished is let go. A host without RDMA
// devices, or a device that cannot be opened (no /dev/infiniband access), is state: it has no
// series, and the snapshot names it for the collector to log once.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

struct ibv_context;

namespace rdma::verbs {

// The async events counted, as label values (ibv_event_type names, lower case).
enum class AsyncEvent : std::uint8_t {
  kPortErr, kPortActive, kLidChange, kSmChange, kClientReregister, kGidChange, kPkeyChange, kDeviceFatal,
};
inline constexpr std::size_t kAsyncEvents = 8;
inline constexpr std::size_t kPortAsyncEvents = 7;  // all but kDeviceFatal
std::string_view async_event_label(AsyncEvent e);
// Pure: the counted event of an ibv_event_type value; nullopt for the QP/CQ/SRQ and other events.
std::optional<AsyncEvent> classify_async_event(int ibv_event_type);

struct PortEventState {
  std::array<std::uint64_t, kPortAsyncEvents> events{};
  bool active = false;
  std::uint64_t state_changes = 0;  // ACTIVE <-> not ACTIVE transitions seen
  std::optional<std::chrono::system_clock::time_point> last_change;
  double not_active_seconds = 0;  // since the port was first seen, up to the snapshot
};
struct DeviceEventState {
  std::uint64_t device_fatal = 0;
  std::map<std::uint32_t, PortEventState> ports;
};
struct EventSnapshot {
  std::map<std::string, DeviceEventState, std::less<>> devices;
  std::vector<std::string> unopenable;  // listed devices that could not be opened (no access)
  bool running = true;                  // false: the thread could not start or poll() failed
};

// The per-port bookkeeping, apart from verbs so that tests drive it: pure, not thread-safe.
class PortEventBook {
 public:
  using Clock = std::chrono::steady_clock;
  // A port seen (first query): its state at `now`, no change counted.
  void seen(const std::string& device, std::uint32_t port, bool active, Clock::time_point now);
  // An event of `device` (port 0 for device events); counted, not a state change by itself.
  void event(const std::string& device, std::uint32_t port, AsyncEvent e);
  // The port's ACTIVE state as queried after an event or a rescan; a change is counted and timed.
  // Returns whether it changed.
  bool state(const std::string& device, std::uint32_t port, bool active, Clock::time_point now,
             std::chrono::system_clock::time_point wall);
  void forget(const std::string& device);
  EventSnapshot snapshot(Clock::time_point now) const;
  bool knows(const std::string& device) const { return devices_.count(device) != 0; }

 private:
  struct Port {
    PortEventState s;
    Clock::time_point since;  // of the current not-ACTIVE stretch
  };
  struct Device {
    std::uint64_t device_fatal = 0;
    std::map<std::uint32_t, Port> ports;
  };
  std::map<std::string, Device, std::less<>> devices_;
};

class DeviceEvents {
 public:
  struct PortChange {
    std::string device;
  };
  using Listener = std::function<void(const PortChange&)>;

  // Starts the thread. `rescan`: how often devices are listed and ports queried again.
  explicit DeviceEvents(std::chrono::milliseconds rescan_every = std::chrono::seconds(2));
  ~DeviceEvents();
  DeviceEvents(const DeviceEvents&) = delete;
  DeviceEvents& operator=(const DeviceEvents&) = delete;

  EventSnapshot snapshot() const;

  // The shared context of `device`, opened by this owner; nullptr when it has none (not listed,
  // cannot be opened). The caller may create PDs, CQs and QPs on it and never closes it: it is
  // closed once this owner and every holder have let it go.
  std::shared_ptr<ibv_context> context(const std::string& device);

  // Calls `listener` on the owner's thread after the events of a device that may have changed a
  // port (state, LID, GID, SM), and after a rescan that found a port's state changed. It must not
  // block; the subscription ends when the returned object is destroyed.
  class Subscription;
  std::unique_ptr<Subscription> subscribe(Listener listener);

  // The passes of the thread so far (tests wait on it, bounded).
  std::uint64_t passes() const { return passes_.load(); }

 private:
  struct Open {
    std::shared_ptr<ibv_context> ctx;
    std::uint32_t ports = 0;
  };
  void run();
  void rescan();
  void drain(const std::string& name, Open& d);
  bool query_ports(const std::string& name, Open& d, bool first);  // true: a port's state changed
  void notify(const std::string& device);

  std::chrono::milliseconds rescan_every_;
  int stop_fd_ = -1;
  mutable std::mutex mu_;  // devices_, book_, listeners_
  std::map<std::string, Open, std::less<>> devices_;
  PortEventBook book_;
  std::map<std::uint64_t, Listener> listeners_;
  std::uint64_t next_listener_ = 1;
  std::vector<std::string> unopenable_;
  std::atomic<bool> running_{false};
  std::atomic<std::uint64_t> passes_{0};
  std::thread thread_;
};

class DeviceEvents::Subscription {
 public:
  Subscription(DeviceEvents& owner, std::uint64_t id) : owner_(owner), id_(id) {}
  ~Subscription();
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

 private:
  DeviceEvents& owner_;
  std::uint64_t id_;
};

}  // namespace rdma::verbs
