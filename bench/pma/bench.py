#!/usr/bin/env python3
"""Fabric scrape benchmark: the exporter's pma fabric mode vs a loop of `perfquery -x` per port
(what infiniband_exporter does), on a simulated two-level fat tree under ibsim.

usage: bench.py <rdma_exporter> [leaves] [hosts_per_leaf] [spines] [perfquery_sample]
Defaults: 18 leaves x (18 hosts + 18 uplinks), 18 spines -> 1296 cabled ports.
Prints, in one run: the snapshot (ports, refresh time with and without discovery, ports/s, bytes,
memory); the per-node targets (discovery, /pma/targets, every target scraped at 8 and 32
concurrent scrapes as Prometheus would: time, MADs per port, bytes per port for switch and CA
targets, memory); and the perfquery loop.
"""
import concurrent.futures
import json
import os
import re
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/lib"))
from ibsim_harness import Exporter, Sim, fat_tree, get, wait_for  # noqa: E402


def rss_mib(pid):
    status = dict(l.split(":", 1) for l in open("/proc/%d/status" % pid) if ":" in l)
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def byte_breakdown(body):
    """What a /pma answer's bytes are: HELP and TYPE lines, counter samples, _info samples, the rest."""
    parts = {"HELP": 0, "TYPE": 0, "counters": 0, "_info": 0, "other samples": 0}
    for line in body.decode().splitlines(keepends=True):
        if line.startswith("# HELP"):
            parts["HELP"] += len(line)
        elif line.startswith("# TYPE"):
            parts["TYPE"] += len(line)
        elif line.split("{")[0].split(" ")[0].endswith("_total"):
            parts["counters"] += len(line)
        elif "_info{" in line:
            parts["_info"] += len(line)
        else:
            parts["other samples"] += len(line)
    return "%d bytes: %s" % (len(body), ", ".join("%s %d" % kv for kv in parts.items()))


def bench_targets(sim, exe):
    """Per-node targets: Prometheus' view of the fabric (one /pma scrape per node)."""
    t0 = time.monotonic()
    e = Exporter(sim, exe, "--collector.pma.local=false", "--collector.pma.fabric", "--collector.pma.fabric-snapshot=false", "--collector.pma.fabric-targets-allow-unauthenticated",
                 "--collector.pma.fabric-discovery-period=1h", "--web.max-requests=64",
                 # What the fabric and the exporter can do, not the MAD cap (2000/s by default):
                 # every target is read once, at once, which Prometheus spreads over its interval.
                 "--collector.pma.fabric-target-mad-rate=1000000")
    get_ = lambda path: urllib.request.urlopen("http://127.0.0.1:%d%s" % (e.port, path), timeout=600).read()
    # the first refresh (discovery, then the SMInfo polls) publishes the loop's series
    m = wait_for(lambda: (lambda m: get(m, "rdma_pma_fabric_refreshes_total") >= 1 and m)(e.metrics()), 600,
                 step=0.2, what="first refresh")
    ready = time.monotonic() - t0
    disc = get(m, "rdma_pma_fabric_discovery_duration_seconds")
    t = time.monotonic()
    groups = json.loads(get_("/pma/targets"))
    sd = time.monotonic() - t
    ports = {g["targets"][0]: int(g["labels"]["__meta_rdma_node_ports"]) for g in groups}
    types = {g["targets"][0]: g["labels"]["__meta_rdma_node_type"] for g in groups}
    print("targets: exporter up with discovery in %.1f s (libibnetdisc %.3f s); /pma/targets %d nodes, %d ports, %d bytes in %.3f s"
          % (ready, disc, len(groups), sum(ports.values()), len(json.dumps(groups)), sd))
    for conc in (8, 32):
        mads0 = get(e.metrics(), "rdma_pma_fabric_target_mads_total")
        sizes = {}
        t = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(conc) as pool:
            for guid, body in zip(ports, pool.map(lambda g: get_("/pma?target=" + g), ports)):
                sizes[guid] = len(body)
        took = time.monotonic() - t
        m = e.metrics()
        mads = get(m, "rdma_pma_fabric_target_mads_total") - mads0
        failed = sum(v for (n, l), v in m.items() if n == "rdma_pma_fabric_target_requests_total"
                     and dict(l)["result"] not in ("ok",))
        by = {}
        for guid, size in sizes.items():
            b, p = by.get(types[guid], (0, 0))
            by[types[guid]] = (b + size, p + ports[guid])
        all_b, all_p = sum(sizes.values()), sum(ports.values())
        print("targets: %d targets at %d concurrent scrapes in %.2f s = %.0f ports/s; %.2f MADs/port; not ok %d; "
              "bytes/port %.0f overall, %s" % (len(ports), conc, took, all_p / took, mads / all_p, failed, all_b / all_p,
                                                ", ".join("%s %.0f" % (k, b / p) for k, (b, p) in sorted(by.items()))))
    for kind in sorted(set(types.values())):
        guid = next(g for g in ports if types[g] == kind)
        req = urllib.request.Request("http://127.0.0.1:%d/pma?target=%s" % (e.port, guid),
                                     headers={"Accept-Encoding": "gzip"})  # as Prometheus asks
        with urllib.request.urlopen(req, timeout=600) as r:
            wire = len(r.read())
            encoding = r.headers.get("Content-Encoding", "identity")
        print("targets: one %s target (%d ports): %s; on the wire (%s) %d bytes = %.0f per port"
              % (kind, ports[guid], byte_breakdown(get_("/pma?target=" + guid)), encoding, wire, wire / ports[guid]))
    # What a target costs whatever its size (HELP and TYPE lines, the node's own series) and what
    # each port adds to it: one switch answered whole and for one of its ports (ports=).
    sw = next((g for g in ports if types[g] == "switch" and ports[g] > 1), None)
    if sw:
        whole = get_("/pma?target=" + sw).decode()
        first = re.search(r'rdma_pma_fabric_port_info\{port="(\d+)"', whole).group(1)
        one = len(get_("/pma?target=%s&ports=%s" % (sw, first)))
        per_port = (len(whole) - one) / (ports[sw] - 1)
        print("targets: text of a target: %.0f bytes fixed + %.0f bytes per port (a %d-port switch whole, %d bytes, "
              "and with ports=%s, %d bytes)" % (one - per_port, per_port, ports[sw], len(whole), first, one))
    rss, hwm = rss_mib(e.proc.pid)
    print("targets: exporter memory RSS %.1f MiB, peak (VmHWM) %.1f MiB" % (rss, hwm))
    e.stop()


def main():
    exe = os.path.abspath(sys.argv[1])  # the exporter runs in the simulator's directory
    leaves, hosts, spines = (int(a) for a in (sys.argv[2:5] + ["18", "18", "18"][len(sys.argv[2:5]):]))
    sample = int(sys.argv[5]) if len(sys.argv) > 5 else 200
    t0 = time.monotonic()
    nodes = leaves * hosts + leaves + spines
    sim = Sim(fat_tree(leaves, hosts, spines), host="host0-0",
              ibsim_args=("-N", str(max(2048, nodes + 16)), "-S", str(max(256, leaves + spines + 16)),
                          "-P", str(max(13312, 2 * (leaves * (2 * hosts + 2 * spines + 1) + spines)))))
    print("fabric: %d leaves x (%d hosts + %d uplinks), %d spines; ibsim + opensm --once ready in %.1f s"
          % (leaves, hosts, spines, spines, time.monotonic() - t0))
    try:
        e = Exporter(sim, exe, "--collector.pma.local=false", "--collector.pma.fabric", "--collector.pma.fabric-targets-allow-unauthenticated",
                     "--collector.pma.fabric-period=2s", "--collector.pma.fabric-discovery-period=1h",
                     "--scrape.timeout=60s")
        wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_refreshes_total") >= 3, 600, step=0.5, what="3 refreshes")
        m = e.metrics()
        ports = get(m, "rdma_pma_fabric_ports")
        ok = get(m, "rdma_pma_fabric_ports_answered")
        dur = get(m, "rdma_pma_fabric_scrape_duration_seconds")  # refresh 3: no discovery
        mads = get(m, "rdma_pma_fabric_mads_total")
        errors = sum(v for (n, _), v in m.items() if n == "rdma_pma_fabric_mad_errors_total")
        disc = get(m, "rdma_pma_fabric_discovery_duration_seconds")
        t = time.monotonic()
        body = e.text()
        scrape = time.monotonic() - t
        print("exporter: %d ports (%d answered, %d MAD errors), refresh without discovery %.3f s = %.0f ports/s; "
              "discovery %.3f s; %d MADs in 3 refreshes; /metrics %.3f s, %d bytes"
              % (ports, ok, errors, dur, ports / dur, disc, mads, scrape, len(body)))
        status = dict(l.split(":", 1) for l in open("/proc/%d/status" % e.proc.pid) if ":" in l)
        print("exporter memory after %d refreshes and %d scrapes: RSS %.1f MiB, peak (VmHWM) %.1f MiB"
              % (get(m, "rdma_pma_fabric_refreshes_total"), 2, int(status["VmRSS"].split()[0]) / 1024,
                 int(status["VmHWM"].split()[0]) / 1024))
        e.stop()
        bench_targets(sim, exe)
        # perfquery -x per port, as infiniband_exporter runs it: a sample of switch ports
        lids = sim.lids()
        targets = []
        for name, lid in lids.items():
            if isinstance(lid, int):
                n = hosts + spines if name.startswith("leaf") else leaves
                targets += [(lid, p) for p in range(1, n + 1)]
        targets = targets[:sample]
        t = time.monotonic()
        for lid, p in targets:
            sim.run(["perfquery", "-x", str(lid), str(p)])
        pq = time.monotonic() - t
        print("perfquery -x loop: %d ports in %.2f s = %.0f ports/s -> %.1f s for all %d ports; speed-up %.0fx"
              % (len(targets), pq, len(targets) / pq, ports * pq / len(targets), ports, (ports * pq / len(targets)) / dur))
    finally:
        sim.close()


if __name__ == "__main__":
    main()
