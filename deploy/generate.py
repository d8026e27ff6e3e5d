#!/usr/bin/env python3
"""Generates rdma_exporter's monitoring artefacts from one description:

  dashboards/*.json                              Grafana dashboards (file provisioning / sidecar)
  deploy/prometheus/rdma-exporter.rules.yml      Prometheus alerting rules
  deploy/kubernetes/base/prometheusrule.yaml     the same rules as a PrometheusRule
  tests/deploy/rules.test.yml                    promtool unit tests: every alert fires and stays quiet

Every metric a panel, target or alert uses must be documented in docs/metrics.md: an undocumented
one is an error (named on stderr, nothing written). Selectors and thresholds are in CONFIG below.
Edit this file, run it, commit its output; ctest deploy.deploy.generated runs --check, and
tests/deploy checks the output (PromQL parses, metrics exist, rules fire).

    python3 deploy/generate.py            # write
    python3 deploy/generate.py --check    # exit 1 if the committed files differ from the output
    python3 deploy/generate.py --config my.yml --out DIR   # CONFIG's keys overridden by my.yml, under DIR
                                                           # (no promtool cases: they fit the defaults)
    python3 deploy/generate.py --runbook-url-base https://wiki.example/rdma-runbooks --out DIR
                                                           # runbook_url: https://wiki.example/rdma-runbooks#<alert>
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import promql_util  # noqa: E402  (metric extraction and docs/metrics.md parsing, shared with the tests)

# Where every alert's runbook_url points (as node-mixin's runbookURLPattern): BASE#<alert name in
# lower case>. The default is the copy of docs/runbooks.md that the .deb installs
# (cmake/Packaging.cmake); point it at an internal wiki or a repository with
# `--runbook-url-base URL` or the `runbook_url_base` key of `--config` (docs/deployment.md).
RUNBOOK = "file:///usr/share/doc/rdma-exporter/runbooks.md"

# --------------------------------------------------------------------------------------------
# Selectors and thresholds in one place, as node-mixin's _config: every query below takes them
# from here. Retarget without editing a query: `--config FILE` (YAML, any of these keys) with
# `--out DIR` writes the dashboards and rules for FILE's values (docs/deployment.md).
# --------------------------------------------------------------------------------------------
CONFIG = {
    # The runbooks every alert links to (RUNBOOK above).
    "runbook_url_base": RUNBOOK,
    # The jobs that scrape rdma_exporter's /metrics: every alert on its series (and
    # RdmaExporterDown's `up`) selects with it, and the dashboards' Job variable lists those jobs.
    "selector": 'job=~".*rdma.exporter.*"',
    # The jobs that carry the PMA fabric snapshot (the exporter's /metrics, or /pma per node).
    "fabric_selector": 'job!=""',
    "link_downs_per_30m": 2,                       # RdmaPortFlapping
    "symbol_errors_per_10m": 10,                   # RdmaPortSymbolErrorsRising
    "link_errors_per_10m": 5,                      # RdmaPortLinkErrorsRising
    "transmit_wait_ticks_per_packet": 10,          # RdmaPortTransmitWaitHigh
    "pfc_paused_ratio": 0.2,                       # RdmaRocePfcPausedHigh
    "cnp_per_second": 1000,                        # RdmaRoceCnpRateHigh
    "ecn_marked_per_second": 1000,                 # RdmaRoceEcnMarkRateHigh
    "out_of_sequence_per_second": 100,             # RdmaRoceOutOfSequenceHigh
    "retransmissions_per_second": 10,              # RdmaRoceRetransmissionsHigh
    "qp_retries_exceeded_per_10m": 0,              # RdmaQpRetriesExceeded (any QP failed by its retry limit)
    "fabric_transmit_wait_ticks_per_second": 1e6,  # RdmaFabricTransmitWaitHigh
    "probe_loss_ratio": 0.01,                      # RdmaProbeLoss
    "probe_rtt_p99_seconds": 0.0001,               # RdmaProbeRttHigh
    "pcie_uncorrectable_per_10m": 0,               # RdmaPcieUncorrectableErrors (any nonfatal/fatal report)
    # RdmaTopologySnapshotStale, RdmaFabricSnapshotStale: a background reading older than this many
    # (refresh interval + the last refresh's duration). Healthy, the age stays below one.
    "snapshot_stale_intervals": 3,
}
# The physical layer's thresholds, from the anchors (docs/runbooks.md, "Physical layer"):
# NVSentinel's NIC monitor calls 3 link downs in 10 minutes a flapping port; gpud counts 3 downs
# (of at least 25 s each) in 12 hours, Azure's aznhc 2 in 6 hours, as the repeat offender that is
# replaced rather than reseated. A PAM4 link with KP4 RS-FEC always sees raw errors: the pre-FEC
# BER alert is on a level held for an hour, 24 times below the 2.4e-4 the FEC corrects.
CONFIG.update({
    "link_downs_per_10m": 3,        # RdmaLinkFlapping
    "link_downs_per_12h": 3,        # RdmaLinkRepeatOffender
    "pre_fec_ber": 1e-5,            # RdmaLinkPreFecBerHigh
})
C = {}  # CONFIG as PromQL text, set by configure()


def configure(overrides=None):
    """Sets C from CONFIG and the overrides (unknown keys are an error)."""
    unknown = sorted(set(overrides or {}) - set(CONFIG))
    if unknown:
        raise SystemExit("generate.py: unknown config keys: %s (known: %s)" % (", ".join(unknown), ", ".join(CONFIG)))
    merged = dict(CONFIG, **(overrides or {}))
    C.clear()
    for k, v in merged.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            v = str(int(v)) if float(v).is_integer() else repr(float(v))
        C[k] = v
JOB = 'job=~"$job", instance=~"$node"'
PORT = JOB + ', device=~"$device", port=~"$port"'
RI = "$__rate_interval"

# --------------------------------------------------------------------------------------------
# Dashboards
# --------------------------------------------------------------------------------------------
DS = {"type": "prometheus", "uid": "${datasource}"}


def target(expr, legend="", instant=False, fmt=None):
    t = {"datasource": DS, "expr": expr, "legendFormat": legend or "__auto",
         "range": not instant, "instant": instant}
    if fmt:
        t["format"] = fmt
    return t


def ts(title, targets, unit="short", desc="", w=12, h=8, stack=False):
    return {"type": "timeseries", "title": title, "description": desc, "w": w, "h": h,
            "fieldConfig": {"defaults": {"unit": unit, "custom": {
                "drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
                "stacking": {"mode": "normal" if stack else "none", "group": "A"}}},
                "overrides": []},
            "options": {"legend": {"displayMode": "table", "placement": "bottom", "showLegend": True,
                                   "calcs": ["mean", "max", "lastNotNull"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}},
            "targets": targets}


def stat(title, expr, unit="short", desc="", w=6, h=4, thresholds=None, mappings=None):
    steps = thresholds or [{"color": "green", "value": None}]
    return {"type": "stat", "title": title, "description": desc, "w": w, "h": h,
            "fieldConfig": {"defaults": {"unit": unit, "mappings": mappings or [],
                                         "thresholds": {"mode": "absolute", "steps": steps}},
                            "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "background", "graphMode": "area", "justifyMode": "auto",
                        "orientation": "auto", "textMode": "auto"},
            "targets": [target(expr, instant=True)]}


def table(title, targets, desc="", w=24, h=8, exclude=("Time",)):
    return {"type": "table", "title": title, "description": desc, "w": w, "h": h,
            "fieldConfig": {"defaults": {}, "overrides": []},
            "options": {"showHeader": True, "cellHeight": "sm", "footer": {"show": False}},
            "transformations": [{"id": "merge", "options": {}},
                                {"id": "organize", "options": {
                                    "excludeByName": {k: True for k in exclude}}}],
            "targets": targets}


def heatmap(title, expr, desc="", w=24, h=9):
    return {"type": "heatmap", "title": title, "description": desc, "w": w, "h": h,
            "fieldConfig": {"defaults": {}, "overrides": []},
            "options": {"calculate": False, "cellGap": 1, "yAxis": {"unit": "s", "axisPlacement": "left"},
                        "color": {"mode": "scheme", "scheme": "Spectral", "steps": 64, "exponent": 0.5,
                                  "fill": "dark-orange", "reverse": False},
                        "rowsFrame": {"layout": "auto"}, "tooltip": {"show": True, "yHistogram": True},
                        "legend": {"show": True}, "exemplars": {"color": "rgba(255,0,255,0.7)"}},
            "targets": [target(expr, legend="{{le}}", fmt="heatmap")]}


def row(title):
    return {"type": "row", "title": title}


def variables(extra_port=True, device_metric="rdma_port_info"):
    def q(name, label, query, hide=0):
        return {"name": name, "label": label, "type": "query", "datasource": DS,
                "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
                "definition": query, "refresh": 2, "includeAll": True, "multi": True,
                "allValue": ".*", "options": [], "regex": "", "sort": 1, "hide": hide}
    v = [{"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
          "hide": 0, "refresh": 1, "regex": "", "options": [], "includeAll": False,
          "multi": False},
         q("job", "Job", "label_values(rdma_exporter_build_info{%(selector)s}, job)" % C),
         q("node", "Node", 'label_values(rdma_exporter_build_info{job=~"$job"}, instance)')]
    if extra_port:
        v.append(q("device", "Device", 'label_values(%s{%s}, device)' % (device_metric, JOB)))
        v.append(q("port", "Port", 'label_values(%s{%s, device=~"$device"}, port)' % (device_metric, JOB)))
    return v


STATE_MAP = [{"type": "value", "options": {
    "1": {"text": "DOWN", "color": "red"}, "2": {"text": "INIT", "color": "orange"},
    "3": {"text": "ARMED", "color": "orange"}, "4": {"text": "ACTIVE", "color": "green"},
    "5": {"text": "ACTIVE_DEFER", "color": "green"}}}]
PHYS_MAP = [{"type": "value", "options": {
    "1": {"text": "Sleep", "color": "red"}, "2": {"text": "Polling", "color": "red"},
    "3": {"text": "Disabled", "color": "red"}, "4": {"text": "Training", "color": "orange"},
    "5": {"text": "LinkUp", "color": "green"}, "6": {"text": "LinkErrorRecovery", "color": "orange"},
    "7": {"text": "PhyTest", "color": "orange"}}}]
RED_IF_ANY = [{"color": "green", "value": None}, {"color": "red", "value": 1}]

PORT_ERRORS = [
    ("rdma_port_symbol_errors_total", "symbol errors"),
    ("rdma_port_link_error_recovery_total", "link error recovery"),
    ("rdma_port_link_downed_total", "link downed"),
    ("rdma_port_receive_errors_total", "receive errors"),
    ("rdma_port_receive_remote_physical_errors_total", "remote physical errors"),
    ("rdma_port_transmit_discards_total", "transmit discards"),
    ("rdma_port_local_link_integrity_errors_total", "local link integrity"),
    ("rdma_port_excessive_buffer_overrun_errors_total", "buffer overrun"),
]


def err_targets(sel):
    return [target("sum by (instance, device, port) (rate(%s{%s}[%s]))" % (m, sel, RI),
                   "{{instance}} {{device}}/{{port}} " + name) for m, name in PORT_ERRORS]


def dash_overview():
    return "rdma-fabric-overview", "RDMA / Fabric overview", ["overview"], variables(), [
        row("Ports"),
        stat("Exporters up", 'sum(up{job=~"$job"}) or vector(0)', w=4,
             desc="Scrape targets of the selected jobs that answered the last scrape."),
        stat("Ports ACTIVE", 'count(rdma_port_state{%s} >= 4) or vector(0)' % PORT, w=5),
        stat("Ports not ACTIVE", 'count(rdma_port_state{%s} < 4) or vector(0)' % PORT, w=5,
             thresholds=RED_IF_ANY, desc="Ports in DOWN, INIT or ARMED (includes unused ports)."),
        stat("Physical link not up", 'count(rdma_port_physical_state{%s} != 5) or vector(0)' % PORT,
             w=5, thresholds=RED_IF_ANY),
        stat("Collectors failing", 'count(rdma_exporter_collector_success{%s} == 0) or vector(0)' % JOB,
             w=5, thresholds=RED_IF_ANY),
        table("Port states", [
            target('rdma_port_state{%s} * on(job, instance, device, port) group_left(link_layer) '
                   'rdma_port_info{%s}' % (PORT, PORT), instant=True, fmt="table"),
            target('rdma_port_rate_bytes_per_second{%s}' % PORT, instant=True, fmt="table")],
            desc="State (4 = ACTIVE) and data rate per port.", exclude=("Time", "__name__")),
        row("Traffic"),
        ts("Top 10 ports by receive throughput",
           [target('topk(10, rate(rdma_port_receive_bytes_total{%s}[%s]))' % (PORT, RI),
                   "{{instance}} {{device}}/{{port}}")], unit="Bps"),
        ts("Top 10 ports by transmit throughput",
           [target('topk(10, rate(rdma_port_transmit_bytes_total{%s}[%s]))' % (PORT, RI),
                   "{{instance}} {{device}}/{{port}}")], unit="Bps"),
        ts("Top 10 ports by utilisation (max of rx, tx)",
           [target('topk(10, max by (job, instance, device, port) ('
                   'label_replace(rate(rdma_port_receive_bytes_total{%s}[%s]), "dir", "rx", "", "") or '
                   'label_replace(rate(rdma_port_transmit_bytes_total{%s}[%s]), "dir", "tx", "", "")) '
                   '/ on(job, instance, device, port) rdma_port_rate_bytes_per_second{%s})'
                   % (PORT, RI, PORT, RI, PORT), "{{instance}} {{device}}/{{port}}")],
           unit="percentunit", w=24),
        table("Top talkers' workloads", [
            target('topk(10, rate(rdma_port_receive_bytes_total{%s}[%s]) + rate(rdma_port_transmit_bytes_total{%s}[%s])) '
                   '* on(job, instance, device, port) group_right() clamp_max(rdma_workload_%s_qps{%s}, 1)'
                   % (PORT, RI, PORT, RI, fam, PORT), instant=True, fmt="table")
            for fam in ("pod", "slurm", "unit")],
            desc="The 10 busiest ports (receive + transmit bytes/s) and the workloads holding queue pairs on them: "
                 "namespace, pod and container (names from the CRI when configured; pod UID and container ID always), "
                 "Slurm job/step or systemd unit. "
                 "Needs the workload collector (on in the Kubernetes rdma-devices overlay).",
            exclude=("Time", "__name__")),
        row("Errors"),
        ts("Port error rates", err_targets(PORT), unit="cps", w=24, h=9,
           desc="PMA error counters per second (IB and RoCE ports with counters/)."),
        ts("Link downed events in range",
           [target('sum by (instance, device, port) (increase(rdma_port_link_downed_total{%s}[$__range]))'
                   % PORT, "{{instance}} {{device}}/{{port}}")], w=12),
        ts("Saturated PMA counters",
           [target('sum by (instance, device, port) (rdma_port_pma_saturated{%s})' % PORT,
                   "{{instance}} {{device}}/{{port}}")], w=12,
           desc="Counters narrower than 64 bits stuck at their maximum: reset them (perfquery -R)."),
        row("Exporter"),
        ts("Collector duration", [target('rdma_exporter_collector_scrape_duration_seconds{%s}' % JOB,
                                         "{{instance}} {{collector}}")], unit="s"),
        ts("Collector errors", [target('sum by (instance, collector, reason) ('
                                       'rate(rdma_exporter_collector_errors_total{%s}[%s]))' % (JOB, RI),
                                       "{{instance}} {{collector}} {{reason}}")], unit="cps"),
    ]


def dash_port():
    return "rdma-port-detail", "RDMA / Port detail", ["port"], variables(), [
        row("State"),
        stat("State", 'max(rdma_port_state{%s})' % PORT, w=4, mappings=STATE_MAP),
        stat("Physical state", 'max(rdma_port_physical_state{%s})' % PORT, w=4, mappings=PHYS_MAP),
        stat("Data rate", 'max(rdma_port_rate_bytes_per_second{%s})' % PORT, unit="Bps", w=4),
        stat("Link width", 'max(rdma_port_link_width_lanes{%s})' % PORT, w=4),
        stat("Active MTU", 'max(rdma_port_active_mtu_bytes{%s})' % PORT, unit="bytes", w=4),
        stat("LID", 'max(rdma_port_lid{%s})' % PORT, w=4),
        table("Device and port attributes", [
            target('rdma_device_info{%s, device=~"$device"}' % JOB, instant=True, fmt="table"),
            target('rdma_port_netdev_info{%s}' % PORT, instant=True, fmt="table")],
            exclude=("Time", "__name__", "Value")),
        row("Throughput"),
        ts("Receive / transmit bytes", [
            target('rate(rdma_port_receive_bytes_total{%s}[%s])' % (PORT, RI), "{{instance}} {{device}}/{{port}} rx"),
            target('-rate(rdma_port_transmit_bytes_total{%s}[%s])' % (PORT, RI), "{{instance}} {{device}}/{{port}} tx")],
            unit="Bps", desc="Transmit is drawn below the axis."),
        ts("Receive / transmit packets", [
            target('rate(rdma_port_receive_packets_total{%s}[%s])' % (PORT, RI), "{{instance}} {{device}}/{{port}} rx"),
            target('-rate(rdma_port_transmit_packets_total{%s}[%s])' % (PORT, RI), "{{instance}} {{device}}/{{port}} tx")],
            unit="pps"),
        ts("Utilisation", [
            target('rate(rdma_port_receive_bytes_total{%s}[%s]) / on(job, instance, device, port) '
                   'rdma_port_rate_bytes_per_second{%s}' % (PORT, RI, PORT), "{{instance}} {{device}}/{{port}} rx"),
            target('rate(rdma_port_transmit_bytes_total{%s}[%s]) / on(job, instance, device, port) '
                   'rdma_port_rate_bytes_per_second{%s}' % (PORT, RI, PORT), "{{instance}} {{device}}/{{port}} tx")],
            unit="percentunit"),
        ts("Multicast / unicast packets", [
            target('rate(rdma_port_unicast_receive_packets_total{%s}[%s])' % (PORT, RI), "{{device}}/{{port}} unicast rx"),
            target('rate(rdma_port_multicast_receive_packets_total{%s}[%s])' % (PORT, RI), "{{device}}/{{port}} multicast rx")],
            unit="pps"),
        row("Errors and congestion"),
        ts("Error counters", err_targets(PORT), unit="cps", w=24),
        ts("Transmit wait (PortXmitWait)", [
            target('rate(rdma_port_transmit_wait_total{%s}[%s])' % (PORT, RI), "{{instance}} {{device}}/{{port}}")],
            unit="short", desc="Ticks per second with data to send but no credits: IB congestion."),
        ts("Saturated counters", [
            target('rdma_port_pma_saturated{%s}' % PORT, "{{device}}/{{port}} {{counter}}")]),
    ] + physical_layer_panels() + topology_panels()


def topology_panels():
    """PCIe and GPU topology of the selected node (topology collector): the nvidia-smi topo -m
    matrix, each device's PCIe path with its bottleneck, AER reports and the node-shape checks."""
    node = 'job=~"$job", instance=~"$node"'
    matrix = table("GPU / NIC topology (nvidia-smi topo -m)", [
        target('rdma_topology_relation{%s}' % node, instant=True, fmt="table")],
        desc="One row per RDMA device, one column per GPU (index in PCI address order): PIX same PCIe switch, PXB "
             "several switches, PHB through the host bridge, NODE same NUMA node, SYS across NUMA. Rail alignment "
             "is one PIX per row and column.", h=9)
    matrix["transformations"] = [{"id": "groupingToMatrix", "options": {
        "columnField": "gpu", "rowField": "device", "valueField": "relation", "emptyValue": "empty"}}]
    return [
        row("PCIe and GPU topology"),
        matrix,
        table("PCIe path per device (hop 0 = the device, last = root port)", [
            target('rdma_pci_link_current_width_lanes{%s, device=~"$device"}' % node, instant=True, fmt="table"),
            target('rdma_pci_link_max_width_lanes{%s, device=~"$device"}' % node, instant=True, fmt="table"),
            target('rdma_pci_link_current_speed_transfers_per_second{%s, device=~"$device"}' % node, instant=True, fmt="table"),
            target('rdma_pci_link_degraded{%s, device=~"$device"}' % node, instant=True, fmt="table"),
            target('rdma_pci_link_bottleneck{%s, device=~"$device"}' % node, instant=True, fmt="table")],
            desc="Current and maximum width, current speed, degraded (1: trains below what both ends support) and "
                 "the bottleneck hop of every function between the RDMA device and its root port.",
            exclude=("Time", "__name__", "job")),
        ts("PCIe AER reports", [
            target('sum by (instance, device, pci_function, aer_severity) (increase(rdma_pci_aer_reports_total{%s, device=~"$device"}[%s]))'
                   % (node, RI), "{{device}} {{pci_function}} {{aer_severity}}")],
           desc="AER error reports per function on the device's path; nonfatal and fatal ones are uncorrectable."),
        table("Node shape checks failing", [
            target('rdma_topology_check{%s} == 0' % node, instant=True, fmt="table")],
            desc="Items of collectors.topology.expect this node does not meet, with what was observed.",
            w=12, exclude=("Time", "__name__", "job", "Value")),
    ]


# --- Physical layer row (port detail dashboard): flaps and BER here; PCIe and optics panels are
# appended to PHYSICAL_LAYER_EXTRA by their own blocks.
PHYSICAL_LAYER_EXTRA = []
NETDEV = PORT + ', netdev=~".*"'


def physical_layer_panels():
    return [
        row("Physical layer"),
        ts("Link downs", [
            target('increase(rdma_netdev_carrier_down_total{%s}[%s])' % (NETDEV, RI), "{{device}}/{{port}} {{netdev}} carrier down"),
            target('increase(rdma_port_async_events_total{%s, event="port_err"}[%s])' % (PORT, RI),
                   "{{device}}/{{port}} PORT_ERR")],
            desc="Carrier downs of the netdev and verbs PORT_ERR events of the port, per interval."),
        ts("Time not ACTIVE", [
            target('rate(rdma_port_not_active_seconds_total{%s}[%s])' % (PORT, RI), "{{device}}/{{port}}")],
            unit="percentunit", desc="Fraction of the interval the port was not ACTIVE."),
        ts("Pre-FEC / post-FEC BER", [
            target("%s{%s}" % (PRE_FEC_BER, PORT), "{{device}}/{{port}} {{netdev}} pre-FEC"),
            target("%s{%s}" % (POST_FEC_BER, PORT), "{{device}}/{{port}} {{netdev}} post-FEC")],
            unit="sci", desc="Bit error rate over the port's data rate, over 5 minutes (recording rules "
                             "rdma:link_pre_fec_ber:rate5m, rdma:link_post_fec_ber:rate5m). PAM4 links always show "
                             "pre-FEC errors."),
        ts("FEC corrected bits per lane", [
            target('rate(rdma_netdev_fec_lane_corrected_bits_total{%s}[%s]) or rate(rdma_netdev_phy_lane_corrected_bits_total{%s}[%s])'
                   % (NETDEV, RI, NETDEV, RI), "{{device}}/{{port}} {{netdev}} lane {{lane}}")],
            unit="short", desc="One lane far above the others points at a lane of the cable or module."),
        table("Link down reason", [
            target('rdma_netdev_link_down_reason_info{%s}' % NETDEV, instant=True, fmt="table")],
            exclude=("Time", "__name__", "Value"), w=24, h=5),
    ] + PHYSICAL_LAYER_EXTRA


# --------------------------------------------------------------------------------------------
# Port detail, "Physical layer" row: optics and NIC health (collector nic_health). Its own block,
# appended to dash_port() without editing it; other physical-layer panels (flaps, FEC/BER, PCIe)
# belong in the same row.
# --------------------------------------------------------------------------------------------
NETDEV_PORT = PORT  # the transceiver series carry device, port (and netdev) like the port series
DEVICE_SEL = JOB + ', device=~"$device"'


def physical_layer_optics_panels():
    return [
        ts("Transceiver temperature", [
            target('rdma_transceiver_temperature_celsius{%s}' % NETDEV_PORT, "{{instance}} {{netdev}}"),
            target('rdma_transceiver_temperature_threshold_celsius{%s, level="high_alarm"}' % NETDEV_PORT,
                   "{{instance}} {{netdev}} high alarm")],
            unit="celsius", desc="The module's temperature and its own high alarm threshold.", w=8),
        ts("Rx optical power per lane", [
            target('rdma_transceiver_rx_power_watts{%s}' % NETDEV_PORT, "{{instance}} {{netdev}} lane {{lane}}"),
            target('rdma_transceiver_rx_power_threshold_watts{%s, level="low_alarm"}' % NETDEV_PORT,
                   "{{instance}} {{netdev}} low alarm")],
            unit="watt", desc="Received light per lane against the module's low alarm threshold.", w=8),
        ts("Tx optical power and laser bias per lane", [
            target('rdma_transceiver_tx_power_watts{%s}' % NETDEV_PORT, "{{instance}} {{netdev}} lane {{lane}} Tx power"),
            target('rdma_transceiver_tx_bias_amperes{%s} * 1e3' % NETDEV_PORT, "{{instance}} {{netdev}} lane {{lane}} bias (mA)")],
            desc="Tx power in W; the laser bias in mA (a rising bias at steady power: an ageing laser).", w=8),
        table("Transceivers and their flags", [
            target('rdma_transceiver_info{%s}' % NETDEV_PORT, instant=True, fmt="table"),
            target('rdma_transceiver_flags{%s}' % NETDEV_PORT, instant=True, fmt="table")],
            desc="Identity of each module and how many alarm, warning and fault flags it raises now.",
            exclude=("Time", "__name__")),
        ts("NIC temperatures (hwmon)", [
            target('rdma_nic_temperature_celsius{%s}' % DEVICE_SEL, "{{instance}} {{device}} {{sensor}}")],
            unit="celsius", desc="ASIC and module sensors the driver registers under the PCI function "
                                 "(an InfiniBand port's module temperature).", w=12),
        table("devlink health and firmware", [
            target('rdma_devlink_health_reporter_healthy{%s}' % DEVICE_SEL, instant=True, fmt="table"),
            target('rdma_devlink_version_info{%s, kind=~"running|stored"}' % DEVICE_SEL, instant=True, fmt="table")],
            desc="Reporters (1 healthy, 0 in error) and running/stored firmware versions.", w=12,
            exclude=("Time", "__name__")),
    ]


PHYSICAL_LAYER_EXTRA.extend(physical_layer_optics_panels())


def dash_roce():
    sel = PORT
    return "rdma-roce-congestion", "RDMA / RoCE congestion", ["roce"], variables(), [
        row("PFC (Ethernet flow control)"),
        ts("PFC pause frames received per priority", [
            target('sum by (instance, netdev, priority) (rate(rdma_netdev_pfc_pause_frames_total{%s, direction="rx"}[%s]))'
                   % (JOB, RI), "{{instance}} {{netdev}} prio {{priority}}")], unit="cps"),
        ts("PFC pause frames sent per priority", [
            target('sum by (instance, netdev, priority) (rate(rdma_netdev_pfc_pause_frames_total{%s, direction="tx"}[%s]))'
                   % (JOB, RI), "{{instance}} {{netdev}} prio {{priority}}")], unit="cps"),
        ts("Time paused per priority", [
            target('sum by (instance, netdev, direction, priority) (rate(rdma_netdev_pfc_pause_duration_seconds_total{%s}[%s]))'
                   % (JOB, RI), "{{instance}} {{netdev}} {{direction}} prio {{priority}}")], unit="percentunit",
           desc="Fraction of time the priority was paused."),
        ts("Pause storm events", [
            target('sum by (instance, netdev, direction, level) (increase(rdma_netdev_pause_storm_events_total{%s}[%s]))'
                   % (JOB, RI), "{{instance}} {{netdev}} {{direction}} {{level}}")]),
        table("RoCE configuration consistency", [
            target('rdma_netdev_roce_priority_consistent{%s}' % JOB, instant=True, fmt="table")],
            desc="1 = PFC and ECN enabled for the RoCE priority; 0 with the reason label otherwise.",
            exclude=("Time", "__name__")),
        row("DCQCN (CNP, ECN)"),
        ts("CNPs sent (notification point)", [
            target('sum by (instance, device, port) (rate(rdma_roce_cnp_sent_total{%s}[%s]))' % (sel, RI),
                   "{{instance}} {{device}}/{{port}}")], unit="cps"),
        ts("CNPs handled (reaction point)", [
            target('sum by (instance, device, port) (rate(rdma_roce_cnp_handled_total{%s}[%s]))' % (sel, RI),
                   "{{instance}} {{device}}/{{port}}")], unit="cps"),
        ts("ECN-marked packets received", [
            target('sum by (instance, device, port) (rate(rdma_roce_ecn_marked_packets_total{%s}[%s]))' % (sel, RI),
                   "{{instance}} {{device}}/{{port}}")], unit="pps"),
        row("Transport"),
        ts("Out-of-sequence packets", [
            target('sum by (instance, device, port) (rate(rdma_out_of_sequence_packets_total{%s}[%s]))' % (sel, RI),
                   "{{instance}} {{device}}/{{port}}")], unit="pps"),
        ts("Retransmissions (local ACK timeouts, sequence NAKs)", [
            target('sum by (instance, device, port) (rate(rdma_retransmissions_total{%s}[%s]))' % (sel, RI),
                   "{{instance}} {{device}}/{{port}} retransmitted"),
            target('sum by (instance, device, port) (rate(rdma_local_ack_timeouts_total{%s}[%s]))' % (sel, RI),
                   "{{instance}} {{device}}/{{port}} ack timeout"),
            target('sum by (instance, device, port) (rate(rdma_packet_sequence_error_naks_total{%s}[%s]))' % (sel, RI),
                   "{{instance}} {{device}}/{{port}} seq NAK")], unit="cps"),
        row("RoCE port traffic"),
        ts("RoCE port throughput", [
            target('sum by (instance, device, port) (rate(rdma_port_receive_bytes_total{%s}[%s]) '
                   '* on(job, instance, device, port) group_left() rdma_port_info{%s, link_layer="Ethernet"})'
                   % (PORT, RI, PORT), "{{instance}} {{device}}/{{port}} rx"),
            target('sum by (instance, device, port) (rate(rdma_port_transmit_bytes_total{%s}[%s]) '
                   '* on(job, instance, device, port) group_left() rdma_port_info{%s, link_layer="Ethernet"})'
                   % (PORT, RI, PORT), "{{instance}} {{device}}/{{port}} tx")], unit="Bps", w=24),
    ]


def named(expr, sel):
    """expr (series labelled node_guid, port) with the node and far-end names of the fabric _info series."""
    sel = "{%s}" % sel if sel else ""
    return ('%s * on(job, instance, node_guid, port) group_left(remote_name, remote_port) rdma_pma_fabric_port_info%s'
            ' * on(job, instance, node_guid) group_left(node_name) rdma_pma_fabric_node_info%s' % (expr, sel, sel))


def dash_pma():
    fab = 'job=~"$job", instance=~"$node"'
    return "rdma-ib-pma-fabric", "RDMA / InfiniBand PMA fabric", ["infiniband", "pma"], variables(), [
        row("Local InfiniBand ports (sysfs PMA)"),
        ts("Transmit wait per port (PortXmitWait)", [
            target('rate(rdma_port_transmit_wait_total{%s}[%s]) * on(job, instance, device, port) group_left() '
                   'rdma_port_info{%s, link_layer="InfiniBand"}' % (PORT, RI, PORT), "{{instance}} {{device}}/{{port}}")],
           desc="Ticks per second with data queued but no flow-control credits."),
        ts("Transmit wait ratio", [
            target('rate(rdma_port_transmit_wait_total{%s}[%s]) / on(job, instance, device, port) '
                   '(rate(rdma_port_transmit_packets_total{%s}[%s]) > 0)' % (PORT, RI, PORT, RI),
                   "{{instance}} {{device}}/{{port}}")],
           desc="Wait ticks per packet sent: comparable across link speeds."),
        ts("Local port error details", err_targets(PORT), unit="cps", w=24),
        row("Fabric (PMA fabric mode)"),
        ts("Switch port transmit wait (top 20)", [
            target('topk(20, %s)' % named('rate(rdma_pma_fabric_port_transmit_wait_total{%s}[%s])' % (fab, RI), fab),
                   "{{node_name}} port {{port}} → {{remote_name}} {{remote_port}}")], w=24),
        ts("Switch port symbol errors (top 20)", [
            target('topk(20, %s)' % named('rate(rdma_pma_fabric_port_symbol_errors_total{%s}[%s])' % (fab, RI), fab),
                   "{{node_name}} port {{port}} → {{remote_name}} {{remote_port}}")]),
        ts("Switch port receive errors (top 20)", [
            target('topk(20, %s)' % named('rate(rdma_pma_fabric_port_receive_errors_total{%s}[%s])' % (fab, RI), fab),
                   "{{node_name}} port {{port}} → {{remote_name}} {{remote_port}}")]),
        table("Cable ends (links with errors in range)", [
            target('sum by (node_name, port, remote_name, remote_port) (%s)' % named(
                   '(increase(rdma_pma_fabric_port_symbol_errors_total{%s}[$__range]) + '
                   'increase(rdma_pma_fabric_port_link_downed_total{%s}[$__range]) + '
                   'increase(rdma_pma_fabric_port_receive_errors_total{%s}[$__range]))' % (fab, fab, fab), fab),
                   instant=True, fmt="table")], exclude=("Time",),
            desc="Symbol errors + link downed + receive errors per link in the range, with both cable ends."),
        ts("Fabric scrape duration", [
            target('rdma_pma_fabric_scrape_duration_seconds{%s}' % fab, "{{instance}}")], unit="s"),
        ts("MAD timeouts", [
            target('sum by (instance) (rate(rdma_pma_fabric_mad_timeouts_total{%s}[%s]))' % (fab, RI), "{{instance}}")],
           unit="cps"),
        row("Links and subnet manager (fabric mode)"),
        table("Links (both ends, training, degraded; down links with their last-known far end)", [
            target('rdma_pma_fabric_link_info{%s} * on(job, instance, node_guid, port, remote_guid, remote_port) '
                   'group_left() rdma_pma_fabric_link_up{%s}' % (fab, fab), instant=True, fmt="table"),
            target('rdma_pma_fabric_link_degraded{%s}' % fab, instant=True, fmt="table")],
            exclude=("Time", "__name__", "job"), w=24,
            desc="One row per link: value A = up (1) or down (0, kept with its last-known far end), value B = "
                 "degraded (trained below what both ends support and one enables)."),
        table("Subnet managers", [
            target('rdma_pma_fabric_sm_info{%s} * on(job, instance, sm_guid) group_left() '
                   'rdma_pma_fabric_sm_priority{%s}' % (fab, fab), instant=True, fmt="table"),
            target('rdma_pma_fabric_sm_state{%s} == 1' % fab, instant=True, fmt="table")],
            exclude=("Time", "__name__", "job"),
            desc="Every SM that answers SMInfo: node, port, LID, priority (value A) and state."),
        ts("Masters and ActCount rate", [
            target('rdma_pma_fabric_sm_masters{%s}' % fab, "{{instance}} masters"),
            target('rate(rdma_pma_fabric_sm_act_count{%s}[%s])' % (fab, RI), "{{instance}} {{sm_guid}} ActCount/s")],
           desc="1 master is healthy; an SM whose ActCount rate drops to 0 is stuck."),
    ]


def dash_prober():
    sel = JOB
    return "rdma-prober", "RDMA / Prober", ["prober"], variables(extra_port=False), [
        row("Latency"),
        heatmap("RTT distribution (all pairs)",
                'sum by (le) (rate(rdma_prober_rtt_seconds_bucket{%s}[%s]))' % (sel, RI)),
        ts("RTT p50 per peer", [
            target('histogram_quantile(0.5, sum by (le, instance, peer) (rate(rdma_prober_rtt_seconds_bucket{%s}[%s])))'
                   % (sel, RI), "{{instance}} → {{peer}}")], unit="s"),
        ts("RTT p99 per peer", [
            target('histogram_quantile(0.99, sum by (le, instance, peer) (rate(rdma_prober_rtt_seconds_bucket{%s}[%s])))'
                   % (sel, RI), "{{instance}} → {{peer}}")], unit="s"),
        row("Loss"),
        ts("Probe loss ratio per peer", [
            target('sum by (instance, peer) (rate(rdma_prober_probes_lost_total{%s}[%s])) / '
                   'sum by (instance, peer) (rate(rdma_prober_probes_sent_total{%s}[%s]))' % (sel, RI, sel, RI),
                   "{{instance}} → {{peer}}")], unit="percentunit"),
        ts("Peers down", [
            target('count by (instance) (rdma_prober_peer_up{%s} == 0)' % sel, "{{instance}}")]),
        ts("Probe errors", [
            target('sum by (instance, reason) (rate(rdma_prober_errors_total{%s}[%s]))' % (sel, RI),
                   "{{instance}} {{reason}}")], unit="cps", w=24),
        row("Fault localization (docs/prober.md)"),
        ts("Faults per rail: local_port, peer, path", [
            target('sum by (rail, verdict) (rdma_prober_verdict{%s, verdict!="none"})' % sel,
                   "rail {{rail}} {{verdict}}")], stack=True,
           desc="Nodes whose last window found each kind of fault, per rail. One node's local_port is that "
                "node's NIC; many nodes' peer naming one subject is that peer; path on many nodes of one rail "
                "is a link of that rail's fabric."),
        table("Blamed now", [
            target('max by (instance, rail, verdict, subject) (rdma_prober_blamed{%s})' % sel,
                   instant=True, fmt="table")], exclude=("Time", "Value"), w=12,
              desc="Local ports and peers blamed by the last window: a subject blamed from many instances is "
                   "the culprit."),
        ts("Lossy flows per link", [
            target('max by (instance, device, peer) (rdma_prober_link_flows_lossy{%s}) > 0' % sel,
                   "{{instance}} {{device}} → {{peer}}")], w=12,
           desc="Flows (RC QPs, one ECMP path each) of a link that lost probes in the last window; fewer than the "
                "link's judged flows is a path picture."),
        table("Pairs probed (rail by rail)", [
            target('max by (instance, device, peer, peer_device, rail) (rdma_prober_link_info{%s})' % sel,
                   instant=True, fmt="table")], exclude=("Time", "Value"), w=12,
              desc="Each local port and the peer's port it probes, with the pair's rail (docs/prober.md, Pairing): "
                   "a port missing here probes nothing."),
        stat("Peers without a link (unpaired)", 'sum(rdma_prober_peers_unpaired{%s}) or vector(0)' % sel, w=12,
             thresholds=RED_IF_ANY),
        row("On-demand probes (/probe, docs/probe.md)"),
        ts("Probe bandwidth (write_bw): average and peak", [
            target('max by (instance) (rdma_probe_bandwidth_bytes_per_second{%s})' % sel, "{{instance}} average"),
            target('max by (instance) (rdma_probe_peak_bandwidth_bytes_per_second{%s})' % sel, "{{instance}} peak")],
           unit="Bps", desc="Scraped from /probe by a blackbox-style job; instance = the probed peer."),
        ts("Probe RTT (write_lat): median and p99", [
            target('max by (instance) (rdma_probe_rtt_seconds{%s, percentile="50"})' % sel, "{{instance}} p50"),
            target('max by (instance) (rdma_probe_rtt_seconds{%s, percentile="99"})' % sel, "{{instance}} p99")],
           unit="s"),
        ts("Probe failures by reason", [
            target('count by (instance, reason) (rdma_probe_failure_info{%s})' % sel, "{{instance}} {{reason}}")]),
        ts("/probe requests by result", [
            target('sum by (instance, module, result) (rate(rdma_probe_requests_total{%s}[%s]))' % (sel, RI),
                   "{{instance}} {{module}} {{result}}")], unit="cps"),
        ts("Port counters that moved during probes", [
            target('max by (instance, counter) (rdma_probe_port_increase{%s})' % sel, "{{instance}} {{counter}}")],
           w=24),
        row("Prober health"),
        stat("Nodes with the prober enabled",
             'count(rdma_exporter_collector_success{%s, collector="prober"}) or vector(0)' % sel, w=8),
        stat("Prober failing",
             'count(rdma_exporter_collector_success{%s, collector="prober"} == 0) or vector(0)' % sel,
             w=8, thresholds=RED_IF_ANY),
        stat("Prober errors/s",
             'sum(rate(rdma_exporter_collector_errors_total{%s, collector="prober"}[%s])) or vector(0)' % (sel, RI),
             unit="cps", w=8),
    ] + suspect_panels()  # the suspect links and matrices, below


def layout(panels, documented, undocumented, dash):
    out, x, y, rowh, pid = [], 0, 0, 0, 1
    pending_row = None
    for p in panels:
        if p["type"] == "row":
            pending_row = p
            continue
        p = dict(p)
        kept = []
        for t in p["targets"]:
            missing = sorted(m for m in promql_util.metrics_in(t["expr"]) if m not in documented)
            if missing:
                undocumented.append("%s: %s [%s]: %s" % (dash, p["title"], t["expr"][:60], ", ".join(missing)))
            kept.append(t)
        if not kept:
            continue
        if pending_row is not None:
            if x:
                x, y = 0, y + rowh
            out.append({"type": "row", "title": pending_row["title"], "collapsed": False, "id": pid,
                        "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
            pid, y, rowh, pending_row = pid + 1, y + 1, 0, None
        w, h = p.pop("w"), p.pop("h")
        if x + w > 24:
            x, y, rowh = 0, y + rowh, 0
        for i, t in enumerate(kept):
            t["refId"] = chr(ord("A") + i)
        p["targets"] = kept
        p["id"] = pid
        p["datasource"] = DS
        p["gridPos"] = {"h": h, "w": w, "x": x, "y": y}
        pid += 1
        x += w
        rowh = max(rowh, h)
        out.append(p)
    return out


def dashboard(uid, title, tags, templ, panels, documented, undocumented):
    return {
        "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                                  "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                                  "name": "Annotations & Alerts", "type": "dashboard"}]},
        "description": "rdma_exporter: " + title.split(" / ")[1],
        "editable": True, "fiscalYearStartMonth": 0, "graphTooltip": 1, "id": None,
        "links": [{"asDropdown": True, "includeVars": True, "keepTime": True, "tags": ["rdma_exporter"],
                   "title": "RDMA dashboards", "type": "dashboards", "icon": "external link",
                   "targetBlank": False, "tooltip": "", "url": ""}],
        "panels": layout(panels, documented, undocumented, uid),
        "refresh": "30s", "schemaVersion": 39, "tags": ["rdma_exporter", "rdma"] + tags,
        "templating": {"list": templ}, "time": {"from": "now-6h", "to": "now"},
        "timepicker": {}, "timezone": "", "title": title, "uid": uid, "version": 1, "weekStart": "",
    }


# --------------------------------------------------------------------------------------------
# Alert rules. Each alert carries its promtool unit tests: `fire` series make it fire (the
# expected labels are checked), `quiet` series keep it silent.
# --------------------------------------------------------------------------------------------
P = 'job="rdma-exporter", instance="node1", device="mlx5_0", port="1"'
J = 'job="rdma-exporter", instance="node1"'
FABRIC_INFO = [
    ('rdma_pma_fabric_port_info{%s, node_guid="0x1", port="3", remote_guid="0x2", remote_name="node7 mlx5_0", remote_port="1"}' % J, "1x40"),
    ('rdma_pma_fabric_node_info{%s, node_guid="0x1", node_name="leaf1", node_description="leaf1", node_type="switch"}' % J, "1x40")]


def alert(name, expr, for_, severity, summary, description, fire, quiet, labels, eval_at="20m"):
    return {"name": name, "expr": expr, "for": for_, "severity": severity, "summary": summary,
            "description": description, "fire": fire, "quiet": quiet,
            "labels": dict({"job": "rdma-exporter"}, **labels), "eval_at": eval_at}


def node_alerts():
    """The per-node alert table, with the selectors and thresholds of C (configure() first)."""
    return [
    ("rdma-exporter", [
        alert("RdmaExporterDown", "up{%(selector)s} == 0" % C, "5m", "critical",
              "rdma_exporter on {{ $labels.instance }} is down",
              "Prometheus could not scrape rdma_exporter on {{ $labels.instance }} for 5 minutes: no RDMA "
              "metrics from this node.",
              [("up{%s}" % J, "1 0x30")], [("up{%s}" % J, "1x30")], {"instance": "node1", "job": "rdma-exporter"}),
        alert("RdmaExporterCollectorFailing", "rdma_exporter_collector_success{%(selector)s} == 0" % C, "10m", "warning",
              "Collector {{ $labels.collector }} fails on {{ $labels.instance }}",
              "The {{ $labels.collector }} collector has not completed a scrape for 10 minutes (timeout or "
              "exception); its metrics are missing or stale.",
              [('rdma_exporter_collector_success{%s, collector="port"}' % J, "0x30")],
              [('rdma_exporter_collector_success{%s, collector="port"}' % J, "1x30")],
              {"instance": "node1", "collector": "port"}),
        alert("RdmaExporterCollectorErrors",
              'sum by (job, instance, collector, reason) (rate(rdma_exporter_collector_errors_total'
              '{%(selector)s, reason!~"not_supported|not_available"}[5m])) > 0' % C, "30m", "info",
              "Collector {{ $labels.collector }} reports {{ $labels.reason }} errors on {{ $labels.instance }}",
              "{{ $labels.collector }} has counted {{ $labels.reason }} errors for 30 minutes "
              "({{ $value | humanize }}/s). The exporter log names the file or request once per cause.",
              [('rdma_exporter_collector_errors_total{%s, collector="port", reason="io_error"}' % J, "0+2x60")],
              [('rdma_exporter_collector_errors_total{%s, collector="port", reason="io_error"}' % J, "5x60"),
               ('rdma_exporter_collector_errors_total{%s, collector="port", reason="not_supported"}' % J, "0+2x60")],
              {"instance": "node1", "collector": "port", "reason": "io_error"}, eval_at="50m"),
    ]),
    ("rdma-ports", [
        alert("RdmaPortDown",
              "rdma_port_state{%(selector)s} < 4 and on(job, instance, device, port) "
              "max_over_time(rdma_port_state{%(selector)s}[1d]) >= 4" % C,
              "5m", "critical",
              "RDMA port {{ $labels.device }}/{{ $labels.port }} on {{ $labels.instance }} is down",
              "Port {{ $labels.device }}/{{ $labels.port }} left ACTIVE (state {{ $value }}) and has not come back "
              "for 5 minutes. Ports never ACTIVE in the last day (unused ports) do not alert.",
              [("rdma_port_state{%s}" % P, "4x5 1x30")],
              [("rdma_port_state{%s}" % P, "1x30"), ('rdma_port_state{%s}' % P.replace('"1"', '"2"'), "4x30")],
              {"instance": "node1", "device": "mlx5_0", "port": "1"}),
        alert("RdmaPortFlapping", "increase(rdma_port_link_downed_total{%(selector)s}[30m]) > %(link_downs_per_30m)s" % C, "0m", "warning",
              "RDMA port {{ $labels.device }}/{{ $labels.port }} on {{ $labels.instance }} is flapping",
              "The link went down {{ $value | humanize }} times in 30 minutes (LinkDownedCounter).",
              [("rdma_port_link_downed_total{%s}" % P, "0 0 1 1 2 3 4 4x20")],
              [("rdma_port_link_downed_total{%s}" % P, "7 7 8 8x20")],
              {"instance": "node1", "device": "mlx5_0", "port": "1"}),
        alert("RdmaPortSymbolErrorsRising",
              "increase(rdma_port_symbol_errors_total{%(selector)s}[10m]) > %(symbol_errors_per_10m)s" % C, "10m", "warning",
              "Symbol errors rising on {{ $labels.device }}/{{ $labels.port }} ({{ $labels.instance }})",
              "{{ $value | humanize }} symbol errors in 10 minutes: a marginal cable, transceiver or port.",
              [("rdma_port_symbol_errors_total{%s}" % P, "0+5x40")],
              [("rdma_port_symbol_errors_total{%s}" % P, "100+0x40")],
              {"instance": "node1", "device": "mlx5_0", "port": "1"}, eval_at="30m"),
        alert("RdmaPortLinkErrorsRising",
              "increase(rdma_port_link_error_recovery_total{%(selector)s}[10m]) "
              "+ increase(rdma_port_receive_errors_total{%(selector)s}[10m]) "
              "+ increase(rdma_port_local_link_integrity_errors_total{%(selector)s}[10m]) > %(link_errors_per_10m)s" % C, "10m", "warning",
              "Link errors rising on {{ $labels.device }}/{{ $labels.port }} ({{ $labels.instance }})",
              "Link error recoveries, receive errors and local link integrity errors add up to "
              "{{ $value | humanize }} in 10 minutes.",
              [("rdma_port_link_error_recovery_total{%s}" % P, "0+1x40"),
               ("rdma_port_receive_errors_total{%s}" % P, "0+2x40"),
               ("rdma_port_local_link_integrity_errors_total{%s}" % P, "0x40")],
              [("rdma_port_link_error_recovery_total{%s}" % P, "3x40"),
               ("rdma_port_receive_errors_total{%s}" % P, "0x40"),
               ("rdma_port_local_link_integrity_errors_total{%s}" % P, "0x40")],
              {"instance": "node1", "device": "mlx5_0", "port": "1"}, eval_at="30m"),
        alert("RdmaPortPmaCounterSaturated", "rdma_port_pma_saturated{%(selector)s} == 1" % C, "1h", "info",
              "PMA counter {{ $labels.counter }} saturated on {{ $labels.device }}/{{ $labels.port }}",
              "{{ $labels.counter }} sits at its maximum and no longer counts; errors it should show are hidden "
              "until it is reset.",
              [('rdma_port_pma_saturated{%s, counter="symbol_error"}' % P, "1x90")],
              [('rdma_port_pma_saturated{%s, counter="symbol_error"}' % P, "0x90")],
              {"instance": "node1", "device": "mlx5_0", "port": "1", "counter": "symbol_error"}, eval_at="80m"),
        alert("RdmaPortTransmitWaitHigh",
              "rate(rdma_port_transmit_wait_total{%(selector)s}[5m]) / (rate(rdma_port_transmit_packets_total{%(selector)s}[5m]) > 0) "
              "> %(transmit_wait_ticks_per_packet)s" % C,
              "15m", "warning",
              "Transmit wait high on {{ $labels.device }}/{{ $labels.port }} ({{ $labels.instance }})",
              "PortXmitWait grows {{ $value | humanize }} ticks per packet sent: the port waits for credits, "
              "the fabric downstream is congested.",
              [("rdma_port_transmit_wait_total{%s}" % P, "0+60000x40"),
               ("rdma_port_transmit_packets_total{%s}" % P, "0+1000x40")],
              [("rdma_port_transmit_wait_total{%s}" % P, "0+60x40"),
               ("rdma_port_transmit_packets_total{%s}" % P, "0+1000x40")],
              {"instance": "node1", "device": "mlx5_0", "port": "1"}, eval_at="30m"),
    ]),
    ("rdma-roce", [
        alert("RdmaRocePfcPauseStorm", "increase(rdma_netdev_pause_storm_events_total{%(selector)s}[5m]) > 0" % C, "0m", "critical",
              "PFC pause storm on {{ $labels.netdev }} ({{ $labels.instance }})",
              "The NIC detected a pause storm ({{ $labels.direction }}, {{ $labels.level }}): a receiver stopped draining and pauses its "
              "link partner; the storm can spread through the fabric.",
              [('rdma_netdev_pause_storm_events_total{%s, netdev="eth2", device="mlx5_0", port="1", direction="tx", level="error"}' % J, "0 0 1 1x20")],
              [('rdma_netdev_pause_storm_events_total{%s, netdev="eth2", device="mlx5_0", port="1", direction="tx", level="error"}' % J, "1x20")],
              {"instance": "node1", "netdev": "eth2", "device": "mlx5_0", "port": "1", "direction": "tx", "level": "error"}, eval_at="4m"),
        alert("RdmaRocePfcPausedHigh",
              "rate(rdma_netdev_pfc_pause_duration_seconds_total{%(selector)s}[5m]) > %(pfc_paused_ratio)s" % C, "10m", "warning",
              "Priority {{ $labels.priority }} paused {{ $value | humanizePercentage }} on {{ $labels.netdev }}",
              "{{ $labels.netdev }} ({{ $labels.direction }}) spends {{ $value | humanizePercentage }} of the time "
              "paused on priority {{ $labels.priority }}.",
              [('rdma_netdev_pfc_pause_duration_seconds_total{%s, netdev="eth2", device="mlx5_0", port="1", direction="rx", priority="3"}' % J,
                "0+30x40")],
              [('rdma_netdev_pfc_pause_duration_seconds_total{%s, netdev="eth2", device="mlx5_0", port="1", direction="rx", priority="3"}' % J,
                "0+1x40")],
              {"instance": "node1", "netdev": "eth2", "device": "mlx5_0", "port": "1", "direction": "rx", "priority": "3"}, eval_at="30m"),
        # Only a configuration known to be off pages: what the host cannot tell (no DCB, the netdev
        # in another namespace, no ECN files) is on the dashboard, not an alert.
        alert("RdmaRoceConfigInconsistent",
              'rdma_netdev_roce_priority_consistent{%(selector)s, reason=~"pfc_disabled|ecn_disabled"} == 0' % C, "5m", "warning",
              "RoCE priority {{ $labels.priority }} misconfigured on {{ $labels.device }}/{{ $labels.port }} ({{ $labels.instance }})",
              "PFC/ECN for the RoCE priority is not as expected: {{ $labels.reason }}.",
              [('rdma_netdev_roce_priority_consistent{%s, priority="3", reason="pfc_disabled"}' % P, "0x20")],
              [('rdma_netdev_roce_priority_consistent{%s, priority="3", reason="ok"}' % P, "1x20"),
               ('rdma_netdev_roce_priority_consistent{%s, priority="4", reason="pfc_unknown"}' % P, "0x20"),
               ('rdma_netdev_roce_priority_consistent{%s, priority="5", reason="ecn_not_exposed"}' % P, "1x20")],
              {"instance": "node1", "device": "mlx5_0", "port": "1", "priority": "3", "reason": "pfc_disabled"}),
        alert("RdmaRoceCnpRateHigh", "rate(rdma_roce_cnp_handled_total{%(selector)s}[5m]) > %(cnp_per_second)s" % C, "15m", "warning",
              "Sustained congestion notifications on {{ $labels.device }}/{{ $labels.port }}",
              "The port handles {{ $value | humanize }} CNPs/s: its flows are being slowed down by DCQCN.",
              [("rdma_roce_cnp_handled_total{%s}" % P, "0+120000x40")],
              [("rdma_roce_cnp_handled_total{%s}" % P, "0+600x40")],
              {"instance": "node1", "device": "mlx5_0", "port": "1"}, eval_at="30m"),
        alert("RdmaRoceEcnMarkRateHigh",
              "rate(rdma_roce_ecn_marked_packets_total{%(selector)s}[5m]) > %(ecn_marked_per_second)s" % C, "15m", "warning",
              "Sustained ECN marking towards {{ $labels.device }}/{{ $labels.port }}",
              "{{ $value | humanize }} ECN-marked packets/s received: switch queues on the path are building up.",
              [("rdma_roce_ecn_marked_packets_total{%s}" % P, "0+120000x40")],
              [("rdma_roce_ecn_marked_packets_total{%s}" % P, "0+600x40")],
              {"instance": "node1", "device": "mlx5_0", "port": "1"}, eval_at="30m"),
        alert("RdmaRoceOutOfSequenceHigh",
              "rate(rdma_out_of_sequence_packets_total{%(selector)s}[5m]) > %(out_of_sequence_per_second)s" % C, "15m", "warning",
              "Out-of-sequence packets on {{ $labels.device }}/{{ $labels.port }}",
              "{{ $value | humanize }} out-of-sequence packets/s: packets are dropped on the path (lossy "
              "fabric, PFC not working) and go-back-N retransmits.",
              [("rdma_out_of_sequence_packets_total{%s}" % P, "0+12000x40")],
              [("rdma_out_of_sequence_packets_total{%s}" % P, "0+60x40")],
              {"instance": "node1", "device": "mlx5_0", "port": "1"}, eval_at="30m"),
        alert("RdmaRoceRetransmissionsHigh",
              "rate(rdma_retransmissions_total{%(selector)s}[5m]) > %(retransmissions_per_second)s" % C, "15m", "warning",
              "Transport retransmissions on {{ $labels.device }}/{{ $labels.port }}",
              "{{ $value | humanize }} packets/s retransmitted by the transport (after NAKs or ACK timeouts).",
              [("rdma_retransmissions_total{%s}" % P, "0+1200x40")],
              [("rdma_retransmissions_total{%s}" % P, "0+6x40")],
              {"instance": "node1", "device": "mlx5_0", "port": "1"}, eval_at="30m"),
        # A QP whose retry count ran out is in the error state: the job using it fails (NCCL:
        # "transport retry counter exceeded"). Any increase pages, per port and kind.
        alert("RdmaQpRetriesExceeded",
              "increase(rdma_qp_retries_exceeded_total{%(selector)s}[10m]) > %(qp_retries_exceeded_per_10m)s" % C, "0m", "warning",
              "Queue pairs failed on {{ $labels.device }}/{{ $labels.port }}: {{ $labels.kind }} retries exceeded",
              "{{ $value | humanize }} queue pairs on {{ $labels.instance }} {{ $labels.device }} port {{ $labels.port }} "
              "ran out of {{ $labels.kind }} retries in 10 minutes and went to the error state: the jobs using them "
              "failed or reconnected.",
              [('rdma_qp_retries_exceeded_total{%s, kind="transport"}' % P, "0x10 0+1x30")],
              [('rdma_qp_retries_exceeded_total{%s, kind="transport"}' % P, "3x40")],
              {"instance": "node1", "device": "mlx5_0", "port": "1", "kind": "transport"}, eval_at="30m"),
    ]),
    ("rdma-pma-fabric", [
        alert("RdmaFabricTransmitWaitHigh",
              named("rate(rdma_pma_fabric_port_transmit_wait_total{%(fabric_selector)s}[5m])" % C, C["fabric_selector"])
              + " > %(fabric_transmit_wait_ticks_per_second)s" % C, "15m", "warning",
              "Fabric congestion at {{ $labels.node_name }} port {{ $labels.port }}",
              "The port (towards {{ $labels.remote_name }} port {{ $labels.remote_port }}) waits {{ $value | humanize }} ticks/s for credits (PortXmitWait).",
              [('rdma_pma_fabric_port_transmit_wait_total{%s, node_guid="0x1", port="3"}' % J, "0+120000000x40")] + FABRIC_INFO,
              [('rdma_pma_fabric_port_transmit_wait_total{%s, node_guid="0x1", port="3"}' % J, "0+6000x40")] + FABRIC_INFO,
              {"instance": "node1", "node_guid": "0x1", "node_name": "leaf1", "port": "3", "remote_name": "node7 mlx5_0", "remote_port": "1"}, eval_at="30m"),
        # Subnet manager and link training: rdma_pma_fabric_sm_* and _link_* of fabric mode.
        alert("RdmaFabricNoMasterSm", "rdma_pma_fabric_sm_masters{%(fabric_selector)s} == 0" % C, "2m", "critical",
              "No master subnet manager seen from {{ $labels.instance }}",
              "No SM answers SMInfo in the master state: the fabric is not swept, and links or nodes that "
              "change are not brought up.",
              [('rdma_pma_fabric_sm_masters{%s}' % J, "1 0x20")], [('rdma_pma_fabric_sm_masters{%s}' % J, "1x20")],
              {"instance": "node1"}),
        alert("RdmaFabricMultipleMasterSms", "rdma_pma_fabric_sm_masters{%(fabric_selector)s} > 1" % C, "2m", "critical",
              "More than one master subnet manager seen from {{ $labels.instance }}",
              "More than one SM answers SMInfo as master: the subnet is split or two SMs fight over it.",
              [('rdma_pma_fabric_sm_masters{%s}' % J, "1 2x20")], [('rdma_pma_fabric_sm_masters{%s}' % J, "1x20")],
              {"instance": "node1"}),
        alert("RdmaFabricSmStuck", "rdma_pma_fabric_sm_stuck{%(fabric_selector)s} == 1" % C, "5m", "warning",
              "Subnet manager {{ $labels.sm_guid }} is stuck",
              "The SM's SMInfo ActCount has not advanced over the last polls (fabric-sm-stuck-polls): the SM "
              "process answers but no longer runs its state machine.",
              [('rdma_pma_fabric_sm_stuck{%s, sm_guid="0x1"}' % J, "0 1x20")],
              [('rdma_pma_fabric_sm_stuck{%s, sm_guid="0x1"}' % J, "0x20")], {"instance": "node1", "sm_guid": "0x1"}),
        alert("RdmaFabricSmMasterChanges",
              "increase(rdma_pma_fabric_sm_master_changes_total{%(fabric_selector)s}[1h]) > 2" % C, "0m", "warning",
              "The master subnet manager seen from {{ $labels.instance }} keeps changing",
              "The master SM changed more than twice in an hour (handovers or SMs restarting): check the "
              "SMs' logs and priorities.",
              [('rdma_pma_fabric_sm_master_changes_total{%s}' % J, "0+1x40")],
              [('rdma_pma_fabric_sm_master_changes_total{%s}' % J, "0x40")], {"instance": "node1"}),
        alert("RdmaFabricLinkDegraded", "rdma_pma_fabric_link_degraded{%(fabric_selector)s} == 1" % C, "15m", "warning",
              "Link {{ $labels.node_guid }} port {{ $labels.port }} runs at {{ $labels.active_width }} {{ $labels.active_speed }}",
              "The link to {{ $labels.remote_guid }} port {{ $labels.remote_port }} trained at {{ $labels.active_width }} "
              "{{ $labels.active_speed }} where both ends can do {{ $labels.possible_width }} {{ $labels.possible_speed }}.",
              [('rdma_pma_fabric_link_degraded{%s, node_guid="0x1", port="3", remote_guid="0x2", remote_port="1", '
                'active_width="1x", possible_width="4x", active_speed="NDR", possible_speed="NDR"}' % J, "1x40")],
              [('rdma_pma_fabric_link_degraded{%s, node_guid="0x1", port="3", remote_guid="0x2", remote_port="1", '
                'active_width="4x", possible_width="4x", active_speed="NDR", possible_speed="NDR"}' % J, "0x40")],
              {"instance": "node1", "node_guid": "0x1", "port": "3", "remote_guid": "0x2", "remote_port": "1",
               "active_width": "1x", "possible_width": "4x", "active_speed": "NDR", "possible_speed": "NDR"}),
        stale_alert("RdmaFabricSnapshotStale", "rdma_pma_fabric_snapshot_age_seconds", "rdma_pma_fabric_refresh_interval_seconds",
                    "rdma_pma_fabric_scrape_duration_seconds", C["fabric_selector"],
                    "The fabric snapshot served by {{ $labels.instance }} is stale",
                    "a fabric snapshot", "fabric refreshes: the fabric loop fails or hangs, and every "
                    "rdma_pma_fabric_* series of this exporter stands still",
                    # Healthy at the defaults (fabric-period 60s): up to one period and a refresh.
                    every_s=60, took_s=2, healthy_age=61),
    ]),
    ("rdma-prober", [
        alert("RdmaProbeLoss",
              "sum by (job, instance, peer) (rate(rdma_prober_probes_lost_total{%(selector)s}[5m])) / "
              "sum by (job, instance, peer) (rate(rdma_prober_probes_sent_total{%(selector)s}[5m])) > %(probe_loss_ratio)s" % C, "5m", "warning",
              "RDMA probes from {{ $labels.instance }} to {{ $labels.peer }} are lost",
              "{{ $value | humanizePercentage }} of the probes to {{ $labels.peer }} were lost over 5 minutes.",
              [('rdma_prober_probes_lost_total{%s, peer="node2"}' % J, "0+5x30"),
               ('rdma_prober_probes_sent_total{%s, peer="node2"}' % J, "0+60x30")],
              [('rdma_prober_probes_lost_total{%s, peer="node2"}' % J, "0x30"),
               ('rdma_prober_probes_sent_total{%s, peer="node2"}' % J, "0+60x30")],
              {"instance": "node1", "peer": "node2"}),
        alert("RdmaProbeRttHigh",
              "histogram_quantile(0.99, sum by (job, instance, peer, le) (rate(rdma_prober_rtt_seconds_bucket{%(selector)s}[5m]))) "
              "> %(probe_rtt_p99_seconds)s" % C, "10m", "warning",
              "RDMA RTT p99 from {{ $labels.instance }} to {{ $labels.peer }} is {{ $value | humanizeDuration }}",
              "The 99th percentile of the RDMA WRITE round trip is above %gµs for 10 minutes."
              % (float(C["probe_rtt_p99_seconds"]) * 1e6),
              [('rdma_prober_rtt_seconds_bucket{%s, peer="node2", le="0.00001"}' % J, "0+10x40"),
               ('rdma_prober_rtt_seconds_bucket{%s, peer="node2", le="0.001"}' % J, "0+60x40"),
               ('rdma_prober_rtt_seconds_bucket{%s, peer="node2", le="+Inf"}' % J, "0+60x40")],
              [('rdma_prober_rtt_seconds_bucket{%s, peer="node2", le="0.00001"}' % J, "0+60x40"),
               ('rdma_prober_rtt_seconds_bucket{%s, peer="node2", le="0.001"}' % J, "0+60x40"),
               ('rdma_prober_rtt_seconds_bucket{%s, peer="node2", le="+Inf"}' % J, "0+60x40")],
              {"instance": "node1", "peer": "node2"}, eval_at="30m"),
        alert("RdmaProbePathFault", 'rdma_prober_verdict{%(selector)s, verdict="path"} == 1' % C, "5m", "warning",
              "Lossy ECMP path on rail {{ $labels.rail }} seen from {{ $labels.instance }}",
              "Some flows of rail {{ $labels.rail }} lose probes while others to the same peers do not: a link or "
              "switch between the leaves drops part of the traffic.",
              [('rdma_prober_verdict{%s, rail="1", verdict="path"}' % J, "1x20")],
              [('rdma_prober_verdict{%s, rail="1", verdict="path"}' % J, "0x20"),
               ('rdma_prober_verdict{%s, rail="1", verdict="none"}' % J, "1x20")],
              {"instance": "node1", "rail": "1", "verdict": "path"}),
        alert("RdmaProbeLocalPortFault", 'rdma_prober_blamed{%(selector)s, verdict="local_port"} == 1' % C, "2m", "warning",
              "Local port {{ $labels.subject }} of {{ $labels.instance }} fails on rail {{ $labels.rail }}",
              "The port is down, or loses probes to every peer of rail {{ $labels.rail }} while the node's other "
              "ports reach them.",
              [('rdma_prober_blamed{%s, rail="1", verdict="local_port", subject="mlx5_0/1"}' % J, "1x20")],
              [('rdma_prober_blamed{%s, rail="1", verdict="local_port", subject="mlx5_0/1"}' % J, "1x1 _x19")],
              {"instance": "node1", "rail": "1", "verdict": "local_port", "subject": "mlx5_0/1"}),
        alert("RdmaProbePeerFault", 'rdma_prober_blamed{%(selector)s, verdict="peer"} == 1' % C, "5m", "warning",
              "Peer {{ $labels.subject }} unreachable on rail {{ $labels.rail }} from {{ $labels.instance }}",
              "Every flow to {{ $labels.subject }} on rail {{ $labels.rail }} loses probes while the rail's other "
              "peers answer.",
              [('rdma_prober_blamed{%s, rail="1", verdict="peer", subject="node2"}' % J, "1x20")],
              [('rdma_prober_blamed{%s, rail="1", verdict="peer", subject="node2"}' % J, "1x1 _x19")],
              {"instance": "node1", "rail": "1", "verdict": "peer", "subject": "node2"}),
        alert("RdmaProbePeerDown", "rdma_prober_peer_up{%(selector)s} == 0" % C, "5m", "warning",
              "RDMA peer {{ $labels.peer }} unreachable from {{ $labels.instance }}",
              "No probe to {{ $labels.peer }} has completed for 5 minutes (no connection or every probe failed).",
              [('rdma_prober_peer_up{%s, peer="node2"}' % J, "0x20")],
              [('rdma_prober_peer_up{%s, peer="node2"}' % J, "1x20")],
              {"instance": "node1", "peer": "node2"}),
        alert("RdmaProbePeerUnpaired", "rdma_prober_peer_paired{%(selector)s} == 0" % C, "10m", "warning",
              "RDMA peer {{ $labels.peer }} has no link from {{ $labels.instance }}",
              "For 10 minutes the peer's port table could not be read, or none of its ports shares a rail with this "
              "node's (rail rules, subnets): it is not probed at all.",
              [('rdma_prober_peer_paired{%s, peer="node2"}' % J, "0x20")],
              [('rdma_prober_peer_paired{%s, peer="node2"}' % J, "1x20")],
              {"instance": "node1", "peer": "node2"}),
    ]),
    ("rdma-pcie-topology", [
        alert("RdmaPcieLinkDegraded", "rdma_pci_link_degraded{%(selector)s} == 1" % C, "10m", "warning",
              "PCIe link of {{ $labels.device }} degraded at {{ $labels.pci_function }} on {{ $labels.instance }}",
              "The PCIe link at hop {{ $labels.hop }} ({{ $labels.pci_function }}) on the path of {{ $labels.device }} "
              "trains below the speed or width both its ends support (e.g. x8 of x16): the NIC's PCIe bandwidth is cut.",
              [('rdma_pci_link_degraded{%s, device="mlx5_0", pci_function="0000:17:00.0", hop="1"}' % J, "1x20")],
              [('rdma_pci_link_degraded{%s, device="mlx5_0", pci_function="0000:17:00.0", hop="1"}' % J, "0x20")],
              {"instance": "node1", "device": "mlx5_0", "pci_function": "0000:17:00.0", "hop": "1"}),
        alert("RdmaPcieUncorrectableErrors",
              'increase(rdma_pci_aer_reports_total{%(selector)s, aer_severity=~"nonfatal|fatal"}[10m]) > '
              '%(pcie_uncorrectable_per_10m)s' % C, "0m", "critical",
              "Uncorrectable PCIe errors on {{ $labels.device }} at {{ $labels.pci_function }} on {{ $labels.instance }}",
              "{{ $value | humanize }} {{ $labels.aer_severity }} AER reports in 10 minutes at {{ $labels.pci_function }} "
              "(hop {{ $labels.hop }} of {{ $labels.device }}): the link or the device is failing.",
              [('rdma_pci_aer_reports_total{%s, device="mlx5_0", pci_function="0000:18:00.0", hop="0", aer_severity="nonfatal"}' % J,
                "0x10 0+1x10")],
              [('rdma_pci_aer_reports_total{%s, device="mlx5_0", pci_function="0000:18:00.0", hop="0", aer_severity="nonfatal"}' % J, "3x20"),
               ('rdma_pci_aer_reports_total{%s, device="mlx5_0", pci_function="0000:18:00.0", hop="0", aer_severity="correctable"}' % J,
                "0+5x20")],
              {"instance": "node1", "device": "mlx5_0", "pci_function": "0000:18:00.0", "hop": "0", "aer_severity": "nonfatal"}),
        alert("RdmaNodeShapeNonConformant", "rdma_topology_check{%(selector)s} == 0" % C, "15m", "warning",
              "{{ $labels.instance }} does not meet its declared shape: {{ $labels.check }} {{ $labels.subject }}",
              "Check {{ $labels.check }} of collectors.topology.expect fails for {{ $labels.subject }}: observed "
              "{{ $labels.observed }}, expected {{ $labels.expected }}.",
              [('rdma_topology_check{%s, check="gpu_nic_relation", subject="gpu0 0000:1b:00.0", observed="SYS mlx5_3", '
                'expected="<= PXB"}' % J, "0x20")],
              [('rdma_topology_check{%s, check="gpu_nic_relation", subject="gpu0 0000:1b:00.0", observed="PIX mlx5_0", '
                'expected="<= PXB"}' % J, "1x20")],
              {"instance": "node1", "check": "gpu_nic_relation", "subject": "gpu0 0000:1b:00.0", "observed": "SYS mlx5_3",
               "expected": "<= PXB"}),
        stale_alert("RdmaTopologySnapshotStale", "rdma_topology_snapshot_age_seconds", "rdma_topology_refresh_interval_seconds",
                    "rdma_topology_refresh_duration_seconds", C["selector"],
                    "The PCIe, port and peer-memory reading on {{ $labels.instance }} is stale",
                    "a topology reading", "refresh intervals: the background refresher fails or hangs, and the "
                    "PCIe link, AER and node-shape series no longer move",
                    # Healthy at the defaults (health-interval 30s): about one interval, then back.
                    every_s=30, took_s=0.5, healthy_age=30),
    ]),
]


def stale_alert(name, age, interval, duration, selector, summary, reading, consequence, **case):
    """A background reading older than snapshot_stale_intervals x (interval + last duration): one
    interval and the refresh itself is the most a healthy reading reaches. Fires on a reading that
    stopped (its age climbs 60 s a minute); quiet on the sawtooth of case's healthy_age."""
    def series(age_values):
        return [("%s{%s}" % (age, J), age_values), ("%s{%s}" % (interval, J), "%gx30" % case["every_s"]),
                ("%s{%s}" % (duration, J), "%gx30" % case["took_s"])]
    return alert(name, "%s{%s} > %s * (%s{%s} + %s{%s})" % (age, selector, C["snapshot_stale_intervals"], interval,
                                                            selector, duration, selector), "5m", "warning", summary,
                 "Scrapes serve %s {{ $value | humanizeDuration }} old, more than %s %s."
                 % (reading, C["snapshot_stale_intervals"], consequence),
                 series("0+60x30"), series("1 %g " % case["healthy_age"] * 15 + "1"), {"instance": "node1"})


def drift_recordings():
    """Fleet-wide drift as recording rules: (group, [(record, expr, [input series], {labels: value})])."""
    fw = 'rdma_device_info{%(selector)s}' % C
    return [("rdma-fleet-drift", [
        ("rdma:device_firmware:count", "count by (hca_type, fw_ver) (%s)" % fw,
         [('rdma_device_info{%s, device="mlx5_0", hca_type="MT4129", fw_ver="28.39.2048"}' % J, "1x10"),
          ('rdma_device_info{job="rdma-exporter", instance="node2", device="mlx5_0", hca_type="MT4129", fw_ver="28.39.2048"}', "1x10"),
          ('rdma_device_info{job="rdma-exporter", instance="node3", device="mlx5_0", hca_type="MT4129", fw_ver="28.41.1000"}', "1x10")],
         [({"hca_type": "MT4129", "fw_ver": "28.39.2048"}, 2), ({"hca_type": "MT4129", "fw_ver": "28.41.1000"}, 1)]),
        ("rdma:device_firmware_versions:count", "count by (hca_type) (count by (hca_type, fw_ver) (%s))" % fw,
         [('rdma_device_info{%s, device="mlx5_0", hca_type="MT4129", fw_ver="28.39.2048"}' % J, "1x10"),
          ('rdma_device_info{job="rdma-exporter", instance="node3", device="mlx5_0", hca_type="MT4129", fw_ver="28.41.1000"}', "1x10")],
         [({"hca_type": "MT4129"}, 2)]),
        ("rdma:gpu_closest_nic_relation:count",
         "count by (relation) (max by (job, instance, gpu, relation) (rdma_topology_gpu_closest_nic{%(selector)s}))" % C,
         [('rdma_topology_gpu_closest_nic{%s, gpu="0", gpu_pci="0000:1b:00.0", device="mlx5_0", relation="PIX"}' % J, "1x10"),
          ('rdma_topology_gpu_closest_nic{%s, gpu="1", gpu_pci="0000:43:00.0", device="mlx5_3", relation="NODE"}' % J, "4x10"),
          ('rdma_topology_gpu_closest_nic{%s, gpu="1", gpu_pci="0000:43:00.0", device="mlx5_4", relation="NODE"}' % J, "4x10")],
         [({"relation": "PIX"}, 1), ({"relation": "NODE"}, 1)]),
        ("rdma:node_shape_failures:count", "count by (job, instance, check) (rdma_topology_check{%(selector)s} == 0)" % C,
         [('rdma_topology_check{%s, check="firmware", subject="mlx5_0", observed="MT4129 28.41.1000", expected="28.39.2048"}' % J, "0x10"),
          ('rdma_topology_check{%s, check="firmware", subject="mlx5_3", observed="MT4129 28.39.2048", expected="28.39.2048"}' % J, "1x10")],
         [({"job": "rdma-exporter", "instance": "node1", "check": "firmware"}, 1)]),
    ])]


# --- Physical layer: flaps and BER (recording rules and alerts).
N = P + ', netdev="eth0"'
BITRATE = "on(job, instance, device, port) group_left() (rdma_port_rate_bytes_per_second{%s} * 8)"


def ber(kind, sel, window="5m"):
    """BER over the port's data rate (the line rate of 64b/66b or RS(544,514) is a few % higher:
    a slight overestimate). Pre-FEC: the bits the FEC corrected (ethtool netlink, else the driver's
    PHY counter). Post-FEC: what the FEC left (mlx5/bnxt_en PCS symbol errors, else uncorrectable
    codewords, each at least one bit). Recorded once as rdma:link_{pre,post}_fec_ber:rate5m
    (physical_recordings()); the alerts and the "Physical layer" panels read the records."""
    if kind == "pre":
        num = "(rate(rdma_netdev_fec_corrected_bits_total{%s}[%s]) or rate(rdma_netdev_phy_corrected_bits_total{%s}[%s]))" % (
            sel, window, sel, window)
    else:
        num = ('(sum without(where) (rate(rdma_netdev_phy_symbol_errors_total{%s, where="pcs"}[%s])) '
               "or rate(rdma_netdev_fec_uncorrectable_blocks_total{%s}[%s]))" % (sel, window, sel, window))
    return "(%s / %s)" % (num, BITRATE % sel)


# node-mixin naming, level:metric:operation: the BER of a link over 5 minutes.
PRE_FEC_BER = "rdma:link_pre_fec_ber:rate5m"
POST_FEC_BER = "rdma:link_post_fec_ber:rate5m"


def physical_recordings():
    """The pre-/post-FEC BER of every port with FEC counters, as recording rules (same shape as
    recordings()). Test case: 100 Gb/s (12.5e9 bytes/s); 120e6 corrected bits/min = 2e-5 pre-FEC,
    600 uncorrectable blocks/min = 1e-10 post-FEC, and a port with PCS symbol errors (mlx5 *_phy)
    that win over its FEC blocks."""
    labels = {"job": "rdma-exporter", "instance": "node1", "device": "mlx5_0", "port": "1", "netdev": "eth0"}
    p2 = 'job="rdma-exporter", instance="node1", device="mlx5_1", port="1"'
    labels2 = dict(labels, device="mlx5_1", netdev="eth1")
    rate = [("rdma_port_rate_bytes_per_second{%s}" % P, "12500000000x10"),
            ("rdma_port_rate_bytes_per_second{%s}" % p2, "12500000000x10")]
    return [("rdma-physical-ber", [
        (PRE_FEC_BER, ber("pre", C["selector"]),
         [("rdma_netdev_fec_corrected_bits_total{%s}" % N, "0+120000000x10"),
          ('rdma_netdev_phy_corrected_bits_total{%s, netdev="eth1"}' % p2, "0+1200000x10")] + rate,
         [(labels, 2e-05), (labels2, 2e-07)]),
        (POST_FEC_BER, ber("post", C["selector"]),
         [("rdma_netdev_fec_uncorrectable_blocks_total{%s}" % N, "0+600x10"),
          ('rdma_netdev_fec_uncorrectable_blocks_total{%s, netdev="eth1"}' % p2, "0+600x10"),
          ('rdma_netdev_phy_symbol_errors_total{%s, netdev="eth1", where="pcs"}' % p2, "0+6000x10")] + rate,
         [(labels, 1e-10), (labels2, 1e-09)]),
    ])]


def physical_alerts():
    downs = ("increase(rdma_netdev_carrier_down_total{%(selector)s}[%%s]) >= %%s or on(job, instance, device, port) "
             'sum without(event) (increase(rdma_port_async_events_total{%(selector)s, event="port_err"}[%%s])) >= %%s') % C
    rate = "rdma_port_rate_bytes_per_second{%s}" % P
    return [("rdma-physical", [
        alert("RdmaLinkFlapping", downs % ("10m", C["link_downs_per_10m"], "10m", C["link_downs_per_10m"]), "0m", "warning",
              "Link of {{ $labels.device }}/{{ $labels.port }} on {{ $labels.instance }} is flapping",
              "The link went down at least %s times in 10 minutes (netdev carrier downs, or verbs PORT_ERR events where "
              "the port has no netdev)." % C["link_downs_per_10m"],
              [("rdma_netdev_carrier_down_total{%s}" % N, "0x5 1 2 3 3x20")],
              [("rdma_netdev_carrier_down_total{%s}" % N, "0x5 1 1x20"),
               ('rdma_port_async_events_total{%s, event="port_err"}' % P, "0x5 1 2 2x20")],
              {"instance": "node1", "device": "mlx5_0", "port": "1", "netdev": "eth0"}, eval_at="10m"),
        alert("RdmaLinkRepeatOffender", downs % ("12h", C["link_downs_per_12h"], "12h", C["link_downs_per_12h"]), "0m", "warning",
              "Link of {{ $labels.device }}/{{ $labels.port }} on {{ $labels.instance }} keeps going down",
              "The link went down at least %s times in 12 hours: a marginal cable or module that reseating has not "
              "fixed. Plan its replacement." % C["link_downs_per_12h"],
              [('rdma_port_async_events_total{%s, event="port_err"}' % P, "0x60 1x120 2x120 3x100")],
              [('rdma_port_async_events_total{%s, event="port_err"}' % P, "0x60 1x120 2x220")],
              {"instance": "node1", "device": "mlx5_0", "port": "1"}, eval_at="6h"),
        alert("RdmaLinkPreFecBerHigh", "%s{%s} > %s" % (PRE_FEC_BER, C["selector"], C["pre_fec_ber"]), "1h", "warning",
              "Pre-FEC bit error rate of {{ $labels.netdev }} on {{ $labels.instance }} is high",
              "For an hour the FEC of {{ $labels.device }}/{{ $labels.port }} corrected more than %s of the bits "
              "received: the margin before uncorrectable errors is shrinking (cable, module, dirty connector)." % C["pre_fec_ber"],
              [("rdma_netdev_fec_corrected_bits_total{%s}" % N, "0+120000000x100"), (rate, "12500000000x100")],
              [("rdma_netdev_fec_corrected_bits_total{%s}" % N, "0+60000x100"), (rate, "12500000000x100")],
              {"instance": "node1", "device": "mlx5_0", "port": "1", "netdev": "eth0"}, eval_at="90m"),
        alert("RdmaLinkFecUncorrectable", "%s{%s} > 0" % (POST_FEC_BER, C["selector"]), "15m", "critical",
              "Uncorrectable FEC errors on {{ $labels.netdev }} on {{ $labels.instance }}",
              "For 15 minutes the FEC of {{ $labels.device }}/{{ $labels.port }} has left errors uncorrected: frames are "
              "lost on the link (RDMA retransmits, jobs slow down).",
              [("rdma_netdev_fec_uncorrectable_blocks_total{%s}" % N, "0+10x40"), (rate, "12500000000x40")],
              [("rdma_netdev_fec_uncorrectable_blocks_total{%s}" % N, "5x40"), (rate, "12500000000x40")],
              {"instance": "node1", "device": "mlx5_0", "port": "1", "netdev": "eth0"}, eval_at="30m"),
    ])]


# What {{ $value }} renders to in each alert's firing test case, worked out by hand from the input
# series (e.g. 5 lost of 60 sent per minute = 8.333%), so the unit tests also check the templates.
FIRING_VALUE = {
    "RdmaExporterCollectorErrors": "33.33m", "RdmaPortDown": "1", "RdmaPortFlapping": "4",
    "RdmaPortSymbolErrorsRising": "50", "RdmaPortLinkErrorsRising": "30", "RdmaPortTransmitWaitHigh": "60",
    "RdmaRocePfcPausedHigh": "50%", "RdmaRoceCnpRateHigh": "2k", "RdmaRoceEcnMarkRateHigh": "2k",
    "RdmaRoceOutOfSequenceHigh": "200", "RdmaRoceRetransmissionsHigh": "20", "RdmaQpRetriesExceeded": "10",
    "RdmaFabricTransmitWaitHigh": "2M",
    "RdmaProbeLoss": "8.333%", "RdmaProbeRttHigh": "988.1us",
    "RdmaPcieLinkDegraded": "1", "RdmaPcieUncorrectableErrors": "9", "RdmaNodeShapeNonConformant": "0",
    # 20 minutes at 60 s per minute (the readings stopped at 0).
    "RdmaTopologySnapshotStale": "20m 0s", "RdmaFabricSnapshotStale": "20m 0s",
}


# --------------------------------------------------------------------------------------------
# nic_health: transceivers, NIC temperatures, devlink health and firmware, kernel-log faults.
# Its own group, listed in alerts() below.
# --------------------------------------------------------------------------------------------
NET = 'job="rdma-exporter", instance="node1", device="mlx5_0", port="1", netdev="eth2"'
DL = 'job="rdma-exporter", instance="node1", device="mlx5_0", devlink="pci/0000:08:00.0"'
NET_LABELS = {"instance": "node1", "device": "mlx5_0", "port": "1", "netdev": "eth2"}
# A module's own thresholds joined to its readings: one threshold series per (module, level).
MODULE_ON = "on(job, instance, device, port, netdev)"


def nic_health_alerts():
    sel = C["selector"]
    return ("rdma-nic-health", [
        alert("RdmaTransceiverTemperatureHigh",
              "rdma_transceiver_temperature_celsius{%s} > %s "
              'rdma_transceiver_temperature_threshold_celsius{%s, level="high_alarm"}' % (sel, MODULE_ON, sel), "5m", "warning",
              "Transceiver of {{ $labels.netdev }} ({{ $labels.device }}/{{ $labels.port }}) over its high temperature alarm",
              "The module reads {{ $value }} °C, above the high alarm threshold it advertises itself.",
              [("rdma_transceiver_temperature_celsius{%s}" % NET, "60x5 78x20"),
               ('rdma_transceiver_temperature_threshold_celsius{%s, level="high_alarm"}' % NET, "75x25")],
              [("rdma_transceiver_temperature_celsius{%s}" % NET, "70x25"),
               ('rdma_transceiver_temperature_threshold_celsius{%s, level="high_alarm"}' % NET, "75x25")],
              NET_LABELS),
        # A lane that never had light in the last day (an unused port, a cable not yet plugged) is
        # not an alert: only a lane whose Rx power fell below its low alarm after having been above.
        alert("RdmaTransceiverRxPowerLow",
              "rdma_transceiver_rx_power_watts{%(s)s} < %(on)s group_left() "
              'rdma_transceiver_rx_power_threshold_watts{%(s)s, level="low_alarm"} '
              "and max_over_time(rdma_transceiver_rx_power_watts{%(s)s}[1d]) > %(on)s group_left() "
              'rdma_transceiver_rx_power_threshold_watts{%(s)s, level="low_alarm"}' % {"s": sel, "on": MODULE_ON},
              "5m", "warning",
              "Rx power of lane {{ $labels.lane }} of {{ $labels.netdev }} below its low alarm ({{ $labels.instance }})",
              "Lane {{ $labels.lane }} receives {{ $value | humanize }}W, below the module's own low alarm threshold "
              "(loss of signal, a dirty or broken fiber, or a failing far-end transmitter).",
              [('rdma_transceiver_rx_power_watts{%s, lane="3"}' % NET, "0.0008x5 0x20"),
               ('rdma_transceiver_rx_power_threshold_watts{%s, level="low_alarm"}' % NET, "0.00004x25")],
              [('rdma_transceiver_rx_power_watts{%s, lane="3"}' % NET, "0x25"),
               ('rdma_transceiver_rx_power_watts{%s, lane="2"}' % NET, "0.0008x25"),
               ('rdma_transceiver_rx_power_threshold_watts{%s, level="low_alarm"}' % NET, "0.00004x25")],
              dict(NET_LABELS, lane="3")),
        alert("RdmaTransceiverTxFault",
              'rdma_transceiver_lane_fault{%s, fault="tx_fault"} == 1' % sel, "5m", "warning",
              "Transmitter fault on lane {{ $labels.lane }} of {{ $labels.netdev }} ({{ $labels.instance }})",
              "The module reports a Tx fault on the lane: its laser or driver failed; replace the transceiver.",
              [('rdma_transceiver_lane_fault{%s, lane="2", fault="tx_fault"}' % NET, "1x20")],
              [('rdma_transceiver_lane_fault{%s, lane="2", fault="tx_fault"}' % NET, "1x2 _x18")],
              dict(NET_LABELS, lane="2", fault="tx_fault")),
        alert("RdmaNicTemperatureHigh",
              "rdma_nic_temperature_celsius{%s} > on(job, instance, device, sensor) "
              'rdma_nic_temperature_threshold_celsius{%s, kind="crit"}' % (sel, sel), "5m", "warning",
              "{{ $labels.sensor }} of {{ $labels.device }} on {{ $labels.instance }} over its critical temperature",
              "The driver's sensor {{ $labels.sensor }} reads {{ $value }} °C, above the limit the driver reports "
              "(hwmon temp*_crit: the NIC or module throttles, then shuts down).",
              [('rdma_nic_temperature_celsius{job="rdma-exporter", instance="node1", device="mlx5_0", sensor="Module0"}', "80x20"),
               ('rdma_nic_temperature_threshold_celsius{job="rdma-exporter", instance="node1", device="mlx5_0", sensor="Module0", kind="crit"}', "75x20")],
              [('rdma_nic_temperature_celsius{job="rdma-exporter", instance="node1", device="mlx5_0", sensor="Module0"}', "50x20"),
               ('rdma_nic_temperature_threshold_celsius{job="rdma-exporter", instance="node1", device="mlx5_0", sensor="Module0", kind="crit"}', "75x20")],
              {"instance": "node1", "device": "mlx5_0", "sensor": "Module0"}),
        alert("RdmaDevlinkReporterError",
              "rdma_devlink_health_reporter_healthy{%s} == 0" % sel, "5m", "critical",
              "devlink reporter {{ $labels.reporter }} of {{ $labels.device }} in error ({{ $labels.instance }})",
              "The driver's {{ $labels.reporter }} health reporter ({{ $labels.devlink }}) is in error and has not "
              "recovered for 5 minutes.",
              [('rdma_devlink_health_reporter_healthy{%s, reporter="fw_fatal"}' % DL, "0x20")],
              [('rdma_devlink_health_reporter_healthy{%s, reporter="fw_fatal"}' % DL, "1x20")],
              {"instance": "node1", "device": "mlx5_0", "devlink": "pci/0000:08:00.0", "reporter": "fw_fatal"}),
        alert("RdmaDevlinkReporterErrorsRising",
              "increase(rdma_devlink_health_reporter_errors_total{%s}[1h]) > 0" % sel, "0m", "warning",
              "devlink reporter {{ $labels.reporter }} of {{ $labels.device }} counts errors ({{ $labels.instance }})",
              "{{ $value | humanize }} {{ $labels.reporter }} errors in the last hour (recovered or not): "
              "firmware asserts, TX timeouts or RX queue stalls the driver had to handle.",
              [('rdma_devlink_health_reporter_errors_total{%s, reporter="tx"}' % DL, "0x10 2x20")],
              [('rdma_devlink_health_reporter_errors_total{%s, reporter="tx"}' % DL, "2x30")],
              {"instance": "node1", "device": "mlx5_0", "devlink": "pci/0000:08:00.0", "reporter": "tx"}),
        alert("RdmaFirmwareUpdatePending",
              "rdma_devlink_firmware_update_pending{%s} == 1" % sel, "1h", "info",
              "Flashed firmware of {{ $labels.device }} waits for a reset ({{ $labels.instance }})",
              "The stored firmware differs from the running one: it takes effect at the next reset or reboot.",
              [("rdma_devlink_firmware_update_pending{%s}" % DL, "1x90")],
              [("rdma_devlink_firmware_update_pending{%s}" % DL, "0x90")],
              {"instance": "node1", "device": "mlx5_0", "devlink": "pci/0000:08:00.0"}, eval_at="80m"),
        alert("RdmaFirmwareMixed",
              'count by (job) (count by (job, value) (rdma_devlink_version_info{%s, kind="running", name="fw.version"})) > 1' % sel,
              "1h", "info",
              "{{ $value }} NIC firmware versions run in {{ $labels.job }}",
              "Nodes run different NIC firmware versions (fw.version); list them with "
              "count by (value) (rdma_devlink_version_info{kind=\"running\", name=\"fw.version\"}).",
              [('rdma_devlink_version_info{%s, kind="running", name="fw.version", value="28.39.1002"}' % DL, "1x90"),
               ('rdma_devlink_version_info{job="rdma-exporter", instance="node2", device="mlx5_0", devlink="pci/0000:08:00.0", kind="running", name="fw.version", value="28.40.1000"}', "1x90")],
              [('rdma_devlink_version_info{%s, kind="running", name="fw.version", value="28.39.1002"}' % DL, "1x90"),
               ('rdma_devlink_version_info{job="rdma-exporter", instance="node2", device="mlx5_0", devlink="pci/0000:08:00.0", kind="running", name="fw.version", value="28.39.1002"}', "1x90")],
              {}, eval_at="80m"),
        alert("RdmaKernelLogFaults",
              "increase(rdma_kmsg_faults_total{%s}[10m]) > 0" % sel, "0m", "warning",
              "Kernel log reports {{ $labels.fault }} on {{ $labels.instance }}",
              "{{ $value | humanize }} kernel log lines matched {{ $labels.fault }} in 10 minutes "
              "(device {{ $labels.device }}); see dmesg on the node.",
              [('rdma_kmsg_faults_total{job="rdma-exporter", instance="node1", fault="cmd_timeout", device="mlx5_0"}', "0x10 3x10")],
              [('rdma_kmsg_faults_total{job="rdma-exporter", instance="node1", fault="cmd_timeout", device="mlx5_0"}', "3x20")],
              {"instance": "node1", "fault": "cmd_timeout", "device": "mlx5_0"}, eval_at="15m"),
    ])


FIRING_VALUE.update({
    "RdmaTransceiverTemperatureHigh": "78", "RdmaTransceiverRxPowerLow": "0", "RdmaNicTemperatureHigh": "80",
    "RdmaDevlinkReporterErrorsRising": "2", "RdmaFirmwareMixed": "2", "RdmaKernelLogFaults": "3",
})

# --- Fabric-wide suspect links: every node's rdma_prober_suspect_link combined by
# Prometheus (no central component of our own), the alert that names the link with both ends, and
# the prober dashboard's suspect table and source x destination matrices.
# RoCE hops from the prober's traces, InfiniBand cables from the forwarding tables (the pma
# collector, fed by the same prober's verdicts): one suspect-link view of both fabrics.
SUSPECT = "(rdma_prober_suspect_link{%(selector)s} or rdma_pma_suspect_link{%(selector)s})"


def suspect_link_recordings():
    s = SUSPECT % C
    n1 = 'rdma_prober_suspect_link{job="rdma-exporter", instance="node1", rail="0", from="10.0.0.1", to="10.1.0.1"}'
    n2 = 'rdma_prober_suspect_link{job="rdma-exporter", instance="node2", rail="0", from="10.0.0.1", to="10.1.0.1"}'
    n2b = 'rdma_prober_suspect_link{job="rdma-exporter", instance="node2", rail="1", from="10.0.0.1", to="10.1.0.1"}'
    n3 = 'rdma_prober_suspect_link{job="rdma-exporter", instance="node3", rail="0", from="10.0.0.2", to="10.1.0.2"}'
    ib1 = 'rdma_pma_suspect_link{job="rdma-exporter", instance="node1", rail="0", from="spine-2/3", to="leaf-3/4"}'
    ib3 = 'rdma_pma_suspect_link{job="rdma-exporter", instance="node3", rail="1", from="spine-2/3", to="leaf-3/4"}'
    inputs = [(n1, "3x10"), (n2, "1x10"), (n2b, "2x10"), (n3, "1x10"), (ib1, "2x10"), (ib3, "4x10")]
    link = {"from": "10.0.0.1", "to": "10.1.0.1"}
    other = {"from": "10.0.0.2", "to": "10.1.0.2"}
    cable = {"from": "spine-2/3", "to": "leaf-3/4"}
    return [("rdma-fabric-suspect-links", [
        # Distinct nodes naming the link (each node's suspects come from its own probe pairs: two
        # nodes are two independent node pairs at least), any rail.
        ("rdma:fabric_suspect_link:nodes", "count by (from, to) (max by (job, instance, from, to) (%s > 0))" % s,
         inputs, [(link, 2), (other, 1), (cable, 2)]),
        ("rdma:fabric_suspect_link:rails", "count by (from, to) (max by (rail, from, to) (%s > 0))" % s,
         inputs, [(link, 2), (other, 1), (cable, 2)]),
        ("rdma:fabric_suspect_link:lossy_flows", "sum by (from, to) (%s)" % s,
         inputs, [(link, 6), (other, 1), (cable, 6)]),
    ])]


def suspect_link_alerts():
    j2 = 'job="rdma-exporter", instance="node2", rail="0", from="10.0.0.1", to="10.1.0.1"'
    j1 = 'job="rdma-exporter", instance="node1", rail="0", from="10.0.0.1", to="10.1.0.1"'
    return ("rdma-fabric-suspect-links-alerts", [
        alert("RdmaFabricSuspectLink",
              "count by (job, from, to) (max by (job, instance, from, to) (%s > 0)) >= 2" % (SUSPECT % C), "5m", "warning",
              "Link {{ $labels.from }} -> {{ $labels.to }} is on every lossy path of {{ $value }} nodes",
              "Two or more nodes' probers name the same link (from -> to, hop addresses or \"<node>/<port>\" on "
              "InfiniBand) as the one their lossy flows cross and their clean flows do not: drain or check that link.",
              [('rdma_prober_suspect_link{%s}' % j1, "2x30"), ('rdma_prober_suspect_link{%s}' % j2, "1x30")],
              [('rdma_prober_suspect_link{%s}' % j1, "2x30")],
              {"from": "10.0.0.1", "to": "10.1.0.1"}),
    ])


FIRING_VALUE["RdmaFabricSuspectLink"] = "2"
def matrix(title, expr, col, unit, desc, w=12, h=10):
    """A source x destination table from an instant query: rows `instance`, columns `col`."""
    return {"type": "table", "title": title, "description": desc, "w": w, "h": h,
            "fieldConfig": {"defaults": {"unit": unit, "custom": {"cellOptions": {"type": "color-background"}},
                                         "thresholds": {"mode": "absolute", "steps": [
                                             {"color": "green", "value": None}, {"color": "red", "value": 0.001}]}},
                            "overrides": []},
            "options": {"showHeader": True, "cellHeight": "sm", "footer": {"show": False}},
            "transformations": [{"id": "groupingToMatrix", "options": {
                "rowField": "instance", "columnField": col, "valueField": "Value"}}],
            "targets": [target(expr, instant=True, fmt="table")]}


# The suspect table: one row per link (from -> to), one column per piece of evidence, each an
# instant query by (from, to) joined by the table's merge; a column a link has no series for is
# empty (an InfiniBand suspect has no `narrowed`, a RoCE one no adaptive routing).
SUSPECT_EVIDENCE = [
    ("nodes", "count by (from, to) (max by (job, instance, from, to) (%s > 0))" % SUSPECT),
    ("rails", "count by (from, to) (max by (rail, from, to) (%s > 0))" % SUSPECT),
    ("lossy flows", "sum by (from, to) (%s)" % SUSPECT),
    ("clean flows", "sum by (from, to) (rdma_prober_suspect_link_clean_flows{%(selector)s} or "
                    "rdma_pma_suspect_link_clean_flows{%(selector)s})"),
    ("nodes narrowed", "sum by (from, to) (rdma_prober_suspect_link_narrowed{%(selector)s})"),
    ("named for", "time() - min by (from, to) (rdma_prober_suspect_link_named_timestamp_seconds{%(selector)s})"),
    ("adaptive routing", "max by (from, to) (rdma_pma_suspect_link_adaptive_routing{%(selector)s})"),
]


def suspect_table(sel):
    targets = [target(expr % {"selector": sel}, instant=True, fmt="table") for _, expr in SUSPECT_EVIDENCE]
    refs = [chr(ord("A") + i) for i in range(len(targets))]  # as layout() names a panel's targets
    panel = table("Suspect links", targets, exclude=("Time",), w=24, desc=(
        "Links (from -> to) that nodes' lossy flows cross and their clean flows do not, with the evidence "
        "(docs/runbooks.md, RdmaFabricSuspectLink): nodes naming it (2 or more fires RdmaFabricSuspectLink), "
        "rails, lossy flows it explains, clean flows crossing it (0: strict), nodes whose fresh traces stopped "
        "right before it (narrowed; 0: the intersection alone), how long it has been named, and adaptive routing "
        "on its InfiniBand routes (1: a lead, never strict)."))
    organize = panel["transformations"][-1]["options"]
    organize["renameByName"] = {"Value #" + ref: name for ref, (name, _) in zip(refs, SUSPECT_EVIDENCE)}
    organize["indexByName"] = {name: i for i, name in enumerate(["from", "to"] + [n for n, _ in SUSPECT_EVIDENCE])}
    panel["fieldConfig"]["overrides"] = [
        {"matcher": {"id": "byName", "options": "named for"}, "properties": [{"id": "unit", "value": "s"}]},
        {"matcher": {"id": "byName", "options": "clean flows"}, "properties": [
            {"id": "custom.cellOptions", "value": {"type": "color-background"}},
            {"id": "thresholds", "value": {"mode": "absolute", "steps": [
                {"color": "green", "value": None}, {"color": "orange", "value": 1}]}}]},
    ]
    return panel


def suspect_panels():
    sel = JOB
    lost = 'sum by (instance, %%s) (rate(rdma_prober_probes_lost_total{%s}[%s]))' % (sel, RI)
    sent = 'sum by (instance, %%s) (rate(rdma_prober_probes_sent_total{%s}[%s]))' % (sel, RI)
    p99 = ('histogram_quantile(0.99, sum by (le, instance, %%s) (rate(rdma_prober_rtt_seconds_bucket{%s}[%s])))'
           % (sel, RI))
    return [
        row("Suspect links (fabric-wide, docs/prober.md)"),
        suspect_table(sel),
        matrix("Loss: source node x destination", "%s / %s" % (lost % "peer", sent % "peer"), "peer", "percentunit",
               "Probe loss ratio per source (row) and destination (column): a bad node is a line, a bad rail a block."),
        matrix("RTT p99: source node x destination", p99 % "peer", "peer", "s",
               "p99 RTT per source and destination (software clock)."),
        matrix("Loss: source node x destination group (leaf)", "%s / %s" % (lost % "group", sent % "group"), "group",
               "percentunit", "Loss per source and destination group (the prober's `group`, e.g. a leaf): for large fleets."),
        matrix("RTT p99: source node x destination group (leaf)", p99 % "group", "group", "s", "p99 RTT per source and destination group."),
    ]


# One builder per artefact: every alert group and every recording group, in the rules files' order.
def alerts():
    return node_alerts() + [nic_health_alerts(), suspect_link_alerts()] + physical_alerts()


def recordings():
    return drift_recordings() + suspect_link_recordings() + physical_recordings()


def render_template(text, labels, value):
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)
    return re.sub(r"\{\{ \$value[^}]*\}\}", value, text)


def anchor(name):
    return name.lower()


def build_rules(documented, undocumented):
    groups, tests = [], []
    for gname, group in alerts():
        rules = []
        for a in group:
            missing = sorted(m for m in promql_util.metrics_in(a["expr"]) if m not in documented)
            if missing:
                undocumented.append("alert %s: %s" % (a["name"], ", ".join(missing)))
            r = {"alert": a["name"], "expr": a["expr"]}
            if a["for"] != "0m":
                r["for"] = a["for"]
            r["labels"] = {"severity": a["severity"]}
            r["annotations"] = {"summary": a["summary"], "description": a["description"],
                                "runbook_url": "%s#%s" % (C["runbook_url_base"], anchor(a["name"]))}
            rules.append(r)
            exp_labels = dict(a["labels"], severity=a["severity"])
            for kind, series in (("fire", a["fire"]), ("quiet", a["quiet"])):
                case = {"interval": "1m",
                        "input_series": [{"series": s, "values": v} for s, v in series],
                        "alert_rule_test": [{"eval_time": a["eval_at"], "alertname": a["name"],
                                             "exp_alerts": []}]}
                if kind == "fire":
                    case["alert_rule_test"][0]["exp_alerts"] = [{"exp_labels": exp_labels, "exp_annotations": {
                        k: (render_template(v, exp_labels, FIRING_VALUE.get(a["name"], "?")) if k != "runbook_url" else v)
                        for k, v in r["annotations"].items()}}]
                tests.append(case)
        if rules:
            groups.append({"name": gname, "rules": rules})
    for gname, recs in recordings():
        rules = []
        for record, expr, series, samples in recs:
            missing = sorted(m for m in promql_util.metrics_in(expr) if m not in documented)
            if missing:
                undocumented.append("record %s: %s" % (record, ", ".join(missing)))
            rules.append({"record": record, "expr": expr})
            tests.append({"interval": "1m", "input_series": [{"series": s_, "values": v} for s_, v in series],
                          "promql_expr_test": [{"expr": record, "eval_time": "5m", "exp_samples": [
                              {"labels": "%s{%s}" % (record, ", ".join('%s="%s"' % kv for kv in sorted(l.items()))),
                               "value": v} for l, v in samples]}]})
        groups.append({"name": gname, "rules": rules})
    return {"groups": groups}, tests


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------
HEADER = ("# Generated by deploy/generate.py from its alert table; edit that and re-run.\n"
          "# Runbooks: docs/runbooks.md\n")


def yaml_dump(obj):
    import yaml

    class D(yaml.SafeDumper):
        pass

    def str_rep(dumper, s):
        return dumper.represent_scalar("tag:yaml.org,2002:str", s, style='"' if ("{{" in s or ":" in s) else None)
    D.add_representer(str, str_rep)
    return yaml.dump(obj, Dumper=D, sort_keys=False, width=110, allow_unicode=True)


def recorded_names():
    return {rec[0] for _, recs in recordings() for rec in recs}


def render(metrics_doc, with_tests=True):
    """{path: text} of every output, and the metrics used that metrics_doc does not document."""
    # The recorded series are documented by their rules (the rules' inputs are checked below).
    documented = promql_util.documented_metrics(metrics_doc) | recorded_names()
    undocumented = []
    files = {}
    for fn in (dash_overview, dash_port, dash_roce, dash_pma, dash_prober):
        uid, title, tags, templ, panels = fn()
        d = dashboard(uid, title, tags, templ, panels, documented, undocumented)
        files["dashboards/%s.json" % uid] = json.dumps(d, indent=2, ensure_ascii=False) + "\n"
    rules, tests = build_rules(documented, undocumented)
    files["deploy/prometheus/rdma-exporter.rules.yml"] = HEADER + yaml_dump(rules)
    prule = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
             "metadata": {"name": "rdma-exporter", "labels": {"app.kubernetes.io/name": "rdma-exporter",
                                                             "prometheus": "k8s", "role": "alert-rules"}},
             "spec": rules}
    files["deploy/kubernetes/base/prometheusrule.yaml"] = HEADER + yaml_dump(prule)
    if with_tests:  # the promtool cases are written for the default thresholds
        files["tests/deploy/rules.test.yml"] = (
            "# Generated by deploy/generate.py: for every alert one case that fires and one that stays quiet.\n"
            + yaml_dump({"rule_files": ["../../deploy/prometheus/rdma-exporter.rules.yml"],
                         "evaluation_interval": "1m", "tests": tests}))
    return files, undocumented


def main():
    import argparse
    ap = argparse.ArgumentParser(description="Writes the dashboards and alert rules (see the top of this file).")
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed files differ from the output")
    ap.add_argument("--config", help="YAML file overriding keys of CONFIG (selectors, thresholds)")
    ap.add_argument("--out", default=ROOT, help="write under this directory (default: the repository)")
    ap.add_argument("--metrics-doc", default=os.path.join(ROOT, "docs", "metrics.md"),
                    help="the metric tables every query is checked against (default: docs/metrics.md)")
    ap.add_argument("--runbook-url-base", help="the runbooks every alert's runbook_url points into, as BASE#<alert> "
                    "(default: %s, the .deb's copy of docs/runbooks.md)" % RUNBOOK)
    a = ap.parse_args()
    overrides = None
    if a.config:
        import yaml
        with open(a.config, encoding="utf-8") as f:
            overrides = yaml.safe_load(f) or {}
        if not isinstance(overrides, dict):
            raise SystemExit("generate.py: %s: expected a mapping of CONFIG keys" % a.config)
    # The runbook base changes no query: the promtool cases still fit it.
    thresholds_changed = bool(set(overrides or {}) - {"runbook_url_base"})
    if a.runbook_url_base:
        overrides = dict(overrides or {}, runbook_url_base=a.runbook_url_base.rstrip("#"))
    configure(overrides)
    files, undocumented = render(a.metrics_doc, with_tests=not thresholds_changed)
    if undocumented:
        for u in undocumented:
            print("error: metric not in docs/metrics.md: " + u, file=sys.stderr)
        print("generate.py: document these metrics in docs/metrics.md (or remove them here); nothing written",
              file=sys.stderr)
        return 1
    bad = 0
    for rel, text in files.items():
        path = os.path.join(a.out, rel)
        if a.check:
            cur = open(path, encoding="utf-8").read() if os.path.exists(path) else None
            if cur != text:
                print("out of date: %s (run python3 deploy/generate.py and commit)" % rel)
                bad = 1
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    return bad


if __name__ == "__main__":
    sys.exit(main())
