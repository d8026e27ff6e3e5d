#!/usr/bin/env python3
"""Topology collector cost:

 1. on the DGX H100-shaped 8-GPU/8-NIC tree (tests/topology/pci_gen.py) with a full expect:
    section: median of the collector's own time (rdma_exporter_collector_scrape_duration_seconds
    {collector="topology"}) and of the /metrics latency, over --scrapes scrapes after the first
    (the first walks the topology);
 2. on the port benchmark's tree (sysfs_gen.py --profile bench, 16 HCAs): median /metrics latency of
    --collector.port alone against --collector.port --collector.topology, interleaved scrape by
    scrape, and their ratio: what enabling the collector (on by default) adds to a scrape.

  bench/topology/bench_topology.py --exporter build/rdma_exporter [--scrapes 300] [--baseline OTHER_BINARY]

With --baseline (another build, e.g. main's), part 1 also runs that binary on the same tree, scrape by
scrape interleaved with --exporter, and prints both medians and their ratio (exporter / baseline).
"""
import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
sys.path.insert(0, os.path.join(REPO, "bench", "port"))
from exporter_harness import Exporter, parse_text  # noqa: E402
from bench_port import Client  # noqa: E402

EXPECT = """collectors:
  topology:
    expect:
      gpus: 8
      ports: [{link_layer: InfiniBand, count: 8, min_rate_gbps: 400}]
      pcie: {speed_gts: 32, width: 16}
      gpu_nic_relation: PXB
      acs_off: true
      peer_memory: true
      firmware: {MT4129: ["28.39.2048"]}
"""


def own_time(text):
    s, _ = parse_text(text)
    return float(s[("rdma_exporter_collector_scrape_duration_seconds", frozenset({("collector", "topology")}))])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--scrapes", type=int, default=300)
    ap.add_argument("--baseline", help="a second rdma_exporter binary measured side by side on the 8x8 tree")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "dgx")
        subprocess.run([sys.executable, os.path.join(REPO, "tests/topology/pci_gen.py"), root], check=True)
        cfg = os.path.join(tmp, "cfg.yml")
        with open(cfg, "w") as f:
            f.write(EXPECT)
        args = (f"--path.sysfs={root}", f"--config.file={cfg}", "--collector.disable-defaults", "--collector.topology")
        with Exporter(a.exporter, *args) as e, \
                (Exporter(a.baseline, *args) if a.baseline else contextlib.nullcontext()) as b:
            clients = [Client(e.url + "/metrics")] + ([Client(b.url + "/metrics")] if a.baseline else [])
            for c in clients:
                c.scrape()
            lat, own = [[] for _ in clients], [[] for _ in clients]
            for i in range(a.scrapes):
                # Alternate which one goes first, so that neither always meets the other's caches.
                for k in (range(len(clients)) if i % 2 else reversed(range(len(clients)))):
                    t, body = clients[k].scrape()
                    lat[k].append(t)
                    own[k].append(own_time(body))
        for k, name in enumerate(["exporter", "baseline"][:len(clients)]):
            print(f"8x8 DGX H100 tree, topology only, {a.scrapes} scrapes, {name}: collector median {statistics.median(own[k]) * 1e6:.0f} us "
                  f"(p90 {statistics.quantiles(own[k], n=10)[8] * 1e6:.0f} us), /metrics median {statistics.median(lat[k]) * 1e6:.0f} us")
        if a.baseline:
            print(f"8x8 ratio exporter / baseline: collector {statistics.median(own[0]) / statistics.median(own[1]):.3f}, "
                  f"/metrics {statistics.median(lat[0]) / statistics.median(lat[1]):.3f}")

        bench = os.path.join(tmp, "bench")
        subprocess.run([sys.executable, os.path.join(REPO, "tests/lib/sysfs_gen.py"), bench, "--profile", "bench"], check=True)
        with Exporter(a.exporter, f"--path.sysfs={bench}", "--collector.disable-defaults", "--collector.port") as p, \
                Exporter(a.exporter, f"--path.sysfs={bench}", "--collector.disable-defaults", "--collector.port",
                         "--collector.topology") as pt:
            cp, ct = Client(p.url + "/metrics"), Client(pt.url + "/metrics")
            cp.scrape(), ct.scrape()
            lp, lt, own = [], [], []
            for i in range(a.scrapes):
                # Alternate which one goes first, so that neither always meets the other's caches.
                if i % 2:
                    lp.append(cp.scrape()[0])
                t, body = ct.scrape()
                lt.append(t)
                own.append(own_time(body))
                if not i % 2:
                    lp.append(cp.scrape()[0])
                time.sleep(0.002)
        mp, mt = statistics.median(lp), statistics.median(lt)
        print(f"port bench tree (16 HCAs), {a.scrapes} scrapes: port alone median {mp * 1e6:.0f} us, port+topology "
              f"{mt * 1e6:.0f} us, ratio {mt / mp:.3f}; topology collector median {statistics.median(own) * 1e6:.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
