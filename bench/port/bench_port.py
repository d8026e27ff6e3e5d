#!/usr/bin/env python3
"""Port collector benchmark, side by side in one run on the same generated tree:

  rdma_exporter (--collector.port only)  vs  node_exporter's infiniband collector
  (prometheus-node-exporter --collector.disable-defaults --collector.infiniband)

Prints mean/median /metrics latency and latency per exported series for both and their ratios
(goal: the whole scrape at most 1/4 of node_exporter's); the raw floor (plain open/read/close over
the same files) against the exporter's own collection time (discovery + port collector, from its
self-metrics; goal: at most 0.6 x the floor, which the kept descriptors of sources/sysfs/reader.h
make possible). The floor is measured twice: one pass per scrape cycle, beside the exporter's
collection (the ratio the goal is judged on: both meet the caches node_exporter's scrape left),
and back to back (60 passes between rounds of scrapes, each finding the last one's caches hot),
with the pread-only pass over the same files (the bound: what the reads alone cost through kept
descriptors); the RSS of both exporters after the run.
Interleaves the two exporters scrape by scrape so that machine noise hits both alike; each is
scraped over one keep-alive connection, as Prometheus does.

  bench/port/bench_port.py --exporter build/rdma_exporter --raw-floor build/bench/bench_raw_floor

--versus OTHER_BINARY adds another rdma_exporter build (e.g. an older commit's) with the same base
flags (not --extra-flag), scraped in the same cycles in alternating order with the first, and
prints both medians and their ratio: the scrape cost a change adds, side by side in one run.
The --exporter position measured about 0.84 x the --versus one for the same binary on a loaded
2-core host (bench-3 control, cause not found): run both orientations and take the geometric mean
of ratio(A vs B) and 1/ratio(B vs A), which cancels it.
"""
import argparse
import http.client
import urllib.parse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
from exporter_harness import Exporter, free_port, memory_kib, parse_text  # noqa: E402


class Client:
    """A keep-alive HTTP client, as Prometheus scrapes: connection set-up is not measured."""

    def __init__(self, url):
        u = urllib.parse.urlparse(url)
        self.host, self.port, self.path = u.hostname, u.port, u.path
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)

    def scrape(self):
        try:
            return self._timed()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            # The server closes a keep-alive connection idle for a while (the floor's rounds):
            # reconnect, as Prometheus does, and time the request on the new connection.
            self.conn.close()
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            self.conn.connect()
            return self._timed()

    def _timed(self):
        t0 = time.perf_counter()
        self.conn.request("GET", self.path)
        r = self.conn.getresponse()
        body = r.read().decode()
        return time.perf_counter() - t0, body


def scrape_once(url):
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as r:
        body = r.read().decode()
    return time.perf_counter() - t0, body


ROUND = 50  # scrapes between two measurements of the floor


def count_series(text):
    return sum(1 for l in text.splitlines() if l and not l.startswith("#"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--raw-floor", required=True)
    # Unpacked by scripts/test-tools.sh (put it on PATH: PATH=$(scripts/test-tools.sh --dir)/usr/bin:$PATH).
    ap.add_argument("--node-exporter", default=shutil.which("prometheus-node-exporter") or "prometheus-node-exporter")
    ap.add_argument("--devices", type=int, default=16)
    ap.add_argument("--scrapes", type=int, default=300)
    # More rdma_exporter flags (another collector beside port: --extra-flag=--collector.nic_health),
    # to measure what it adds to the same scrape; their collection time is printed apart.
    ap.add_argument("--extra-flag", action="append", default=[])
    ap.add_argument("--versus", help="another rdma_exporter binary to scrape beside --exporter (same base flags)")
    ap.add_argument("--versus-flag", action="append", default=[], help="more flags for the --versus binary")
    a = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "sys")
        subprocess.run([sys.executable, os.path.join(REPO, "tests/lib/sysfs_gen.py"), root, "--profile", "bench",
                        "--devices", str(a.devices)], check=True)
        # Left still as sysfs directories are: one changed in the last KeptDir::kRacySeconds is
        # reopened at every scrape, which is the naive cost and not what a node sees.
        time.sleep(2.5)
        ne_port = free_port()
        ne = subprocess.Popen([a.node_exporter, "--collector.disable-defaults", "--collector.infiniband",
                               "--web.disable-exporter-metrics", f"--path.sysfs={root}",
                               f"--web.listen-address=127.0.0.1:{ne_port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            with Exporter(a.exporter, f"--path.sysfs={root}", "--collector.disable-defaults", "--collector.port",
                          *a.extra_flag) as ex:
                ne_url = f"http://127.0.0.1:{ne_port}/metrics"
                for _ in range(50):  # wait for node_exporter
                    try:
                        scrape_once(ne_url)
                        break
                    except OSError:
                        time.sleep(0.1)
                ours, theirs, collect, collect_port, floors, pread_floors = [], [], [], [], [], []
                vs, vs_ex, vs_c, vs_body = [], None, None, ""
                if a.versus:
                    vs_ex = Exporter(a.versus, f"--path.sysfs={root}", "--collector.disable-defaults", "--collector.port",
                                     *a.versus_flag)
                    vs_ex.__enter__()
                    vs_c = Client(vs_ex.url + "/metrics")
                    for _ in range(10):
                        vs_c.scrape()

                def scrape_versus():
                    nonlocal vs_body
                    if vs_c:
                        dt, vs_body = vs_c.scrape()
                        vs.append(dt)
                cycle_floors = []
                extra_collect = {}  # --extra-flag collectors' own collection times
                ours_c, theirs_c = Client(ex.url + "/metrics"), Client(ne_url)
                for _ in range(10):  # warm-up
                    ours_c.scrape(), theirs_c.scrape()

                def scrape_ours():
                    dt, body = ours_c.scrape()
                    ours.append(dt)
                    s, _ = parse_text(body)
                    port_s = float(s[("rdma_exporter_collector_scrape_duration_seconds",
                                      frozenset({("collector", "port")}))])
                    collect.append(float(s[("rdma_exporter_discovery_duration_seconds", frozenset())]) + port_s)
                    collect_port.append(port_s)
                    for (name, labels), v in s.items():
                        if name == "rdma_exporter_collector_scrape_duration_seconds" and ("collector", "port") not in labels:
                            extra_collect.setdefault(dict(labels)["collector"], []).append(float(v))
                    return body

                def floor_pass():
                    cycle_floor.stdin.write("\n")
                    cycle_floor.stdin.flush()
                    cycle_floors.append(float(cycle_floor.stdout.readline()))

                with subprocess.Popen([a.raw_floor, root, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True) as cycle_floor:
                    files = int(cycle_floor.stdout.readline().split("=")[1])
                    for i in range(a.scrapes):
                        # The back-to-back floor is taken between rounds of scrapes, so that the
                        # load of the moment weighs on it as on the scrapes; the ratio uses the
                        # median of the rounds. One node_exporter scrape after it gives the next
                        # cycle the caches every other cycle starts with.
                        if i % ROUND == 0:
                            floor_out = subprocess.run([a.raw_floor, root, "60"], capture_output=True, text=True,
                                                       check=True).stdout
                            f = dict(kv.split("=") for kv in floor_out.split())
                            floors.append(float(f["median_seconds"]))
                            pread_floors.append(float(f["pread_median_seconds"]))
                            theirs_c.scrape()
                        # One cycle: node_exporter's scrape last; the exporter's collection and one
                        # floor pass before it, in alternating order, so that each follows
                        # node_exporter's scrape half of the time and the other's pass the rest.
                        # With --versus, its scrape is beside ours in an order that rotates over
                        # four cycles, so that each of the two follows node_exporter's scrape, the
                        # floor pass (which leaves the caches cold) and the other equally often.
                        # Without it, cycles alternate (ours, floor) and (floor, ours) as before.
                        k = i % 4
                        if k == 0:
                            body = scrape_ours()
                            scrape_versus()
                            floor_pass()
                        elif k == 1:
                            floor_pass()
                            scrape_versus()
                            body = scrape_ours()
                        elif k == 2:
                            scrape_versus()
                            body = scrape_ours()
                            floor_pass()
                        else:
                            floor_pass()
                            body = scrape_ours()
                            scrape_versus()
                        dt, nbody = theirs_c.scrape()
                        theirs.append(dt)
                    cycle_floor.stdin.close()
                our_series, their_series = count_series(body), count_series(nbody)
                mem, ne_mem = memory_kib(ex.proc.pid), memory_kib(ne.pid)
                if vs_ex:
                    vs_ex.__exit__(None, None, None)
        finally:
            ne.terminate()
            ne.wait()
        floor, pread_floor = statistics.median(floors), statistics.median(pread_floors)
        cycle_floor_median = statistics.median(cycle_floors)

    def row(name, lat, n):
        print(f"{name:<28} mean {statistics.mean(lat)*1e3:8.3f} ms  median {statistics.median(lat)*1e3:8.3f} ms  "
              f"series {n:5d}  per series {statistics.mean(lat)/n*1e6:7.3f} us (median {statistics.median(lat)/n*1e6:7.3f} us)")
    print(f"tree: {a.devices} mlx5 InfiniBand HCAs (ext PMA table), {a.scrapes} interleaved scrapes each")
    row("rdma_exporter (port)", ours, our_series)
    row("node_exporter (infiniband)", theirs, their_series)
    per_ours = statistics.median(ours) / our_series
    per_theirs = statistics.median(theirs) / their_series
    if vs:
        row("versus " + a.versus[-20:], vs, count_series(vs_body))
        print(f"scrape latency ratio exporter/versus (medians): {statistics.median(ours)/statistics.median(vs):.3f}; "
              f"series {our_series} vs {count_series(vs_body)}")
    print(f"scrape latency ratio rdma_exporter/node_exporter (medians): "
          f"{statistics.median(ours)/statistics.median(theirs):.3f}  (goal <= 0.25)")
    print(f"per-series latency ratio rdma_exporter/node_exporter (medians): {per_ours/per_theirs:.3f}")
    print(f"raw floor: {files} files open/read/close, median {floor*1e3:.3f} ms per pass; "
          f"pread through kept descriptors alone {pread_floor*1e3:.3f} ms = {pread_floor/floor:.2f} x raw floor")
    print(f"raw floor in the scrape cycle: one open/read/close pass beside each collection, "
          f"median {cycle_floor_median*1e3:.3f} ms = {cycle_floor_median/floor:.2f} x the back-to-back floor")
    print(f"exporter collection (discovery + port collector), median {statistics.median(collect)*1e3:.3f} ms "
          f"= {statistics.median(collect)/cycle_floor_median:.2f} x raw floor in the scrape cycle  (goal <= 0.6); "
          f"{statistics.median(collect)/floor:.2f} x the back-to-back floor")
    print(f"  of which the port collector alone, median {statistics.median(collect_port)*1e3:.3f} ms "
          f"= {statistics.median(collect_port)/floor:.2f} x raw floor, "
          f"{statistics.median(collect_port)/pread_floor:.2f} x its own reads' pread floor")
    def mem_row(name, m):
        return (f"{name} {m['VmRSS']/1024:.2f} MiB (anonymous {m['RssAnon']/1024:.2f}, "
                f"shared libraries and other files {m['RssFile']/1024:.2f})")
    for name, times in sorted(extra_collect.items()):
        print(f"  collector {name} (--extra-flag), median {statistics.median(times)*1e3:.3f} ms per scrape")
    print(f"RSS after {a.scrapes + 10} scrapes: {mem_row('rdma_exporter', mem)}; {mem_row('node_exporter', ne_mem)}; "
          f"ratio {mem['VmRSS']/ne_mem['VmRSS']:.2f}, anonymous {mem['RssAnon']/ne_mem['RssAnon']:.2f}")


if __name__ == "__main__":
    main()
