// The port collector's series of the daemon's verbs async events (sources/verbs/device_events.h):
// events per port and kind, ACTIVE state changes, the time of the last one and the time spent not
// ACTIVE. Pure functions of a snapshot, so that tests drive what the scrape writes.
#pragma once

#include "exporter/metrics.h"
#include "sources/verbs/device_events.h"

namespace rdma::collectors::port {

// base = the port's {device, port}; every counted kind is written, zeros included, so that the
// first event is an increase.
void emit_port_events(const exporter::LabelSet& base, const verbs::PortEventState& s, exporter::MetricSink& out);
// rdma_device_async_events_total{device, event="device_fatal"}.
void emit_device_events(const std::string& device, const verbs::DeviceEventState& s, exporter::MetricSink& out);

}  // namespace rdma::collectors::port
