#include "collectors/port/port_events.h"

#include <chrono>

namespace rdma::collectors::port {

void emit_port_events(const exporter::LabelSet& base, const verbs::PortEventState& s, exporter::MetricSink& out) {
  for (std::size_t i = 0; i < verbs::kPortAsyncEvents; ++i)
    out.add(base, "rdma_port_async_events_total", exporter::MetricType::kCounter,
            "Verbs async events of the port (ibv_get_async_event), counted by the daemon since it started, by event.",
            s.events[i], "event", verbs::async_event_label(static_cast<verbs::AsyncEvent>(i)));
  out.counter(base, "rdma_port_state_changes_total",
              "Times the port went in or out of ACTIVE since the daemon started (async events and a rescan every 2 s).",
              s.state_changes);
  out.add(base, "rdma_port_not_active_seconds_total", exporter::MetricType::kCounter,
          "Time the port was not ACTIVE since the daemon first saw it, in seconds.", s.not_active_seconds);
  if (s.last_change)
    out.gauge(base, "rdma_port_state_change_timestamp_seconds",
              "Unix time of the port's last ACTIVE state change the daemon saw (absent until one).",
              std::chrono::duration<double>(s.last_change->time_since_epoch()).count());
}

void emit_device_events(const std::string& device, const verbs::DeviceEventState& s, exporter::MetricSink& out) {
  out.counter("rdma_device_async_events_total",
              "Device-wide verbs async events (IBV_EVENT_DEVICE_FATAL: the device needs a reset), counted since the daemon started.",
              {{"device", device}, {"event", "device_fatal"}}, s.device_fatal);
}

}  // namespace rdma::collectors::port
