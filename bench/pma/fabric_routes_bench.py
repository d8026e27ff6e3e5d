#!/usr/bin/env python3
"""Forwarding-table read and routes benchmark (`/pma/routes`, fabric mode) on the same ibsim fat tree as bench.py.

usage: fabric_routes_bench.py <rdma_exporter> [leaves] [hosts_per_leaf] [spines]
Prints: switches and the LinearForwardingTable SMPs of one table read, its duration, and the time
of /pma/routes from one host to every LID of the fabric (and that answer's size).
"""
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/lib"))
from ibsim_harness import Exporter, Sim, fat_tree, get, wait_for  # noqa: E402


def main():
    exe = os.path.abspath(sys.argv[1])
    leaves, hosts, spines = (int(a) for a in (sys.argv[2:5] + ["18", "18", "18"][len(sys.argv[2:5]):]))
    nodes = leaves * hosts + leaves + spines
    sim = Sim(fat_tree(leaves, hosts, spines), host="host0-0",
              ibsim_args=("-N", str(max(2048, nodes + 16)), "-S", str(max(256, leaves + spines + 16)),
                          "-P", str(max(13312, 2 * (leaves * (2 * hosts + 2 * spines + 1) + spines)))))
    try:
        e = Exporter(sim, exe, "--collector.pma.fabric", "--collector.pma.fabric-snapshot=false", "--collector.pma.fabric-targets-allow-unauthenticated",
                     "--collector.pma.fabric-period=1s", "--collector.pma.fabric-discovery-period=1h")
        wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_lft_reads_total") >= 1, 600, step=0.5, what="a table read")
        m = e.metrics()
        reads = get(m, "rdma_pma_fabric_lft_reads_total")
        print("fabric: %d leaves x (%d hosts + %d uplinks), %d spines: %d cabled ports" % (
            leaves, hosts, spines, spines, get(m, "rdma_pma_fabric_ports")))
        print("LFT read: %d switches, %d SMPs per read, %.3f s, %d failed switches" % (
            get(m, "rdma_pma_fabric_lft_switches"), get(m, "rdma_pma_fabric_lft_smps_total") // reads,
            get(m, "rdma_pma_fabric_lft_read_duration_seconds"), get(m, "rdma_pma_fabric_lft_failures_total")))
        with urllib.request.urlopen("http://127.0.0.1:%d/pma/targets?type=ca" % e.port, timeout=60) as r:
            import json
            src = json.loads(r.read())[0]["labels"]["node_guid"]
        t = time.monotonic()
        with urllib.request.urlopen("http://127.0.0.1:%d/pma/routes?src=%s" % (e.port, src), timeout=120) as r:
            body = r.read()
        routes = json.loads(body)["routes"]
        print("/pma/routes from one host to every LID: %d routes (%d errors) in %.3f s, %d bytes" % (
            len(routes), sum(1 for x in routes if x["error"]), time.monotonic() - t, len(body)))
        e.stop()
    finally:
        sim.close()


if __name__ == "__main__":
    main()
