#include "collectors/nic_health/kmsg_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "exporter/thread.h"
#include "sources/pci/parse.h"

namespace rdma::collectors::nic_health {

// What every anchor greps for (NVSentinel's syslog monitor, gpud's kmsg matchers, Azure aznhc):
// the mlx5 driver's own messages (drivers/net/ethernet/mellanox/mlx5/core: cmd.c, health.c,
// events.c; mlx5_core_err() and friends print "<function>:<line>:(pid <n>): " after the
// dev_printk prefix) and the networking core's TX watchdog (net/sched/sch_generic.c
// dev_watchdog(): netdev_crit(dev, "NETDEV WATCHDOG: CPU: %d: transmit queue %u timed out %u ms")
// since 6.7, before it WARN_ONCE(1, "NETDEV WATCHDOG: %s (%s): transmit queue %u timed out ...",
// dev->name, netdev_drivername(dev), ...), with no device prefix).
const std::vector<KmsgPattern> kKmsgPatterns = {
    {"cmd_timeout", KmsgSource::kDriver, "mlx5_core", R"(^(cmd_work_handler|wait_func)\b.*\btimeout)"},
    {"health_poll_failed", KmsgSource::kDriver, "mlx5_core", R"(health poll failed|device's health compromised)"},
    {"fw_fatal", KmsgSource::kDriver, "mlx5_core", R"(Fatal error \d+ detected|firmware internal error|fw_fatal)"},
    {"module_high_temperature", KmsgSource::kDriver, "mlx5_core", R"((module|Module) \d+.*[Hh]igh [Tt]emperature)"},
    {"insufficient_power", KmsgSource::kDriver, "mlx5_core",
     R"([Ii]nsufficient power|PCIe slot power|[Pp]ower budget exceeded)"},
    {"netdev_watchdog", KmsgSource::kDriver, nullptr, R"(^NETDEV WATCHDOG: CPU: \d+: transmit queue \d+ timed out)"},
    {"netdev_watchdog", KmsgSource::kNetdevCore, nullptr,
     R"(^NETDEV WATCHDOG: ([^ :/()]{1,15}) \(([A-Za-z0-9_.-]*)\): transmit queue \d+ timed out)"},
};

namespace {

bool is_name_char(char c) {
  // A driver name, a netdev name (dev_valid_name(): no '/', ':' or white space) or an RDMA device.
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-' || c == '.';
}

std::string_view take_name(std::string_view& s) {
  std::size_t n = 0;
  while (n < s.size() && n < 32 && is_name_char(s[n])) ++n;
  auto out = s.substr(0, n);
  s.remove_prefix(n);
  return out;
}

}  // namespace

std::optional<KmsgRecord> kmsg_record(std::string_view lines) {
  auto nl = lines.find('\n');
  const std::string_view head = lines.substr(0, nl);
  if (head.empty() || head[0] < '0' || head[0] > '9') return std::nullopt;
  const auto semi = head.find(';');
  if (semi == std::string_view::npos) return std::nullopt;
  KmsgRecord r;
  unsigned prio = 0;
  std::size_t i = 0;
  for (; i < semi && head[i] >= '0' && head[i] <= '9'; ++i) {
    prio = prio * 10 + unsigned(head[i] - '0');
    if (prio > 0xffff) return std::nullopt;  // the kernel's is facility (8 bits) << 3 | level
  }
  if (i == semi || head[i] != ',') return std::nullopt;
  r.facility = prio >> 3;
  r.level = prio & 7u;
  r.text = head.substr(semi + 1);
  while (!r.text.empty() && r.text.back() == '\r') r.text.remove_suffix(1);
  // The continuation lines up to the next record.
  while (nl != std::string_view::npos) {
    lines.remove_prefix(nl + 1);
    if (lines.empty() || lines[0] != ' ') break;
    nl = lines.find('\n');
    const auto cont = lines.substr(1, nl == std::string_view::npos ? std::string_view::npos : nl - 1);
    if (cont.starts_with("DEVICE=")) r.device = cont.substr(7);
  }
  return r;
}

std::optional<std::string_view> kmsg_message(std::string_view line) {
  auto r = kmsg_record(line.substr(0, line.find('\n')));
  if (!r) return std::nullopt;
  return r->text;
}

std::optional<DriverPrefix> driver_prefix(std::string_view text) {
  DriverPrefix p;
  p.driver = take_name(text);
  if (p.driver.empty() || !text.starts_with(' ')) return std::nullopt;
  text.remove_prefix(1);
  if (text.size() < 12 || !pci::is_bdf(text.substr(0, 12))) return std::nullopt;
  p.pci_address = text.substr(0, 12);
  text.remove_prefix(12);
  if (text.starts_with(' ')) {  // netdev_printk / ibdev_printk: the class device's name
    text.remove_prefix(1);
    p.name = take_name(text);
    if (p.name.empty()) return std::nullopt;
    // netdev_reg_state(): " (unregistering)", " (unregistered)", " (uninitialized)", ...
    if (text.starts_with(" (")) {
      const auto close = text.find(')');
      if (close == std::string_view::npos || close > 24) return std::nullopt;
      text.remove_prefix(close + 1);
    }
  }
  if (!text.starts_with(": ")) return std::nullopt;
  p.rest = text.substr(2);
  return p;
}

KmsgMatcher::KmsgMatcher() {
  for (const auto& p : kKmsgPatterns) compiled_.emplace_back(p.regex, std::regex::ECMAScript | std::regex::optimize);
}

std::vector<KmsgMatcher::Match> KmsgMatcher::match(const KmsgRecord& record, const DeviceNames& names) const {
  std::vector<Match> out;
  // A record a process wrote (/dev/kmsg, syslog(3) to the console) is never a driver's line.
  if (record.facility != 0) return out;
  auto bounded = [](std::string_view s) { return s.substr(0, kMaxMatchedText); };
  auto lookup = [&](std::string_view name) -> std::string {
    if (auto it = names.find(name); it != names.end()) return it->second;
    return {};
  };
  const auto prefix = driver_prefix(record.text);
  // The kernel attaches the device to each dev_printk() line: the prefix must name that device.
  const bool own_device = prefix && record.device.starts_with("+pci:") && record.device.substr(5) == prefix->pci_address;
  for (std::size_t i = 0; i < compiled_.size(); ++i) {
    const auto& row = kKmsgPatterns[i];
    if (row.source == KmsgSource::kDriver) {
      if (!own_device || (row.driver && prefix->driver != row.driver)) continue;
      const auto rest = bounded(prefix->rest);
      if (std::regex_search(rest.begin(), rest.end(), compiled_[i])) out.push_back({i, lookup(prefix->pci_address)});
      continue;
    }
    // The networking core's line: a fixed text of the kernel first (no task name reaches it), a
    // netdev with a parent device (a driver name; a netdev a user namespace creates has none).
    if (prefix) continue;
    const auto text = bounded(record.text);
    std::match_results<std::string_view::const_iterator> m;
    if (!std::regex_search(text.begin(), text.end(), m, compiled_[i]) || m.size() < 3 || m.length(2) == 0) continue;
    out.push_back({i, lookup(std::string_view(&*m[1].first, static_cast<std::size_t>(m.length(1))))});
  }
  return out;
}

void KmsgReader::set_device_names(DeviceNames names) {
  std::lock_guard lock(mu_);
  names_ = std::move(names);
}

KmsgReader::Snapshot KmsgReader::snapshot() const {
  std::lock_guard lock(mu_);
  return snap_;
}

void KmsgReader::consume(std::string_view buffer) {
  std::size_t pos = 0;
  while (pos < buffer.size()) {
    // A record: its header line and the continuation lines (" KEY=value") after it.
    auto end = buffer.find('\n', pos);
    while (end != std::string_view::npos && end + 1 < buffer.size() && buffer[end + 1] == ' ')
      end = buffer.find('\n', end + 1);
    if (end == std::string_view::npos) end = buffer.size();
    const auto rec = kmsg_record(buffer.substr(pos, end - pos));
    pos = end + 1;
    if (!rec) continue;
    std::lock_guard lock(mu_);
    ++snap_.records;
    for (auto& m : matcher_.match(*rec, names_)) {
      auto key = std::make_pair(std::string(kKmsgPatterns[m.row].fault), std::move(m.device));
      auto it = snap_.counts.find(key);
      if (it == snap_.counts.end()) {
        if (snap_.counts.size() >= kMaxSeries) key.second.clear();  // past the bound: counted without a device
        it = snap_.counts.try_emplace(std::move(key), 0).first;
      }
      ++it->second;
    }
  }
}

void KmsgReader::start() {
  if (thread_.joinable()) return;
  stop_ = false;
  // Opened here, so that the first scrape after start() already knows whether the log is readable.
  const int fd = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  {
    std::lock_guard lock(mu_);
    snap_.started = true;
    snap_.open = fd >= 0;
    snap_.open_errno = fd >= 0 ? 0 : errno;
  }
  if (fd < 0) return;
  // Only what is written from now on: the ring's history would count faults of long ago (and
  // a different number after each restart).
  ::lseek(fd, 0, SEEK_END);
  thread_ = exporter::named_thread("kmsg", [this, fd] { run(fd); });
}

void KmsgReader::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void KmsgReader::run(int fd) {
  // One record per read() on /dev/kmsg; CONSOLE_EXT_LOG_MAX (8 KiB) holds the longest.
  std::vector<char> buf(8192);
  while (!stop_) {
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, 200);
    if (n <= 0) continue;
    // Bounded per wake-up, so that a log storm cannot keep this loop from seeing stop_.
    for (int i = 0; i < 1024 && !stop_; ++i) {
      const ssize_t got = ::read(fd, buf.data(), buf.size());
      if (got > 0) {
        consume(std::string_view(buf.data(), static_cast<std::size_t>(got)));
        continue;
      }
      if (got < 0 && errno == EPIPE) continue;  // records overwritten before we read them
      if (got == 0) ::poll(nullptr, 0, 200);    // a regular file (tests) at its end: poll says readable
      break;                                    // EAGAIN: drained
    }
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) {
      if (!(p.revents & POLLIN)) break;
    }
  }
  ::close(fd);
}

}  // namespace rdma::collectors::nic_health
