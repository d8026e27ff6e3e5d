#!/usr/bin/env python3
"""pma collector against the ibsim simulator: exporter values == PerformanceSet values == perfquery.

usage: test_pma.py --exporter PATH local|fabric|faults|targets|target_bounds|utf8|unsupported_local|unsupported_fabric|port_mad <pma_mad_double.so>
(port_mad: the port collector's counters through MADs, on a sysfs tree of the simulator's CA)
Exit 0 = pass, else fail (also when the simulator cannot be installed or started).
"""
import base64
import gzip
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt  # noqa: E402  (libxcrypt; deprecated in 3.11, removed in 3.13)
from exporter_harness import Prometheus, take_exporter_arg  # noqa: E402
from ibsim_harness import DEFAULT_NET, Exporter, Sim, SetupError, fat_tree, get, parse_metrics, run_sim_case  # noqa: E402
from ibsim_harness import wait_for  # noqa: E402

FAILS = []


def check(cond, what):
    print(("ok   - " if cond else "FAIL - ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def eq(a, b, what):
    check(a == b, "%s: %r == %r" % (what, a, b))


def pma_errors(m):
    """rdma_exporter_collector_errors_total of the pma collector, all reasons."""
    return sum(v for (n, l), v in m.items()
               if n == "rdma_exporter_collector_errors_total" and dict(l).get("collector") == "pma")


def absent(m, name, **labels):
    return not any(n == name and all(dict(l).get(k) == str(x) for k, x in labels.items()) for n, l in m)


def promtool_clean(text, what):
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "promtool check metrics clean (%s) %s" % (what, (r.stdout + r.stderr)[-800:]))


# perfquery field -> metric suffix (error counters: exact everywhere)
PC_ERRORS = {
    "SymbolErrorCounter": "symbol_errors", "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkDownedCounter": "link_downed", "PortRcvErrors": "receive_errors",
    "PortRcvRemotePhysicalErrors": "receive_remote_physical_errors",
    "PortRcvSwitchRelayErrors": "receive_switch_relay_errors", "PortXmitDiscards": "transmit_discards",
    "PortXmitConstraintErrors": "transmit_constraint_errors", "PortRcvConstraintErrors": "receive_constraint_errors",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors", "VL15Dropped": "vl15_dropped",
    "PortXmitWait": "transmit_wait",
}
RCVERR = {"PortLocalPhysicalErrors": "receive_local_physical_errors",
          "PortMalformedPktErrors": "receive_malformed_packet_errors",
          "PortBufferOverrunErrors": "receive_buffer_overrun_errors",
          "PortDLIDMappingErrors": "receive_dlid_mapping_errors", "PortVLMappingErrors": "receive_vl_mapping_errors",
          "PortLoopingErrors": "receive_looping_errors"}
XMTDISC = {"PortInactiveDiscards": "transmit_inactive_discards",
           "PortNeighborMTUDiscards": "transmit_neighbor_mtu_discards",
           "PortSwLifetimeLimitDiscards": "transmit_sw_lifetime_limit_discards",
           "PortSwHOQLifetimeLimitDiscards": "transmit_sw_hoq_lifetime_limit_discards"}


def compare_errors(m, prefix, labels, pq, rcverr, xmtdisc, where):
    for field, suffix in PC_ERRORS.items():
        eq(get(m, prefix + suffix + "_total", **labels), pq[field], "%s %s == perfquery %s" % (where, suffix, field))
    for table, src in ((RCVERR, rcverr), (XMTDISC, xmtdisc)):
        for field, suffix in table.items():
            eq(get(m, prefix + suffix + "_total", **labels), src[field], "%s %s == perfquery %s" % (where, suffix, field))


def case_local(sim, exe):
    values = [("PortCounters.SymbolErrorCounter", 42), ("PortCounters.LinkDownedCounter", 3),
              ("PortCounters.PortRcvErrors", 7), ("PortCounters.PortXmitDiscards", 99999),
              ("PortCounters.LinkErrorRecoveryCounter", 255), ("PortCounters.VL15Dropped", 9),
              ("PortCounters.PortXmitWait", 5000000000),
              ("PortCountersExtended.PortXmitData", 1000000000000), ("PortCountersExtended.PortRcvPkts", 2 ** 40 + 3),
              ("PortRcvErrorDetails.PortLocalPhysicalErrors", 11), ("PortRcvErrorDetails.PortLoopingErrors", 12),
              ("PortXmitDiscardDetails.PortInactiveDiscards", 13),
              ("PortXmitDiscardDetails.PortSwHOQLifetimeLimitDiscards", 14),
              ("PortVLXmitWaitCounters.PortVLXmitWaitCounters3", 8)]
    for f, v in values:
        sim.set("Hca1", 1, f, v)
    e = Exporter(sim, exe)
    text = e.text()
    m = parse_metrics(text)
    L = {"device": "ibsim0", "port": "1"}
    P = "rdma_pma_port_"
    eq(get(m, "rdma_pma_local_ports"), 1, "one local port found through libibumad (umad2sim's ibsim0)")
    eq(get(m, P + "info", lid="1", port_guid="0x0000000000100001", capability_mask="0x1200", **L), 1, "port info")
    eq(get(m, P + "symbol_errors_total", **L), 42, "SymbolErrorCounter = set value")
    eq(get(m, P + "link_downed_total", **L), 3, "LinkDownedCounter = set value")
    eq(get(m, P + "receive_errors_total", **L), 7, "PortRcvErrors = set value")
    eq(get(m, P + "transmit_discards_total", **L), 65535, "16-bit PortXmitDiscards clamps at 65535")
    eq(get(m, P + "saturated", counter="transmit_discards", **L), 1, "16-bit saturation flagged")
    eq(get(m, P + "link_error_recovery_total", **L), 255, "8-bit LinkErrorRecovery at 255")
    eq(get(m, P + "saturated", counter="link_error_recovery", **L), 1, "8-bit saturation flagged")
    eq(get(m, P + "transmit_wait_total", **L), 4294967295, "32-bit PortXmitWait saturates at 2^32-1")
    eq(get(m, P + "saturated", counter="transmit_wait", **L), 1, "32-bit saturation flagged")
    eq(get(m, P + "saturated", counter="symbol_errors", **L), 0, "unsaturated counter not flagged")
    eq(get(m, P + "transmit_bytes_total", **L), 4000000000000, "64-bit PortXmitData x 4, exact")
    eq(get(m, P + "receive_packets_total", **L), 2 ** 40 + 3, "64-bit PortRcvPkts exact")
    eq(get(m, P + "receive_local_physical_errors_total", **L), 11, "PortRcvErrorDetails")
    eq(get(m, P + "receive_looping_errors_total", **L), 12, "PortRcvErrorDetails looping")
    eq(get(m, P + "transmit_inactive_discards_total", **L), 13, "PortXmitDiscardDetails")
    eq(get(m, P + "transmit_sw_hoq_lifetime_limit_discards_total", **L), 14, "PortXmitDiscardDetails HOQ")
    eq(get(m, P + "transmit_wait_vl_total", vl="3", **L), 8, "per-VL xmit wait VL3")
    # perfquery on the same (local, hence stable) port
    pq, pqx = sim.perfquery(), sim.perfquery("-x")
    rcverr, xmtdisc = sim.perfquery("--rcverr"), sim.perfquery("--xmtdisc")
    compare_errors(m, P, L, pq, rcverr, xmtdisc, "local")
    for field, suffix, scale in (("PortXmitData", "transmit_bytes", 4), ("PortRcvData", "receive_bytes", 4),
                                 ("PortXmitPkts", "transmit_packets", 1), ("PortRcvPkts", "receive_packets", 1),
                                 ("PortUnicastXmitPkts", "unicast_transmit_packets", 1),
                                 ("PortMulticastXmitPkts", "multicast_transmit_packets", 1)):
        eq(get(m, P + suffix + "_total", **L), pqx[field] * scale, "local %s == perfquery -x %s" % (suffix, field))
    vl = sim.perfquery("--vlxmitcounters")
    eq(get(m, P + "transmit_wait_vl_total", vl="3", **L), vl.get("PortVLXmitWait3"), "VL3 == perfquery --vlxmitcounters")
    check('collector_errors_total{collector="pma"' not in text, "no pma collector errors")
    promtool_clean(text, "local")
    # never resets: a second scrape still sees the values
    m2 = e.metrics()
    eq(get(m2, P + "symbol_errors_total", **L), 42, "counters not reset by scraping")
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")


SWITCH1 = "0x0000000000200000"
HCA2 = "0x0000000000100002"


def switch_port(port):
    """Fabric port series are labelled node_guid and port; names are in the _info series."""
    return {"node_guid": SWITCH1, "port": str(port)}


def guid_of(m, name):
    hits = [dict(l)["node_guid"] for n, l in m if n == "rdma_pma_fabric_node_info" and dict(l)["node_name"] == name]
    if len(hits) != 1:
        raise KeyError("node_info %s: %d" % (name, len(hits)))
    return hits[0]


def wait_refreshes(e, n, timeout=60):
    start = get(e.metrics(), "rdma_pma_fabric_refreshes_total")
    return wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_refreshes_total") >= start + n, timeout,
                    what="%d fabric refreshes" % n)


def case_fabric(sim, exe):
    lids = sim.lids()
    sw = lids["Switch1"]
    ports = {1: ("Hca1", 1), 2: ("Hca2", 1), 3: ("Hca3", 1), 4: ("Hca3", 2)}
    for p in ports:
        sim.set("Switch1", p, "PortCounters.SymbolErrorCounter", 100 + p)
        sim.set("Switch1", p, "PortCounters.LinkDownedCounter", p)
        sim.set("Switch1", p, "PortCounters.PortXmitDiscards", 200 + p)
        sim.set("Switch1", p, "PortRcvErrorDetails.PortLoopingErrors", 300 + p)
        sim.set("Switch1", p, "PortXmitDiscardDetails.PortNeighborMTUDiscards", 400 + p)
        sim.set("Switch1", p, "PortCountersExtended.PortXmitData", 10 ** 12 + p)
    sim.set("Switch1", 1, "PortCounters.PortXmitWait", 2 ** 32 + 5)
    sim.set("Hca2", 1, "PortCounters.SymbolErrorCounter", 77)
    sim.set("Hca2", 1, "PortCounters.PortRcvSwitchRelayErrors", 5)
    sim.set("Hca3", 2, "PortCounters.LinkDownedCounter", 6)
    mapfile = os.path.join(sim.dir, "node-name-map")
    with open(mapfile, "w") as f:
        f.write('# test map\n0x0000000000100002 "compute-02"\n')
    e = Exporter(sim, exe, "--collector.pma.fabric", "--collector.pma.fabric-period=200ms",
                 "--collector.pma.node-name-map=" + mapfile)
    wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_refreshes_total") >= 2, 60, what="first refreshes")
    text = e.text()
    m = parse_metrics(text)
    F = "rdma_pma_fabric_port_"
    eq(get(m, "rdma_pma_fabric_nodes", type="switch"), 1, "one switch discovered")
    eq(get(m, "rdma_pma_fabric_nodes", type="ca"), 3, "three CAs discovered")
    eq(get(m, "rdma_pma_fabric_ports"), 8, "8 cabled ports (4 switch + 4 CA)")
    eq(get(m, "rdma_pma_fabric_ports_answered"), 8, "all 8 answered")
    for p, (remote, rport) in ports.items():
        rname = "compute-02" if remote == "Hca2" else remote
        L = switch_port(p)
        eq(get(m, "rdma_pma_fabric_port_info", remote_name=rname, remote_port=rport, **L), 1,
           "Switch1 port %d -> %s port %d in port_info" % (p, rname, rport))
        pq = sim.perfquery(sw, p)
        compare_errors(m, F, L, pq, sim.perfquery("--rcverr", sw, p), sim.perfquery("--xmtdisc", sw, p),
                       "Switch1 port %d" % p)
        eq(get(m, F + "symbol_errors_total", **L), 100 + p, "Switch1 port %d SymbolErrorCounter = set" % p)
        eq(get(m, F + "receive_looping_errors_total", **L), 300 + p, "Switch1 port %d looping = set" % p)
        xd = get(m, F + "transmit_bytes_total", **L)
        after = sim.perfquery("-x", sw, p)["PortXmitData"] * 4
        check(4 * (10 ** 12 + p) <= xd <= after,
              "Switch1 port %d transmit bytes: set*4 %d <= exporter %d <= perfquery-after*4 %d" % (p, 4 * (10 ** 12 + p), xd, after))
    eq(get(m, F + "transmit_wait_total", **switch_port(1)), 4294967295, "switch PortXmitWait saturates")
    eq(get(m, F + "saturated", counter="transmit_wait", **switch_port(1)), 1, "switch saturation flag")
    # remote HCA (through its own LID), named by the node-name-map
    H2 = {"node_guid": HCA2, "port": "1"}
    eq(get(m, "rdma_pma_fabric_node_info", node_guid=HCA2, node_name="compute-02", node_description="Hca2", node_type="ca"),
       1, "Hca2 named by the node-name-map in node_info, NodeDescription kept")
    eq(get(m, "rdma_pma_fabric_port_info", remote_name="Switch1", remote_port=2, **H2), 1, "Hca2 port 1 -> Switch1 port 2")
    check(all(set(dict(l)) == {"node_guid", "port"} for n, l in m
              if n.startswith("rdma_pma_fabric_port_") and n.endswith("_total")), "counter series carry node_guid and port only")
    pq = sim.perfquery(lids["Hca2"][1], 1)
    compare_errors(m, F, H2, pq, sim.perfquery("--rcverr", lids["Hca2"][1], 1),
                   sim.perfquery("--xmtdisc", lids["Hca2"][1], 1), "remote Hca2")
    eq(get(m, F + "symbol_errors_total", **H2), 77, "remote Hca2 SymbolErrorCounter = set")
    eq(get(m, F + "receive_switch_relay_errors_total", **H2), 5, "remote Hca2 relay errors = set")
    H32 = {"node_guid": guid_of(m, "Hca3"), "port": "2"}
    eq(get(m, F + "link_downed_total", **H32), 6, "Hca3 port 2 (second CA port, own LID) LinkDowned = set")
    eq(get(m, F + "link_downed_total", **H32), sim.perfquery(lids["Hca3"][2], 2)["LinkDownedCounter"], "== perfquery")
    check(not any(n == "rdma_pma_fabric_mad_errors_total" for n, _ in m), "no MAD errors on a healthy fabric")
    check(get(m, "rdma_pma_fabric_mads_total") > 0, "MADs counted")
    check(get(m, "rdma_pma_fabric_snapshot_age_seconds") < 60, "snapshot age reported")
    promtool_clean(text, "fabric")
    # the snapshot moves on: a counter set now shows up after the next refreshes
    sim.set("Switch1", 3, "PortCounters.SymbolErrorCounter", 999)
    wait_refreshes(e, 2)
    eq(get(e.metrics(), F + "symbol_errors_total", **switch_port(3)), 999, "refresh picks up new value")
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")


def case_faults(sim, exe):
    e = Exporter(sim, exe, "--collector.pma.fabric", "--collector.pma.fabric-period=200ms",
                 "--collector.pma.timeout=200ms", "--collector.pma.retries=1")
    wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_ports_answered") == 8, 60, what="healthy fabric")
    # 1. MAD drops at Hca2
    sim.cmd('Error "Hca2"[1] 100')
    m = wait_for(lambda: (lambda m: get(m, "rdma_pma_fabric_mad_errors_total", node_name="Hca2", reason="timeout") >= 1
                          and m)(e.metrics()), 60, what="Hca2 timeouts counted")
    check(get(m, "rdma_pma_fabric_mad_timeouts_total", node_name="Hca2") >= 2,
          "every attempt to Hca2 counted as a timeout (retries=1)")
    check(get(m, "rdma_pma_fabric_port_symbol_errors_total", node_guid=SWITCH1, port="1") >= 0,
          "the rest of the fabric still exported during the drops")
    sim.cmd('Error "Hca2"[1] 0')
    # 2. pulled cable
    sim.cmd('Unlink "Hca3"[2]')
    wait_for(lambda: sum(v for (n, l), v in e.metrics().items()
                         if n == "rdma_pma_fabric_mad_errors_total" and dict(l).get("node_name") == "Hca3") >= 1
             or get(e.metrics(), "rdma_pma_fabric_ports") == 6, 60, what="Hca3 port 2 errors or rediscovery")
    wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_ports") < 8, 60,
             what="rediscovery drops the unplugged link")
    # 3. stalled fabric: the exporter's own port drops every MAD, so local and fabric queries all
    #    time out; /metrics keeps answering from the snapshot. (Not SIGSTOP of ibsim: the SMP
    #    replies it queues while stopped arrive after the timed-out discovery closed its MAD port,
    #    and umad2sim 0.10 dereferences a freed agent slot for such a reply and kills the client;
    #    a real kernel drops a reply for an unregistered agent.)
    local_before = pma_errors(e.metrics())
    sim.cmd('Error "Hca1"[1] 100')
    try:
        t0 = time.monotonic()
        answered = 0
        for _ in range(3):
            m = e.metrics(timeout=30)
            answered += 1
        check(answered == 3, "/metrics answered 3 scrapes while every MAD was dropped (%.1f s)" % (time.monotonic() - t0))
        check(any(n == "rdma_pma_fabric_refreshes_total" for n, _ in m), "fabric snapshot still served")
        local_after = pma_errors(m)
        check(local_after > local_before, "local-mode timeouts counted (%d -> %d)" % (local_before, local_after))
        check(e.proc.poll() is None, "exporter alive while the fabric is silent")
    finally:
        sim.cmd('Error "Hca1"[1] 0')
    refreshes = get(e.metrics(), "rdma_pma_fabric_refreshes_total")
    wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_refreshes_total") >= refreshes + 2, 60,
             what="fabric loop recovers when the port passes MADs again")
    eq(get(e.metrics(), "rdma_pma_local_ports"), 1, "local mode answers again")
    promtool_clean(e.text(), "faults")
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM after the faults")
    # 4. stopped simulator (SIGSTOP): nothing answers at all, so the exporter's own MAD deadline
    #    must fire. Local mode only: it sends PMA MADs on its one long-lived port, so the replies
    #    ibsim sends after SIGCONT arrive at a registered agent (see 3 for why no discovery runs).
    e = Exporter(sim, exe, "--collector.pma.timeout=200ms", "--collector.pma.retries=0")
    eq(get(e.metrics(), "rdma_pma_local_ports"), 1, "local-only exporter up")
    os.kill(sim.ibsim.pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        m = e.metrics(timeout=30)
        waited = time.monotonic() - t0
        check(waited >= 0.2, "the scrape waited for the MAD deadline (%.2f s >= 0.2 s)" % waited)
        check(get(m, "rdma_exporter_collector_errors_total", collector="pma", reason="timeout") >= 1,
              "timeouts counted with the simulator stopped")
        check(e.proc.poll() is None, "exporter alive while the simulator is stopped")
    finally:
        os.kill(sim.ibsim.pid, signal.SIGCONT)
    wait_for(lambda: get(e.metrics(), "rdma_pma_port_symbol_errors_total", device="ibsim0", port="1") is not None,
             60, what="local counters again after SIGCONT")
    eq(e.stop(), 0, "local-only exporter exits 0 after the stop")


# The credentials case_targets' exporter asks for (/pma and /pma/targets are for authenticated
# callers unless collectors.pma.fabric_targets_allow_unauthenticated), sent by http_get while set.
AUTH = {}


def web_config(sim):
    """A web config with one basic-auth user (prometheus / s3cret); sets AUTH. Its path."""
    hashed = crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16))
    web = os.path.join(sim.dir, "web.yml")
    with open(web, "w") as f:
        f.write("basic_auth_users:\n  prometheus: '%s'\n" % hashed)
    AUTH["Authorization"] = "Basic " + base64.b64encode(b"prometheus:s3cret").decode()
    return web


def http_get(port, path, headers=None):
    """(status, body) of GET path on the exporter, 4xx/5xx included."""
    try:
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), headers={**AUTH, **(headers or {})})
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as x:
        return x.code, x.read().decode()


def sd_job(exporter_port, shard=None):
    """A Prometheus job in the multi-target pattern: targets from /pma/targets, each scraped at
    /pma?target=<GUID> on the exporter; with shard=(i, n) only the targets whose hashmod is i."""
    keep = ("      - source_labels: [__param_target]\n        modulus: %d\n        target_label: __tmp_shard\n"
            "        action: hashmod\n      - source_labels: [__tmp_shard]\n        regex: '%d'\n        action: keep\n"
            % (shard[1], shard[0])) if shard else ""
    # Credentials twice, as docs/fabric.md ships them: the service discovery has its own client.
    creds = "basic_auth:\n%(i)s  username: prometheus\n%(i)s  password: s3cret\n"
    return ("  - job_name: fabric\n    metrics_path: /pma\n    scrape_timeout: 1s\n    " + creds % {"i": "    "} +
            "    http_sd_configs:\n      - url: http://127.0.0.1:%d/pma/targets\n        refresh_interval: 1s\n"
            % exporter_port + "        " + creds % {"i": "        "} +
            "    relabel_configs:\n      - source_labels: [__address__]\n        target_label: __param_target\n"
            "      - source_labels: [__param_target]\n        target_label: instance\n%s"
            "      - target_label: __address__\n        replacement: 127.0.0.1:%d\n" % (keep, exporter_port))


def prom_up(prom):
    """instance -> value of up{job="fabric"} in this Prometheus."""
    return {r["metric"]["instance"]: float(r["value"][1]) for r in prom.api("query", query='up{job="fabric"}')["result"]}


def prom_value(proms, query):
    """The one sample `query` returns across the Prometheus instances (each shard holds its own targets)."""
    hits = [float(r["value"][1]) for p in proms for r in p.api("query", query=query)["result"]]
    if len(hits) != 1:
        raise KeyError("%s: %d samples" % (query, len(hits)))
    return hits[0]


def case_targets(sim, exe):
    """Multi-target fabric: Prometheus finds the nodes at /pma/targets and scrapes each at /pma."""
    sets = {("leaf1", 2): 1234, ("spine0", 1): 55, ("host1-1", 1): 77}
    for (node, port), v in sets.items():
        sim.set(node, port, "PortCounters.SymbolErrorCounter", v)
    sim.set("leaf0", 3, "PortCounters.LinkDownedCounter", 9)
    web = web_config(sim)
    e = Exporter(sim, exe, "--collector.pma.local=false", "--collector.pma.fabric",
                 "--collector.pma.fabric-snapshot=false", "--collector.pma.timeout=200ms", "--web.config.file=" + web)
    e.headers = dict(AUTH)
    status, body = http_get(e.port, "/pma/targets")
    eq(status, 200, "/pma/targets answers")
    groups = json.loads(body)
    guid = {g["labels"]["__meta_rdma_node_name"]: g["targets"][0] for g in groups}
    eq(sorted(guid), sorted(["spine0", "spine1", "leaf0", "leaf1", "host0-0", "host0-1", "host1-0", "host1-1"]),
       "every node of the fat tree listed once")
    check(all(g["labels"]["node_guid"] == g["targets"][0] for g in groups), "node_guid label = target")
    eq({g["labels"]["__meta_rdma_node_type"] for g in groups}, {"switch", "ca"}, "node types")
    status, body = http_get(e.port, "/pma/targets?type=switch")
    eq(len(json.loads(body)), 4, "type=switch lists the 4 switches")
    # bad targets: a clear 4xx, counted, no MAD
    for path, want in (("/pma?target=leaf1", 400), ("/pma?target=0x00000000deadbeef", 404), ("/pma", 400),
                       ("/pma?target=%s&ports=x" % guid["leaf1"], 400), ("/pma?target=%s&bogus=1" % guid["leaf1"], 400),
                       ("/pma/targets?type=hub", 400), ("/pma?target=%s&ports=9" % guid["leaf1"], 400),
                       # one query policy for every extra path (exporter/query.h): a repeated
                       # parameter is refused, not overridden by the last
                       ("/pma?target=%s&target=%s" % (guid["leaf1"], guid["leaf0"]), 400)):
        status, body = http_get(e.port, path)
        check(status == want and body.strip(), "%s -> %d %r" % (path, status, body.strip()))
    m = e.metrics()
    eq(get(m, "rdma_pma_fabric_target_requests_total", result="bad_request"), 7, "bad requests counted")
    eq(get(m, "rdma_pma_fabric_target_requests_total", result="unknown_target"), 1, "unknown target counted")
    # one target by hand: its ports only, the asked subset, promtool-clean
    status, body = http_get(e.port, "/pma?target=%s&ports=2%%2C3" % guid["leaf1"])
    eq(status, 200, "leaf1 ports 2,3 answer")
    t = parse_metrics(body)
    eq(get(t, "rdma_pma_fabric_port_symbol_errors_total", port=2), 1234, "leaf1 port 2 = set, read on demand")
    eq(sorted(dict(l)["port"] for n, l in t if n == "rdma_pma_fabric_port_symbol_errors_total"), ["2", "3"],
       "ports= limits the answer")
    eq(get(t, "rdma_pma_fabric_port_info", port=2, remote_name="host1-1"), 1, "remote end in _info")
    promtool_clean(body, "/pma target")
    # A one-port CA target as Prometheus asks for it (gzip): the same series, within the budget of
    # 2 KB per port on the wire (docs/metrics.md); its text is mostly HELP and TYPE lines.
    _, plain = http_get(e.port, "/pma?target=" + guid["host0-0"])
    req = urllib.request.Request("http://127.0.0.1:%d/pma?target=%s" % (e.port, guid["host0-0"]),
                                 headers={"Accept-Encoding": "gzip", **AUTH})
    with urllib.request.urlopen(req, timeout=30) as r:
        eq(r.headers.get("Content-Encoding"), "gzip", "a /pma answer is gzipped when asked")
        wire = r.read()
    eq(set(parse_metrics(gzip.decompress(wire).decode())), set(parse_metrics(plain)), "gzip answer = plain answer")
    check(len(wire) <= 2048, "one-port CA target: %d bytes on the wire (%d of text), budget 2048" % (len(wire), len(plain)))
    # What each port adds to a target's text, within the same budget: a switch answered whole and
    # for one of its ports. The rest of a target's text (HELP, TYPE, the node's own series) is paid
    # once per target (bench/pma/bench.py prints both parts).
    leaf_ports = next(int(g["labels"]["__meta_rdma_node_ports"]) for g in groups if g["targets"][0] == guid["leaf1"])
    _, whole = http_get(e.port, "/pma?target=" + guid["leaf1"])
    _, one = http_get(e.port, "/pma?target=%s&ports=2" % guid["leaf1"])
    per_port = (len(whole) - len(one)) / (leaf_ports - 1)
    check(leaf_ports > 1 and 0 < per_port <= 2048,
          "text per port of a target: %.0f bytes (leaf1: %d ports, %d bytes whole, %d with one port), budget 2048"
          % (per_port, leaf_ports, len(whole), len(one)))
    tmp = os.path.join(sim.dir, "prom")
    shards = []
    try:
        for i in range(2):
            os.makedirs(os.path.join(tmp, str(i)))
            shards.append(Prometheus(os.path.join(tmp, str(i)), [], scrape_configs=sd_job(e.port, (i, 2))))
        ups = wait_for(lambda: (lambda u: u if len(u[0]) + len(u[1]) == 8 and all(v == 1 for x in u for v in x.values())
                                else None)([prom_up(p) for p in shards]), 120, step=0.5,
                       what="8 targets up across the two shards")
        check(not set(ups[0]) & set(ups[1]), "the shards scrape disjoint targets (%d + %d)" % (len(ups[0]), len(ups[1])))
        eq(set(ups[0]) | set(ups[1]), set(guid.values()), "their union is the whole fabric")
        check(ups[0] and ups[1], "both shards got targets")
        for (node, port), v in sets.items():
            q = 'rdma_pma_fabric_port_symbol_errors_total{node_guid="%s",port="%d"}' % (guid[node], port)
            eq(wait_for(lambda: prom_value(shards, q) or None, 30, what=q), v, "%s port %d SymbolErrors on its target" % (node, port))
        q = ('rdma_pma_fabric_port_link_downed_total{instance="%s",port="3"} * on (node_guid, port) group_left(remote_name)'
             ' rdma_pma_fabric_port_info' % guid["leaf0"])
        eq(wait_for(lambda: prom_value(shards, q), 30, what=q), 9, "leaf0 port 3 LinkDowned, joined with its remote end")
        names = wait_for(lambda: [r["metric"]["remote_name"] for p in shards for r in p.api("query", query=q)["result"]],
                         30, what="join")
        eq(names, ["spine0"], "the join brings the remote end's name (leaf0 port 3 -> spine0)")
        # the shipped dashboard's per-port panels (names joined from the _info series) work on targets
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "dashboards",
                               "rdma-ib-pma-fabric.json")) as f:
            exprs = [t["expr"] for p in json.load(f)["panels"] for t in p.get("targets", [])
                     if "rdma_pma_fabric_port_info" in t.get("expr", "")]
        check(len(exprs) == 4, "4 dashboard panels join the fabric _info series")
        for x in exprs:
            q = (x.replace("$job", ".*").replace("$node", ".*").replace("$__rate_interval", "1m")
                 .replace("$__range", "5m"))
            rows = wait_for(lambda: [r["metric"] for p in shards for r in p.api("query", query=q)["result"]], 30, what=q)
            check(all(r.get("node_name") and r.get("remote_name") for r in rows),
                  "dashboard query gives named ports on targets (%d rows): %s" % (len(rows), x[:60]))
        # a node that stops answering: up 0 for it alone
        sim.cmd('Error "host1-1"[1] 100')
        dead = guid["host1-1"]
        wait_for(lambda: any(prom_up(p).get(dead) == 0 for p in shards), 60, step=0.5, what="up 0 for host1-1")
        ok = get(e.metrics(), "rdma_pma_fabric_target_requests_total", result="ok")
        wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_target_requests_total", result="ok") >= ok + 14, 60,
                 what="two more scrapes of each of the 7 other targets")
        ups = [prom_up(p) for p in shards]
        down = sorted(i for u in ups for i, v in u.items() if v == 0)
        eq(down, [dead], "only the unreachable node is down")
        check(get(e.metrics(), "rdma_pma_fabric_target_requests_total", result="unreachable") >= 1,
              "the exporter answered 503 within the scrape timeout (counted unreachable)")
        # the MAD attempts follow the scrape timeout: 1.1 s less the 0.5 s offset over 2 rounds of 3 attempts
        status, body = http_get(e.port, "/pma?target=" + dead, {"X-Prometheus-Scrape-Timeout-Seconds": "1.1"})
        check(status == 503 and "MAD timeout 100 ms, 2 retries, fitted to the scrape timeout" in body,
              "scrape timeout header shortens the MAD attempts: %d %r" % (status, body.strip()))
        status, body = http_get(e.port, "/pma?target=" + dead)
        check(status == 503 and "MAD timeout 200 ms, 2 retries)" in body,
              "without the header the configured timeout: %d %r" % (status, body.strip()))
        sim.cmd('Error "host1-1"[1] 0')
        wait_for(lambda: any(prom_up(p).get(dead) == 1 for p in shards), 60, step=0.5, what="host1-1 up again")
    finally:
        for p in shards:
            p.stop()
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")


def case_utf8(sim, exe):
    """A node whose NodeDescription is not UTF-8 (bytes ff fe; any root user of a fabric node can set
    it): /metrics stays UTF-8 and promtool-clean, /pma/targets stays JSON, the name shows U+FFFD."""
    e = Exporter(sim, exe, "--collector.pma.fabric", "--collector.pma.fabric-period=200ms",
                 "--collector.pma.timeout=200ms", "--collector.pma.fabric-targets-allow-unauthenticated")
    wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_ports_answered") == 8, 60, what="fabric snapshot")
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % e.port, timeout=30) as r:
        raw = r.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as x:
        check(False, "/metrics is UTF-8: %s" % x)
        return
    check('node_name="Hca\ufffd\ufffd2"' in text, "the invalid bytes are U+FFFD in node_name")
    promtool_clean(text, "fabric snapshot with a non-UTF-8 NodeDescription")
    with urllib.request.urlopen("http://127.0.0.1:%d/pma/targets" % e.port, timeout=30) as r:
        body = r.read()
    try:
        groups = json.loads(body.decode("utf-8"))
    except ValueError as x:
        check(False, "/pma/targets is UTF-8 JSON: %s" % x)
        return
    names = {g["labels"]["__meta_rdma_node_name"]: g["targets"][0] for g in groups}
    check("Hca\ufffd\ufffd2" in names, "/pma/targets lists the node, U+FFFD for the bytes: %s" % sorted(names))
    status, body = http_get(e.port, "/pma?target=" + names.get("Hca\ufffd\ufffd2", "0x0"))
    eq(status, 200, "the node answers as a target")
    promtool_clean(body, "/pma target named with invalid UTF-8")
    eq(e.stop(), 0, "exporter exits 0")


def flood(port, paths, clients, seconds, headers=None):
    """`clients` threads, each with its own keep-alive connection, GET the paths in turn for
    `seconds`: (answers by status, MADs the answers say they sent, answers that sent MADs, seconds)."""
    import http.client
    import threading
    lock = threading.Lock()
    statuses, mads, reads = {}, [0], [0]
    stop = time.monotonic() + seconds

    def client(k):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        i = k
        while time.monotonic() < stop:
            c.request("GET", paths[i % len(paths)], headers=headers or {})
            r = c.getresponse()
            body = r.read().decode()
            sent = sum(v for (n, _), v in parse_metrics(body).items() if n == "rdma_pma_fabric_target_mads")
            with lock:
                statuses[r.status] = statuses.get(r.status, 0) + 1
                mads[0] += sent
                reads[0] += sent > 0
            i += 1
        c.close()
    t0 = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses, mads[0], reads[0], time.monotonic() - t0


def target_mads(e):
    return get(e.metrics(), "rdma_pma_fabric_target_mads_total")


def case_target_bounds(sim, exe):
    """/pma?target= under a flood: one read shared by concurrent requests and cached; the MADs of
    all target reads within the rate cap; a dead target and tiny timeout headers start no discovery;
    the target counters survive a reload that rebuilds the collector."""
    cfg = os.path.join(sim.dir, "bounds.yml")

    def config(cache, rate):
        with open(cfg, "w") as f:
            f.write("collectors:\n  pma:\n    local: false\n    fabric: true\n    fabric_snapshot: false\n"
                    "    fabric_period: 200ms\n    timeout: 200ms\n    fabric_target_cache: %s\n"
                    "    fabric_target_mad_rate: %d\n    fabric_targets_allow_unauthenticated: true\n" % (cache, rate))
    config("5s", 300)
    e = Exporter(sim, exe, "--config.file=" + cfg)
    status, body = http_get(e.port, "/pma/targets")
    guid = {g["labels"]["__meta_rdma_node_name"]: g["targets"][0] for g in json.loads(body)}
    # 1. 8 clients at one target: one read answers them all while it is fresh.
    statuses, mads, reads, secs = flood(e.port, ["/pma?target=" + guid["leaf1"]], 8, 2)
    eq(set(statuses), {200}, "every request to leaf1 answered 200 (%s)" % statuses)
    check(1 <= reads <= 1 + int(secs / 5), "%d requests in %.1f s made %d read(s) of leaf1 (cache 5 s, single-flight)"
          % (sum(statuses.values()), secs, reads))
    eq(target_mads(e), mads, "the MADs counted are those the answers sent")
    # 2. A reload that rebuilds the collector (cache 1 ms: every request reads) keeps the counters,
    #    the target ones and the fabric loop's: the new loop's first discovery adds to the old count.
    ok_before = get(e.metrics(), "rdma_pma_fabric_target_requests_total", result="ok")
    discoveries = wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_discoveries_total"), 30, what="a discovery")
    before = e.metrics()
    refreshes = get(before, "rdma_pma_fabric_refreshes_total")
    config("1ms", 300)
    e.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: get(e.metrics(), "rdma_exporter_config_reloads_total", result="success") >= 1, 30, what="reload")
    m = e.metrics()
    check(get(m, "rdma_pma_fabric_target_requests_total", result="ok") >= ok_before,
          "target requests counter survives the reload (%d before)" % ok_before)
    eq(get(m, "rdma_pma_fabric_target_mads_total"), mads, "target MADs counter survives the reload")
    # Until the new loop publishes, the loop's series are absent; its first snapshot (one discovery,
    # one refresh of its own) counts on from the old loop's counts.
    m = wait_for(lambda: (lambda m: get(m, "rdma_pma_fabric_discoveries_total") is not None and m)(e.metrics()), 30,
                 what="the new loop's first snapshot")
    check(get(m, "rdma_pma_fabric_discoveries_total") >= discoveries + 1,
          "fabric discoveries counter survives the reload: %d after, %d before"
          % (get(m, "rdma_pma_fabric_discoveries_total"), discoveries))
    check(get(m, "rdma_pma_fabric_refreshes_total") > refreshes,
          "fabric refreshes counter survives the reload: %d after, %d before"
          % (get(m, "rdma_pma_fabric_refreshes_total"), refreshes))
    # The forwarding tables are read and the SMs polled in that first refresh too.
    for name in ("rdma_pma_fabric_lft_reads_total", "rdma_pma_fabric_sm_mads_total"):
        check((name, ()) in before, "%s exported before the reload" % name)
        if (name, ()) in before:
            check(get(m, name) > get(before, name), "%s survives the reload: %s after, %d before"
                  % (name, m.get((name, ())), get(before, name)))
    # 3. 8 clients over every target, uncached, as Prometheus asks (1 s scrape timeout): the fabric
    #    sees at most the cap (300 MADs/s, a second's burst): the reads wait for their MADs.
    before = target_mads(e)
    statuses, mads, reads, secs = flood(e.port, ["/pma?target=" + g for g in sorted(guid.values())], 8, 3,
                                        {"X-Prometheus-Scrape-Timeout-Seconds": "1"})
    sent = target_mads(e) - before
    rate = sent / secs
    print("flood of %d requests over %d targets: %d MADs in %.1f s = %.0f MADs/s (cap 300/s + 300 burst): %s"
          % (sum(statuses.values()), len(guid), sent, secs, rate, statuses))
    check(sent <= 300 * secs + 300 + 64, "MADs within the cap: %d <= %.0f" % (sent, 300 * secs + 300 + 64))
    check(sent >= 300, "the flood did read targets (%d MADs)" % sent)
    # 4. A dead target asked over and over, with a tiny timeout header too: no discovery sweep.
    discoveries = get(e.metrics(), "rdma_pma_fabric_discoveries_total")
    sim.cmd('Error "host1-1"[1] 100')
    try:
        statuses, _, _, secs = flood(e.port, ["/pma?target=" + guid["host1-1"]], 4, 2,
                                     {"X-Prometheus-Scrape-Timeout-Seconds": "0.001"})
        check(set(statuses) <= {503}, "the dead target answers 503 (%s)" % statuses)
        status, body = http_get(e.port, "/pma?target=" + guid["host1-1"], {"X-Prometheus-Scrape-Timeout-Seconds": "0.001"})
        check(status == 503 and "MAD timeout 100 ms" in body,
              "a tiny header leaves the attempt at the 100 ms floor: %d %r" % (status, body.strip()))
        refreshes = get(e.metrics(), "rdma_pma_fabric_refreshes_total")
        wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_refreshes_total") >= refreshes + 3, 30,
                 what="three more loop refreshes")
        eq(get(e.metrics(), "rdma_pma_fabric_discoveries_total"), discoveries,
           "no discovery sweep from the failed target within fabric_discovery_period")
    finally:
        sim.cmd('Error "host1-1"[1] 0')
    promtool_clean(e.text(), "target bounds")
    eq(e.stop(), 0, "exporter exits 0")


def case_target_flood(sim, exe):
    """64 clients flood /pma?target= (every target, new timeout headers and no cache, so that
    each request is a new read, a dead target among them) while a Prometheus-like client scrapes
    /metrics and a kubelet-like client polls /healthz: /pma has its own admission pool
    (--web.max-concurrent-other-requests), so no scrape is refused or late, and /healthz answers.
    Anonymous callers are allowed here (the operator's choice), the worst case."""
    import http.client
    import threading
    from exporter_harness import Watchers
    e = Exporter(sim, exe, "--collector.pma.local=false", "--collector.pma.fabric", "--collector.pma.fabric-snapshot=false",
                 "--collector.pma.timeout=200ms", "--collector.pma.fabric-target-cache=1ms",
                 "--collector.pma.fabric-targets-allow-unauthenticated")
    status, body = http_get(e.port, "/pma/targets")
    eq(status, 200, "/pma/targets answers")
    guids = sorted(g["targets"][0] for g in json.loads(body))
    sim.cmd('Error "host1-1"[1] 100')  # a target that never answers holds its reads to their deadline
    statuses = {}
    lock = threading.Lock()
    stop = threading.Event()

    def client(k):
        i = k
        while not stop.is_set():
            path = "/pma?target=%s&ports=1" % guids[i % len(guids)]
            hdr = {"X-Prometheus-Scrape-Timeout-Seconds": "%.2f" % (1 + (i % 50) / 100)}
            try:
                c = http.client.HTTPConnection("127.0.0.1", e.port, timeout=30)
                c.request("GET", path, headers=hdr)
                st = c.getresponse().status
                c.close()
            except (OSError, http.client.HTTPException) as x:
                st = type(x).__name__
            with lock:
                statuses[st] = statuses.get(st, 0) + 1
            i += 64
    try:
        threads = [threading.Thread(target=client, args=(k,)) for k in range(64)]
        for t in threads:
            t.start()
        time.sleep(1)  # the flood is in place
        with Watchers(e.port) as w:
            time.sleep(8)
        stop.set()
        for t in threads:
            t.join()
    finally:
        sim.cmd('Error "host1-1"[1] 0')
    print("/pma flood by 64 clients: %s; %s" % (statuses, w.summary()))
    eq(Watchers.failed(w.scrapes), [], "no Prometheus scrape of /metrics failed during the /pma flood")
    eq(Watchers.failed(w.healthz), [], "every /healthz answered during the /pma flood")
    check(len(w.scrapes) >= 4 and len(w.healthz) >= 10, "the watchers got answers (%d scrapes, %d /healthz)"
          % (len(w.scrapes), len(w.healthz)))
    check(statuses.get(503, 0) > 0, "the flood went past its own admission pool (some /pma got 503): %s" % statuses)
    m = e.metrics()
    check(get(m, "rdma_exporter_http_requests_rejected_total", reason="too_many_scrapes") == 0,
          "no scrape refused for lack of a slot")
    check(get(m, "rdma_exporter_http_requests_rejected_total", reason="too_many_other_requests") > 0,
          "the /pma excess counted apart")
    eq(e.stop(), 0, "exporter exits 0")


# Optional attributes the MAD double (pma_mad_double.cpp) makes an agent refuse, by attribute ID.
REFUSABLE = {0x15: "PortRcvErrorDetails", 0x16: "PortXmitDiscardDetails", 0x1D: "PortCountersExtended"}
EXT_ONLY = ("unicast_transmit_packets", "unicast_receive_packets", "multicast_transmit_packets",
            "multicast_receive_packets")


class Double:
    """The agent quirk: `refuse` is [(lid, attribute id[, port select])]; write() changes it while the
    exporter runs (the double reads the file for every PerfMgt reply)."""

    def __init__(self, sim, library, refuse):
        self.path = os.path.join(sim.dir, "unsupported")
        self.env = {"LD_PRELOAD": library + ":" + sim.shim, "PMA_DOUBLE_UNSUPPORTED": self.path}
        self.write(refuse)

    def write(self, refuse):
        with open(self.path + ".new", "w") as f:
            f.write("".join(" ".join(hex(x) for x in entry) + "\n" for entry in refuse))
        os.replace(self.path + ".new", self.path)


def log_count(e, text):
    return e.log().count(text)


def check_refused_port(m, prefix, labels, refused, where):
    """The counters of refused attributes are absent, those of the others present."""
    groups = {0x15: RCVERR.values(), 0x16: XMTDISC.values(), 0x1D: EXT_ONLY}
    for attr, suffixes in groups.items():
        for suffix in suffixes:
            name = prefix + suffix + "_total"
            if attr in refused:
                check(absent(m, name, **labels), "%s: %s absent (%s refused)" % (where, suffix, REFUSABLE[attr]))
            else:
                check(not absent(m, name, **labels), "%s: %s present" % (where, suffix))


def case_unsupported_local(sim, exe, library):
    lid = sim.lids()["Hca1"][1]
    for f, v in (("PortCounters.SymbolErrorCounter", 42), ("PortCounters.LinkDownedCounter", 3),
                 ("PortCounters.PortXmitData", 123456), ("PortCounters.PortRcvPkts", 789),
                 ("PortCountersExtended.PortXmitData", 10 ** 12), ("PortRcvErrorDetails.PortLoopingErrors", 12),
                 ("PortXmitDiscardDetails.PortInactiveDiscards", 13),
                 ("PortVLXmitWaitCounters.PortVLXmitWaitCounters3", 8)):
        sim.set("Hca1", 1, f, v)
    double = Double(sim, library, [(lid, a) for a in REFUSABLE])
    # The double itself: perfquery through it is refused, without it the simulator answers.
    for flag in ("--rcverr", "--xmtdisc", "-x"):
        check(sim.run(["perfquery", flag], env=double.env).returncode != 0,
              "perfquery %s refused through the double" % flag)
    rcverr, xmtdisc = sim.perfquery("--rcverr"), sim.perfquery("--xmtdisc")
    e = Exporter(sim, exe, "--collector.pma.timeout=200ms", "--collector.pma.retries=1", env=double.env)
    L = {"device": "ibsim0", "port": "1"}
    P = "rdma_pma_port_"
    scrapes = [e.metrics() for _ in range(3)]
    m = scrapes[-1]
    check(all(pma_errors(x) == 0 for x in scrapes),
          "no pma collector error in 3 scrapes of a port that refuses 3 attributes")
    pq = sim.perfquery()
    for field, suffix in PC_ERRORS.items():
        eq(get(m, P + suffix + "_total", **L), pq[field], "refusing port: %s == perfquery %s" % (suffix, field))
    eq(get(m, P + "symbol_errors_total", **L), 42, "SymbolErrorCounter = set value")
    eq(get(m, P + "transmit_bytes_total", **L), pq["PortXmitData"] * 4,
       "PortCountersExtended refused: transmit bytes from the 32-bit PortCounters, == perfquery PortXmitData x 4")
    eq(get(m, P + "transmit_bytes_total", **L), 123456 * 4, "... = the PortCounters value set (not the extended 4e12)")
    eq(get(m, P + "saturated", counter="transmit_bytes", **L), 0, "32-bit transmit bytes watched for saturation")
    eq(get(m, P + "receive_packets_total", **L), pq["PortRcvPkts"], "receive packets == perfquery PortRcvPkts (32-bit)")
    check_refused_port(m, P, L, REFUSABLE, "local")
    eq(get(m, P + "transmit_wait_vl_total", vl="3", **L), 8, "PortVLXmitWaitCounters still read")
    for attr, name in REFUSABLE.items():
        eq(get(m, P + "attribute_supported", attribute=name, **L), 0, "state: %s not supported" % name)
        eq(log_count(e, "answers %s with unsupported" % name), 1, "one log line for %s" % name)
    eq(get(m, P + "attribute_supported", attribute="PortVLXmitWaitCounters", **L), 1, "state: VL wait supported")
    promtool_clean(e.text(), "unsupported local")
    # New agent firmware answers PortRcvErrorDetails; the exporter learns it again when the port
    # fails and comes back (here: every MAD to the local port dropped for a scrape, which is also
    # the path that read an emptied capability mask).
    double.write([(lid, 0x16), (lid, 0x1D)])
    eq(get(e.metrics(), P + "attribute_supported", attribute="PortRcvErrorDetails", **L), 0,
       "a learned refusal is not asked again while the port is unchanged")
    sim.cmd('Error "Hca1"[1] 100')
    try:
        m = e.metrics()
        check(get(m, "rdma_exporter_collector_errors_total", collector="pma", reason="timeout") >= 1,
              "dropped MADs counted as timeouts")
        check(e.proc.poll() is None, "exporter alive after a failed scrape of a port with learned capabilities")
    finally:
        sim.cmd('Error "Hca1"[1] 0')
    m = e.metrics()
    eq(get(m, P + "attribute_supported", attribute="PortRcvErrorDetails", **L), 1, "learned again: now supported")
    eq(get(m, P + "receive_looping_errors_total", **L), rcverr["PortLoopingErrors"], "... and exported == perfquery")
    eq(get(m, P + "attribute_supported", attribute="PortXmitDiscardDetails", **L), 0, "still refused: XmitDiscardDetails")
    check_refused_port(m, P, L, (0x16, 0x1D), "local after re-learning")
    errors = pma_errors(m)
    eq(pma_errors(e.metrics()), errors, "pma errors do not grow once the port answers again")
    for name in REFUSABLE.values():
        eq(log_count(e, "answers %s with unsupported" % name), 1, "still one log line for %s after re-learning" % name)
    check(xmtdisc["PortInactiveDiscards"] == 13, "simulator answers XmitDiscardDetails without the double")
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")


def case_unsupported_fabric(sim, exe, library):
    lids = sim.lids()
    sw, h2 = lids["Switch1"], lids["Hca2"][1]
    for f, v in (("PortCounters.SymbolErrorCounter", 77), ("PortCounters.PortRcvSwitchRelayErrors", 5),
                 ("PortCounters.PortXmitData", 10 ** 6), ("PortCountersExtended.PortXmitData", 10 ** 12),
                 ("PortRcvErrorDetails.PortLoopingErrors", 21)):
        sim.set("Hca2", 1, f, v)
    sim.set("Switch1", 4, "PortRcvErrorDetails.PortLoopingErrors", 304)
    sim.set("Switch1", 4, "PortXmitDiscardDetails.PortNeighborMTUDiscards", 404)
    sim.set("Switch1", 3, "PortXmitDiscardDetails.PortNeighborMTUDiscards", 403)
    # Hca2 refuses all three; Switch1 refuses XmitDiscardDetails on port 4 only.
    double = Double(sim, library, [(h2, a) for a in REFUSABLE] + [(sw, 0x16, 4)])
    check(sim.run(["perfquery", "--xmtdisc", str(sw), "4"], env=double.env).returncode != 0 and
          sim.run(["perfquery", "--xmtdisc", str(sw), "3"], env=double.env).returncode == 0,
          "the double refuses Switch1 port 4 only")
    e = Exporter(sim, exe, "--collector.pma.fabric", "--collector.pma.fabric-period=200ms",
                 "--collector.pma.fabric-discovery-period=1s", env=double.env)
    wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_refreshes_total") >= 2, 60, what="first refreshes")
    scrapes = [e.metrics() for _ in range(3)]
    m = scrapes[-1]
    F = "rdma_pma_fabric_port_"
    S = "rdma_pma_fabric_attribute_supported"
    for x in scrapes:
        check(pma_errors(x) == 0 and absent(x, "rdma_pma_fabric_mad_errors_total"), "no pma or fabric MAD errors")
    eq(get(m, "rdma_pma_fabric_ports_answered"), 8, "all 8 ports answered")
    H2 = {"node_guid": HCA2, "port": "1"}
    pq = sim.perfquery(h2, 1)
    for field, suffix in PC_ERRORS.items():
        eq(get(m, F + suffix + "_total", **H2), pq[field], "Hca2 (refuses 3): %s == perfquery %s" % (suffix, field))
    xd = get(m, F + "transmit_bytes_total", **H2)
    after = sim.perfquery(h2, 1)["PortXmitData"] * 4
    check(4 * 10 ** 6 <= xd <= after < 4 * 10 ** 12,
          "Hca2 transmit bytes from the 32-bit PortCounters: set*4 %d <= exporter %d <= perfquery-after*4 %d"
          % (4 * 10 ** 6, xd, after))
    check_refused_port(m, F, H2, REFUSABLE, "Hca2")
    SW4, SW3 = switch_port(4), switch_port(3)
    check_refused_port(m, F, SW4, (0x16,), "Switch1 port 4")
    check_refused_port(m, F, SW3, (), "Switch1 port 3")
    eq(get(m, F + "receive_looping_errors_total", **SW4), sim.perfquery("--rcverr", sw, 4)["PortLoopingErrors"],
       "Switch1 port 4 RcvErrorDetails == perfquery")
    eq(get(m, F + "transmit_neighbor_mtu_discards_total", **SW3), 403, "Switch1 port 3 XmitDiscardDetails = set")
    for name in REFUSABLE.values():
        eq(get(m, S, node_name="Hca2", attribute=name), 0, "state: Hca2 %s not supported" % name)
        eq(get(m, S, node_name="Hca3", attribute=name), 1, "state: Hca3 %s supported" % name)
    eq(get(m, S, node_name="Switch1", attribute="PortXmitDiscardDetails"), 0, "state: Switch1 refuses on a port")
    eq(get(m, S, node_name="Switch1", attribute="PortRcvErrorDetails"), 1, "state: Switch1 RcvErrorDetails")
    check(absent(m, S, attribute="PortVLXmitWaitCounters"), "no VL state without fabric-vl-xmit-wait")
    promtool_clean(e.text(), "unsupported fabric")
    # New Hca2 firmware answers PortRcvErrorDetails: learned again after a discovery.
    double.write([(h2, 0x16), (h2, 0x1D), (sw, 0x16, 4)])
    wait_for(lambda: get(e.metrics(), S, node_name="Hca2", attribute="PortRcvErrorDetails") == 1, 60,
             what="Hca2 PortRcvErrorDetails learned again after a rediscovery")
    wait_refreshes(e, 2)
    m = e.metrics()
    eq(get(m, F + "receive_looping_errors_total", **H2), 21, "Hca2 RcvErrorDetails exported once supported")
    check_refused_port(m, F, H2, (0x16, 0x1D), "Hca2 after re-learning")
    check(pma_errors(m) == 0 and absent(m, "rdma_pma_fabric_mad_errors_total"), "still no errors after re-learning")
    for attr, name in REFUSABLE.items():
        eq(log_count(e, "Hca2 (0x0000000000100002) port 1 answers %s with unsupported" % name), 1,
           "one log line for Hca2 %s over several discoveries" % name)
    eq(log_count(e, "Switch1 (0x0000000000200000) port 4 answers PortXmitDiscardDetails"), 1, "one log line for Switch1")
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")


# The port collector's counters/ file -> metric suffix, for the PortCounters and
# PortCountersExtended counters the kernel shows in counters/ (perfquery field names).
PORT_PC = {f: s for f, s in PC_ERRORS.items()}
PORT_EXT = {"PortXmitData": ("transmit_bytes", 4), "PortRcvData": ("receive_bytes", 4),
            "PortXmitPkts": ("transmit_packets", 1), "PortRcvPkts": ("receive_packets", 1),
            "PortUnicastXmitPkts": ("unicast_transmit_packets", 1), "PortUnicastRcvPkts": ("unicast_receive_packets", 1),
            "PortMulticastXmitPkts": ("multicast_transmit_packets", 1),
            "PortMulticastRcvPkts": ("multicast_receive_packets", 1)}
TREE_VALUE = 5  # every counters/ file of the port tree: a value no counter of the simulator has


def port_tree(sim, node_guid, lid):
    """A sysfs tree (tests/lib/sysfs_gen.py) with the simulator's CA: ibsim0, its node GUID,
    port 1 InfiniBand ACTIVE at its LID, a counters/ directory in the ext table holding TREE_VALUE
    everywhere. Returns (root, number of counters/ files)."""
    import sysfs_gen  # noqa: E402  (tests/lib, on the path above)
    root = tempfile.mkdtemp(dir=sim.dir, prefix="sysfs-")
    t = sysfs_gen.Tree(root)
    d = sysfs_gen.Device(t, "ibsim0", "0000:01:00.0", "mlx5_core", fw="1", guid_n=node_guid)
    p = d.port(1, "InfiniBand", rate="10 Gb/sec (4X SDR)", lid=hex(lid), sm_lid="0x1")
    values = sysfs_gen.pma_values(t, "ext")
    d.counters(p, {f: TREE_VALUE for f in values})
    return root, len(values)


def port_errors(m):
    return sum(v for (n, l), v in m.items()
               if n == "rdma_exporter_collector_errors_total" and dict(l).get("collector") == "port")


def case_port_mad(sim, exe, library):
    """The port collector takes an InfiniBand port's counters from its PMA with MADs instead of
    counters/, with the same names, and falls back to counters/ when the MADs fail."""
    lid = sim.lids()["Hca1"][1]
    for f, v in (("PortCounters.SymbolErrorCounter", 42), ("PortCounters.LinkDownedCounter", 3),
                 ("PortCounters.PortRcvErrors", 7), ("PortCounters.PortXmitDiscards", 99999),
                 ("PortCounters.VL15Dropped", 9), ("PortCounters.PortXmitWait", 123456),
                 ("PortCountersExtended.PortXmitData", 10 ** 12), ("PortCountersExtended.PortRcvData", 2 ** 62 - 1),
                 ("PortCountersExtended.PortXmitPkts", 2 ** 40 + 3), ("PortCountersExtended.PortRcvPkts", 2 ** 33),
                 ("PortCountersExtended.PortUnicastXmitPkts", 2 ** 35 + 1),
                 ("PortCountersExtended.PortMulticastRcvPkts", 17)):
        sim.set("Hca1", 1, f, v)
    root, files = port_tree(sim, 0x100000, lid)
    L = {"device": "ibsim0", "port": "1"}
    P = "rdma_port_"
    double = Double(sim, library, [])
    e = Exporter(sim, exe, "--collector.port.counters-source=auto", collector="port", sysfs=root, env=double.env)
    first = e.metrics()
    scrapes = [e.metrics() for _ in range(3)]
    m = scrapes[-1]
    text = e.text()
    pq, pqx = sim.perfquery(), sim.perfquery("-x")
    for field, suffix in PORT_PC.items():
        eq(get(m, P + suffix + "_total", **L), pq[field], "MAD source: %s == perfquery %s" % (suffix, field))
    for field, (suffix, scale) in PORT_EXT.items():
        eq(get(m, P + suffix + "_total", **L), pqx[field] * scale, "MAD source: %s == perfquery -x %s" % (suffix, field))
    eq(get(m, P + "transmit_bytes_total", **L), 4 * 10 ** 12, "64-bit PortXmitData x 4, as set")
    eq(get(m, P + "receive_bytes_total", **L), 4 * (2 ** 62 - 1), "64-bit PortRcvData x 4 beyond 2^63, exact")
    eq(get(m, P + "transmit_packets_total", **L), 2 ** 40 + 3, "64-bit PortXmitPkts as set")
    eq(get(m, P + "unicast_transmit_packets_total", **L), 2 ** 35 + 1, "PortUnicastXmitPkts as set")
    eq(get(m, P + "transmit_discards_total", **L), 65535, "16-bit PortXmitDiscards clamps at 65535")
    eq(get(m, P + "pma_saturated", counter="port_xmit_discards", **L), 1, "saturation flag under the counters/ file name")
    eq(get(m, P + "pma_saturated", counter="symbol_error", **L), 0, "unsaturated counter not flagged")
    check(absent(m, P + "pma_saturated", counter="port_xmit_data"), "no saturation flag for a 64-bit data counter")
    eq(get(m, P + "pma_counters_present", **L), 1, "PMA counters present")
    # The cost: no counters/ file read, ClassPortInfo once, then PortCounters + PortCountersExtended.
    for i, s in enumerate([first] + scrapes):
        eq(get(s, P + "pma_reads", source="sysfs", **L), 0, "scrape %d: no counters/ file read" % i)
    eq(get(first, P + "pma_reads", source="mad", **L) >= 3, True, "first scrape: ClassPortInfo + 2 MADs (or more)")
    # A retry on a loaded host adds one; the fewest of three scrapes is the plain cost.
    eq(min(get(s, P + "pma_reads", source="mad", **L) for s in scrapes), 2,
       "PortCounters + PortCountersExtended: 2 MADs per scrape (fewest of 3 scrapes)")
    eq(port_errors(m), 0, "no port collector errors")
    check('capability="pma_mad"} 1' in text, "capability pma_mad 1")
    promtool_clean(text, "port, MAD source")

    # PortCountersExtended refused: the MADs fail, the port reads counters/ (state, logged once, not an error).
    double.write([(lid, 0x1D)])
    m = e.metrics()
    eq(get(m, P + "symbol_errors_total", **L), TREE_VALUE, "MADs failed: counters/ value")
    eq(get(m, P + "transmit_bytes_total", **L), TREE_VALUE * 4, "MADs failed: counters/ data value x 4")
    eq(get(m, P + "pma_reads", source="sysfs", **L), files, "MADs failed: every counters/ file read")
    eq(get(m, "rdma_exporter_collector_capability", collector="port", capability="pma_mad"), 0, "capability pma_mad 0")
    m = e.metrics()
    eq(get(m, P + "pma_reads", source="mad", **L), 0, "after a failure: no MAD until the retry time")
    eq(get(m, P + "symbol_errors_total", **L), TREE_VALUE, "still counters/")
    eq(port_errors(m), 0, "a failed MAD in auto mode is no error")
    eq(log_count(e, "PMA MADs to ibsim0/1 failed"), 1, "the fallback logged once")
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")

    # counters-source=mad: the failure is an error and the counters are absent, counters/ unread.
    e = Exporter(sim, exe, "--collector.port.counters-source=mad", collector="port", sysfs=root, env=double.env)
    m = e.metrics()
    check(absent(m, P + "symbol_errors_total", **L), "mad forced, MADs failing: counters absent")
    eq(get(m, P + "pma_reads", source="sysfs", **L), 0, "mad forced: no counters/ read")
    eq(get(m, "rdma_exporter_collector_errors_total", collector="port", reason="mad"), 1, "mad forced: one error")
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")
    double.write([])

    # counters-source=sysfs, and auto on a tree of another device (node GUID): counters/ only.
    other, _ = port_tree(sim, 0x0c42a103004029a0, lid)
    for source, tree in (("sysfs", root), ("auto", other)):
        e = Exporter(sim, exe, "--collector.port.counters-source=" + source, collector="port", sysfs=tree)
        m = e.metrics()
        eq(get(m, P + "symbol_errors_total", **L), TREE_VALUE, "%s: counters/ value" % source)
        eq(get(m, P + "pma_reads", source="sysfs", **L), files, "%s: every counters/ file read" % source)
        eq(get(m, P + "pma_reads", source="mad", **L), 0, "%s: no MAD" % source)
        eq(port_errors(m), 0, "%s: no errors" % source)
        eq(e.stop(), 0, "exporter exits 0 on SIGTERM")

    # Beside the pma collector: both ask through the one umad agent of the port, with the same values.
    e = Exporter(sim, exe, "--collector.pma", collector="port", sysfs=root)
    m = e.metrics()
    for suffix in list(PORT_PC.values()) + [x for x, _ in PORT_EXT.values()]:
        eq(get(m, P + suffix + "_total", **L), get(m, "rdma_pma_port_" + suffix + "_total", **L),
           "port collector == pma collector: " + suffix)
    eq(get(m, P + "pma_reads", source="sysfs", **L), 0, "beside the pma collector: no counters/ read")
    eq(port_errors(m) + pma_errors(m), 0, "no errors in either collector")
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")


def main():
    exe = take_exporter_arg()
    case, double = sys.argv[1], sys.argv[2]
    try:
        if case in ("targets", "target_bounds", "target_flood"):
            sim = Sim(fat_tree(2, 2, 2), host="host0-0")
        elif case == "utf8":  # Hca2's NodeDescription: bytes ff fe in it
            sim = Sim(DEFAULT_NET.replace('"Hca2"', '"Hca\xff\xfe2"').encode("latin-1"))
        else:
            sim = Sim()
    except SetupError as s:
        print("FAIL - test bed:", s)
        return 1
    if case.startswith("unsupported_") or case == "port_mad":
        cases = {"unsupported_local": case_unsupported_local, "unsupported_fabric": case_unsupported_fabric,
                 "port_mad": case_port_mad}
        return run_sim_case(sim, case, cases, FAILS, exe, double)
    cases = {"local": case_local, "fabric": case_fabric, "faults": case_faults, "targets": case_targets,
             "utf8": case_utf8, "target_bounds": case_target_bounds, "target_flood": case_target_flood}
    return run_sim_case(sim, case, cases, FAILS, exe)


if __name__ == "__main__":
    sys.exit(main())
