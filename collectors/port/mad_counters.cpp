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
  std::erase_if(ports_, [this](const auto& kv) {
    if (!kv.second.used) agents_.forget(kv.first.first + "/" + std::to_string(kv.first.second));
    return !kv.second.used;
  });
  for (auto& [key, p] : ports_) p.used = false;
}

MadCounters::Read MadCounters::read(const std::string& ca, int port, std::uint16_t lid, const std::string& dev_path) {
  Port& st = at(ca, port);
  Read out;
  mad::QueryStats stats;  // accumulates over the queries below
  const std::string id = ca + "/" + std::to_string(port);
  auto failed = [&](std::string why) {
    agents_.forget(id);  // the agent reader forgets after a failed query; so does a port that would not open
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
  const mad::AgentAsk ask{.key = id, .lid = lid, .port_select = static_cast<std::uint8_t>(port),
                          .ports = {{lid, static_cast<std::uint8_t>(port)}}};
  // The kernel's rule for its counters/ table: PortCountersExtended where ClassPortInfo announces it.
  auto choose = [](std::uint16_t cap, std::size_t, std::size_t) {
    std::vector<mad::PmaAttr> attrs{mad::PmaAttr::kPortCounters};
    if (cap & (mad::kCapExtWidth | mad::kCapExtWidthNoIetf)) attrs.push_back(mad::PmaAttr::kPortCountersExtended);
    return attrs;
  };
  const std::shared_ptr<mad::MadClient> client = st.client;
  auto query = [&](std::span<const mad::PmaQuery> qs, mad::Round round) {
    return client->query(qs, mad::round_options(kQuery, round), &stats);
  };
  mad::AgentRead a = std::move(agents_.read(std::span(&ask, 1), choose, query, mad::kPortCollector).agents[0]);
  std::optional<mad::Failure> failure = a.cpi_failure;
  if (!failure && a.ports[0].failed()) failure = a.ports[0].failures.front();
  // The kernel's counters/ take the data counters from PortCountersExtended where ClassPortInfo
  // announces it; an agent that then refuses it is read through counters/ (the driver's choice).
  // (Refused in this read, or earlier by the pma collector's local mode, which shares the reader.)
  if (!failure && a.ports[0].refused.has(mad::PmaAttr::kPortCountersExtended)) {
    mad::PmaReply unsupported;
    unsupported.outcome = mad::Outcome::kStatus;
    unsupported.status = 0x000C;  // unsupported method/attribute combination
    failure = a.ports[0].newly_refused.empty() ? mad::Failure{mad::PmaAttr::kPortCountersExtended, unsupported}
                                               : a.ports[0].newly_refused.front();
  }
  if (failure) {
    agents_.forget(id);  // refused or failed: ask ClassPortInfo again after the back-off
    if (failure->outcome() == mad::Outcome::kSendError) st.client.reset();  // open the umad port again next time
    return failed(std::string(mad::attr_name(failure->attr)) + " of " + id + " (lid " + std::to_string(lid) +
                  "): " + std::string(mad::outcome_label(failure->outcome())) +
                  (failure->reply.status ? " " + mad::status_text(failure->reply.status) : ""));
  }
  out.mads = stats.sent;
  out.readings = std::move(a.ports[0].readings);
  return out;
}

}  // namespace rdma::collectors::port
