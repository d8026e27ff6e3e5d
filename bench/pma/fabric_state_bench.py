#!/usr/bin/env python3
"""Fabric physical state benchmark (link training and subnet managers): the link table and SM health against iblinkinfo and a
`smpquery portinfo` loop, on the same ibsim fat tree as bench.py, with a persistent opensm.

usage: fabric_state_bench.py <rdma_exporter> [leaves] [hosts_per_leaf] [spines] [smpquery_sample]
Prints: discovery time, refresh time (SMInfo polls included), SMPs the exporter sends per discovery
and per refresh, link series bytes per link, iblinkinfo's time and SMPs on the same fabric, and the
smpquery loop's ports/s and SMPs per query.

SMPs are counted where they leave: ibsim adds 1 to the sending port's PortXmitPkts for every MAD, and
every client here (exporter, iblinkinfo, smpquery) sits on host0-0, whose own counters perfquery reads
without sending a MAD over a link (a query of the local port does not move them). The persistent
opensm sits on host0-1; the replies host0-0 sends to its sweeps are the only other traffic from that
port (a few per sweep).
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/lib"))
from ibsim_harness import Exporter, Sim, fat_tree, get, wait_for  # noqa: E402


def xmit_pkts(sim):
    """MADs host0-0 has sent (PortCountersExtended.PortXmitPkts of the local port)."""
    return sim.perfquery("-x")["PortXmitPkts"]


def main():
    exe = os.path.abspath(sys.argv[1])
    leaves, hosts, spines = (int(a) for a in (sys.argv[2:5] + ["18", "18", "18"][len(sys.argv[2:5]):]))
    sample = int(sys.argv[5]) if len(sys.argv) > 5 else 200
    nodes = leaves * hosts + leaves + spines
    sim = Sim(fat_tree(leaves, hosts, spines), host="host0-0",
              ibsim_args=("-N", str(max(2048, nodes + 16)), "-S", str(max(256, leaves + spines + 16)),
                          "-P", str(max(13312, 2 * (leaves * (2 * hosts + 2 * spines + 1) + spines)))))
    try:
        env = dict(sim.shim_env, SIM_HOST="host0-1")
        sm = sim.track(subprocess.Popen(["opensm", "-f", os.path.join(sim.dir, "osm-bench.log")], cwd=sim.dir, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        wait_for(lambda: "SMINFO_MASTER" in sim.run(["sminfo"]).stdout, 120, step=0.5, what="opensm master")
        x0 = xmit_pkts(sim)
        e = Exporter(sim, exe, "--collector.pma.local=false", "--collector.pma.fabric", "--collector.pma.fabric-snapshot=false", "--collector.pma.fabric-targets-allow-unauthenticated",
                     "--collector.pma.fabric-period=2s", "--collector.pma.fabric-discovery-period=1h", "--scrape.timeout=60s")
        wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_refreshes_total") >= 3, 600, step=0.5, what="3 refreshes")
        m = e.metrics()
        text = e.text()
        smps = xmit_pkts(sim) - x0
        links = get(m, "rdma_pma_fabric_links", state="up")
        link_bytes = sum(len(l) + 1 for l in text.splitlines() if l.startswith("rdma_pma_fabric_link_"))
        sm_bytes = sum(len(l) + 1 for l in text.splitlines() if l.startswith("rdma_pma_fabric_sm_"))
        r3 = get(m, "rdma_pma_fabric_refreshes_total")
        print("exporter: %d links up, %d degraded; discovery %.3f s; refresh without discovery %.3f s; "
              "SMInfo SMPs %d in %d refreshes (%.2f per refresh); link series %d bytes = %.0f per link; SM series %d bytes"
              % (links, get(m, "rdma_pma_fabric_links_degraded"), get(m, "rdma_pma_fabric_discovery_duration_seconds"),
                 get(m, "rdma_pma_fabric_scrape_duration_seconds"), get(m, "rdma_pma_fabric_sm_mads_total"), r3,
                 get(m, "rdma_pma_fabric_sm_mads_total") / r3, link_bytes, link_bytes / max(links, 1), sm_bytes))
        discoveries = get(m, "rdma_pma_fabric_discoveries_total")
        print("exporter SMPs: %d sent in %d discoveries and %d refreshes; %d SMInfo -> %d per discovery"
              % (smps, discoveries, r3, get(m, "rdma_pma_fabric_sm_mads_total"),
                 (smps - get(m, "rdma_pma_fabric_sm_mads_total")) / max(discoveries, 1)))
        e.stop()
        x0 = xmit_pkts(sim)
        t = time.monotonic()
        r = sim.run(["iblinkinfo"], timeout=600)
        print("iblinkinfo: %.2f s, %d lines, rc %d, %d SMPs" % (time.monotonic() - t, r.stdout.count("\n"), r.returncode,
                                                             xmit_pkts(sim) - x0))
        lids = sorted(v for v in sim.lids().values() if isinstance(v, int))
        x0 = xmit_pkts(sim)
        t = time.monotonic()
        done = 0
        for i in range(sample):
            lid = lids[i % len(lids)]
            if sim.run(["smpquery", "portinfo", str(lid), str(1 + i % hosts)], timeout=30).returncode == 0:
                done += 1
        dt = time.monotonic() - t
        loop_smps = xmit_pkts(sim) - x0
        ports = 2 * (leaves * (hosts + spines))
        print("smpquery portinfo loop: %d/%d in %.2f s = %.0f ports/s -> %.0f s for all %d cabled ports; "
              "%.2f SMPs per query" % (done, sample, dt, done / dt, ports / (done / dt), ports, loop_smps / sample))
    finally:
        sim.close()


if __name__ == "__main__":
    main()
