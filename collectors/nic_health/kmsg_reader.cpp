#include "collectors/nic_health/kmsg_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "exporter/thread.h"

namespace rdma::collectors::nic_health {

// What every anchor greps for (NVSentinel's syslog monitor, gpud's kmsg matchers, Azure aznhc):
// the mlx5 driver's own messages (drivers/net/ethernet/mellanox/mlx5/core: cmd.c, health.c,
// events.c) and the networking core's TX watchdog (net/sched/sch_generic.c).
const std::vector<KmsgPattern> kKmsgPatterns = {
    {"cmd_timeout", R"((cmd_work_handler|wait_func)\b.*\btimeout)"},
    {"health_poll_failed", R"(health poll failed|device's health compromised)"},
    {"fw_fatal", R"(Fatal error \d+ detected|firmware internal error|fw_fatal)"},
    {"module_high_temperature", R"((module|Module) \d+.*[Hh]igh [Tt]emperature)"},
    {"insufficient_power", R"([Ii]nsufficient power|PCIe slot power|[Pp]ower budget exceeded)"},
    {"netdev_watchdog", R"(NETDEV WATCHDOG)"},
};

std::optional<std::string_view> kmsg_message(std::string_view line) {
  if (line.empty() || line[0] < '0' || line[0] > '9') return std::nullopt;
  const auto semi = line.find(';');
  if (semi == std::string_view::npos) return std::nullopt;
  std::string_view text = line.substr(semi + 1);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

KmsgMatcher::KmsgMatcher() {
  for (const auto& p : kKmsgPatterns) compiled_.emplace_back(p.regex, std::regex::ECMAScript | std::regex::optimize);
}

std::vector<std::size_t> KmsgMatcher::match(std::string_view message) const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < compiled_.size(); ++i)
    if (std::regex_search(message.begin(), message.end(), compiled_[i])) out.push_back(i);
  return out;
}

std::string KmsgMatcher::device_of(std::string_view message, const DeviceNames& names) {
  // Tokens of the line (split on what cannot be in a PCI address, an RDMA device or a netdev
  // name) looked up in the model's names: never a label the line alone made up.
  std::size_t i = 0;
  while (i < message.size()) {
    auto is_name = [](char c) {
      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-' ||
             c == ':' || c == '.';
    };
    while (i < message.size() && !is_name(message[i])) ++i;
    std::size_t j = i;
    while (j < message.size() && is_name(message[j])) ++j;
    std::string_view tok = message.substr(i, j - i);
    while (!tok.empty() && (tok.back() == ':' || tok.back() == '.')) tok.remove_suffix(1);  // "0000:08:00.0:"
    if (auto it = names.find(tok); it != names.end()) return it->second;
    i = j;
  }
  return {};
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
    auto nl = buffer.find('\n', pos);
    if (nl == std::string_view::npos) nl = buffer.size();
    const auto msg = kmsg_message(buffer.substr(pos, nl - pos));
    pos = nl + 1;
    if (!msg) continue;
    const auto rows = matcher_.match(*msg);
    std::lock_guard lock(mu_);
    ++snap_.records;
    if (rows.empty()) continue;
    const std::string device = KmsgMatcher::device_of(*msg, names_);
    for (auto r : rows) {
      auto key = std::make_pair(std::string(kKmsgPatterns[r].fault), device);
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
