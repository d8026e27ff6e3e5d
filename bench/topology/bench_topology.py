#!/usr/bin/env python3
"""Topology collector cost:

 1. on the DGX H100-shaped 8-GPU/8-NIC tree (tests/topology/pci_gen.py) with a full expect:
    section: median of the collector's own time (rdma_exporter_collector_scrape_duration_seconds
    {collector="topology"}) and of the /metrics latency, over --scrapes scrapes after the first
    (the first walks the topology);
 2. on the port benchmark's tree (sysfs_gen.py --profile bench, 16 HCAs): median /metrics latency of
    --collector.port alone against --collector.port --collector.topology, interleaved scrape by
    scrape, and their ratio: what enabling the collector (on by default) adds to a scrape.

  bench/topology/bench_topology.py --exporter build/rdma_exporter [--scrapes 300]
        [--baseline OTHER_BINARY | --baseline-rev main] [--syscall-scrapes 100]

With --baseline (another build) or --baseline-rev (a commit, built here once into
~/.cache/rdma_exporter/bench-baseline/<commit>, ccache helps), part 1 also runs that binary on the
same tree, scrape by scrape interleaved with --exporter, and prints both medians side by side and
their ratio (exporter / baseline). Then, where strace is installed, the system calls per scrape of
each binary (strace -f attached over --syscall-scrapes scrapes, every thread but the topology
refresher) and those of one background refresh (the topo-refresh thread of an exporter reading
every 50 ms): the scrape should make none of the collector's reads.
"""
import argparse
import collections
import contextlib
import os
import re
import shutil
import signal
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


def build_baseline(rev):
    """rdma_exporter of commit `rev`, built once (cached by commit id)."""
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", rev], check=True, capture_output=True, text=True).stdout.strip()
    out = os.path.join(os.path.expanduser("~/.cache/rdma_exporter/bench-baseline"), commit)
    binary = os.path.join(out, "build", "rdma_exporter")
    if os.path.exists(binary):
        return binary
    src = os.path.join(out, "src")
    os.makedirs(src, exist_ok=True)
    archive = subprocess.Popen(["git", "-C", REPO, "archive", commit], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", src], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"git archive {commit} failed")
    env = dict(os.environ, CCACHE_BASEDIR=src, CCACHE_NOHASHDIR="1")
    build = os.path.join(out, "build")
    # The flags of scripts/test.sh's build tree, so that ccache has most objects already.
    subprocess.run(["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DRDMA_EXPORTER_TESTS=ON"],
                   check=True, env=env,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build, "--target", "rdma_exporter", f"-j{os.cpu_count()}"], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    return binary


STRACE_LINE = re.compile(r"^(\d+)\s+([a-z_0-9]+)\(")


def thread_names(pid):
    names = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/comm") as f:
            names[int(tid)] = f.read().strip()
    return names


@contextlib.contextmanager
def traced(pid, path):
    """strace -f attached to every thread of pid while the block runs; yields a function that
    returns the calls made since the block began, as {thread name: Counter(syscall)}, and how many
    of each thread's calls name `marker` (a path)."""
    p = subprocess.Popen(["strace", "-f", "-qq", "-o", path, "-p", str(pid)], stderr=subprocess.DEVNULL)
    try:
        # Attached once the idle threads' first calls show (an HTTP thread's poll wakes up); a
        # guard of 10 s, then whatever came.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (not os.path.exists(path) or os.path.getsize(path) == 0):
            time.sleep(0.05)
        time.sleep(0.2)
        start = os.path.getsize(path) if os.path.exists(path) else 0
        names = thread_names(pid)

        def calls(marker=None):
            out, marked = collections.defaultdict(collections.Counter), collections.Counter()
            with open(path) as f:
                f.seek(start)
                for line in f:
                    m = STRACE_LINE.match(line)
                    if m and "resumed>" not in line:
                        thread = names.get(int(m.group(1)), "?")
                        out[thread][m.group(2)] += 1
                        marked[thread] += bool(marker) and marker in line
            return out, marked
        yield calls
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=30)


def per_scrape_syscalls(name, exporter, client, scrapes, tmp):
    """The system calls of `scrapes` scrapes, all threads but the refresher's, per scrape."""
    with traced(exporter.proc.pid, os.path.join(tmp, f"strace-{name}")) as calls:
        for _ in range(scrapes):
            client.scrape()
        by_thread, _ = calls()
    total = collections.Counter()
    for thread, c in by_thread.items():
        if thread != "topo-refresh":
            total.update(c)
    top = ", ".join(f"{k} {v / scrapes:.1f}" for k, v in total.most_common(6))
    print(f"8x8 {name}: {sum(total.values()) / scrapes:.1f} system calls per scrape (all threads but topo-refresh, "
          f"strace -f over {scrapes} scrapes): {top}")


def per_refresh_syscalls(binary, args, tmp):
    """The topo-refresh thread's system calls per reading, on an exporter reading every 50 ms. Each
    reading stats bus/pci/devices once (has the bus changed?): that call counts the readings."""
    with Exporter(binary, *args, "--collector.topology.health-interval=50ms") as e:
        Client(e.url + "/metrics").scrape()
        with traced(e.proc.pid, os.path.join(tmp, "strace-refresh")) as calls:
            time.sleep(1.0)
            by_thread, marked = calls('/bus/pci/devices"')
    mine = by_thread.get("topo-refresh", collections.Counter())
    n = max(1, marked["topo-refresh"])
    top = ", ".join(f"{k} {v / n:.1f}" for k, v in mine.most_common(6))
    print(f"8x8 exporter: {sum(mine.values()) / n:.1f} system calls per background refresh (topo-refresh, {n} refreshes): {top}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--scrapes", type=int, default=300)
    ap.add_argument("--baseline", help="a second rdma_exporter binary measured side by side on the 8x8 tree")
    ap.add_argument("--baseline-rev", help="build this commit's rdma_exporter (e.g. main) and use it as --baseline")
    ap.add_argument("--syscall-scrapes", type=int, default=100)
    a = ap.parse_args()
    if a.baseline_rev:
        a.baseline = build_baseline(a.baseline_rev)
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
            med = statistics.median(own[0])
            print(f"8x8 target (docs/metrics.md, topology collector cost): collector median at most ~300 us: {med * 1e6:.0f} us, {'met' if med <= 300e-6 else 'NOT met'}")
            if a.baseline:
                print(f"8x8 ratio exporter / baseline: collector {statistics.median(own[0]) / statistics.median(own[1]):.3f}, "
                      f"/metrics {statistics.median(lat[0]) / statistics.median(lat[1]):.3f}")
            if shutil.which("strace"):
                for k, (name, ex) in enumerate(zip(["exporter", "baseline"], [e, b])):
                    if k < len(clients):
                        per_scrape_syscalls(name, ex, clients[k], a.syscall_scrapes, tmp)
            else:
                print("strace not installed: no system call counts")
        if shutil.which("strace"):
            per_refresh_syscalls(a.exporter, args, tmp)

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
