#include "collectors/port/mad_counters.h"

#include <cerrno>
#include <vector>

#include "sources/sysfs/parse.h"
#include "sources/sysfs/reader.h"

namespace rdma::collectors::port {

MadCounters::Port& MadCounters::at(const std::string& ca, int port) {
  std::lock_guard lock(mu_);
  Port& p = ports_[{ca, port}];  // std::map: the reference stays valid while others are added
  p.used = true;
  return p;
}

bool MadCounters::backing_off(const std::string& ca, int port) {
  return std::chrono::steady_clock::now() < at(ca, port).retry_at;
}

void MadCounters::sweep() {
  std::lock_guard lock(mu_);
  std::erase_if(ports_, [](const auto& kv) { return !kv.second.used; });
  for (auto& [key, p] : ports_) p.used = false;
}

MadCounters::Read MadCounters::read(const std::string& ca, int port, std::uint16_t lid, const std::string& dev_path) {
  Port& st = at(ca, port);
  Read out;
  mad::QueryStats stats;  // accumulates over the queries below
  const std::string id = ca + "/" + std::to_string(port);
  auto failed = [&](std::string why) {
    st.cap.reset();
    st.retry_at = std::chrono::steady_clock::now() + kRetryAfter;
    out.mads = stats.sent;
    out.error = std::move(why);
    return std::move(out);
  };
  if (!st.client) {
    // libibumad's CA of that name must be the tree's device: with a fixture tree (--path.sysfs)
    // it is another one, or none.
    const auto raw = sysfs::read_attribute(dev_path + "/node_guid");
    const auto node_guid = raw ? sysfs::parse_guid(raw.value) : std::nullopt;
    std::string err;
    bool same = false;
    if (node_guid)
      for (const auto& lp : mad::list_local_ports(&err))
        same |= lp.ca == ca && lp.port == port && mad::guid_label(lp.node_guid) == *node_guid;
    if (!same) {
      out.no_device = true;
      return failed("no umad port " + id + " with the node GUID of " + dev_path);
    }
    int open_errno = 0;
    st.client = mad::MadClient::shared(ca, port, &err, &open_errno);
    if (!st.client) {
      out.no_device = open_errno == ENOENT || open_errno == EACCES || open_errno == EPERM;
      return failed(err);
    }
  }
  if (st.lid != lid) st.cap.reset();
  const auto port_select = static_cast<std::uint8_t>(port);
  mad::PortReadings r;
  auto query = [&](std::vector<mad::PmaQuery> qs) -> std::string {
    const auto replies = st.client->query(qs, kQuery, &stats);
    for (std::size_t i = 0; i < qs.size(); ++i) {
      const mad::PmaReply& rep = replies[i];
      if (rep.outcome == mad::Outcome::kOk && mad::store(r, qs[i].attr, rep)) continue;
      if (rep.outcome == mad::Outcome::kSendError) st.client.reset();  // open the umad port again next time
      const std::string why(rep.outcome == mad::Outcome::kOk ? "malformed" : mad::outcome_label(rep.outcome));
      return std::string(mad::attr_name(qs[i].attr)) + " of " + id + " (lid " + std::to_string(lid) + "): " + why +
             (rep.status ? " " + mad::status_text(rep.status) : "");
    }
    return {};
  };
  if (!st.cap) {
    if (auto why = query({{lid, port_select, mad::PmaAttr::kClassPortInfo}}); !why.empty()) return failed(why);
    st.cap = r.cap_mask;
    st.lid = lid;
  }
  r.cap_mask = *st.cap;
  std::vector<mad::PmaQuery> qs{{lid, port_select, mad::PmaAttr::kPortCounters}};
  // The kernel's rule for its counters/ table: PortCountersExtended where ClassPortInfo announces it.
  if (r.cap_mask & (mad::kCapExtWidth | mad::kCapExtWidthNoIetf))
    qs.push_back({lid, port_select, mad::PmaAttr::kPortCountersExtended});
  if (auto why = query(std::move(qs)); !why.empty()) return failed(why);
  out.mads = stats.sent;
  out.readings = std::move(r);
  return out;
}

}  // namespace rdma::collectors::port
