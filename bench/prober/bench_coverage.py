#!/usr/bin/env python3
"""ECMP path coverage of the prober's flows, through the kernel's own multipath hash: how many
of the paths between two hosts the flows (and so the per-flow path traces) cross.

  sudo bench/prober/bench_coverage.py --helper build/bench/bench_prober_flow_labels \\
      [--links 64] [--hours 1] [--horizon-hours 6] [--flows 1,2,4,8] [--ways 2,3,4,8,16,32,64] [--hash-seed S]

1. The source ports: `bench_prober_flow_labels` (flow_labels.cpp) runs the real Engine at the
   collector's defaults (flow-rotation 1m, interval 1 s) for --links links (distinct link keys,
   hence distinct link seeds) and each --flows count, over --horizon-hours of simulated time, and
   prints the UDP source port of every QP it creates and when. Nothing of choose_flow_label is
   re-implemented here.
2. The paths: a router namespace with one veth in and 64 veths out (peers in a sink namespace),
   net.ipv4.fib_multipath_hash_policy=1 (L4: addresses, protocol, ports), one N-way multipath
   route per N of --ways. Every (link, port) is looked up with the kernel's forwarding lookup,
   `route get <dst> from <src> iif in0 ipproto udp sport S dport 4791`, batched through `ip -batch`:
   the nexthop device is the path. Each link has its own destination (a peer) and all share the
   source (this node's port), as on a fabric.
3. The comparison: the same links with uniformly random source ports (0xC000..0xFFFF) drawn at the
   same times, i.e. what chance gives (QP-number-derived ports behave like it).

Prints per N and flows: distinct paths per link after --hours (median, min), the expectation for
that many distinct hash inputs (N * (1 - (1 - 1/N)^k)), the median time until a link had seen all N
paths (">H h" when most links had not within the horizon), ours and random side by side. Needs root
(network namespaces); about a minute.
"""
import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile

SPORT_MIN, SPORT_MAX = 0xC000, 0xFFFF
MAX_WAYS = 64
SRC = "10.0.0.2"


def sh(*args, **kw):
    return subprocess.run(list(args), check=True, text=True, capture_output=True, **kw).stdout


class Router:
    """A router namespace with an N-way route per N; the nexthops' far ends sit in a sink namespace."""

    def __init__(self, ways, hash_seed):
        tag = str(os.getpid())
        self.ns, self.sink = "rdmacov-r-" + tag, "rdmacov-s-" + tag
        self.prefix = {}
        sh("ip", "netns", "add", self.ns)
        sh("ip", "netns", "add", self.sink)
        self.ip("link", "set", "lo", "up")
        sh("ip", "netns", "exec", self.ns, "sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=1", "net.ipv4.ip_forward=1",
           "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")
        if hash_seed is not None:  # Linux 6.11+; unset: the kernel's own random seed
            sh("ip", "netns", "exec", self.ns, "sysctl", "-qw", f"net.ipv4.fib_multipath_hash_seed={hash_seed}")
        self.ip("link", "add", "in0", "type", "veth", "peer", "name", "in0p", "netns", self.sink)
        self.ip("addr", "add", "10.0.0.1/24", "dev", "in0")
        self.ip("link", "set", "in0", "up")
        sh("ip", "-n", self.sink, "link", "set", "in0p", "up")
        width = max(ways)
        for k in range(width):
            self.ip("link", "add", f"nh{k}", "type", "veth", "peer", "name", f"nh{k}p", "netns", self.sink)
            self.ip("addr", "add", f"10.1.{k}.1/30", "dev", f"nh{k}")
            self.ip("link", "set", f"nh{k}", "up")
            sh("ip", "-n", self.sink, "link", "set", f"nh{k}p", "up")
        for i, n in enumerate(ways):
            self.prefix[n] = 100 + i
            hops = []
            for k in range(n):
                hops += ["nexthop", "via", f"10.1.{k}.2", "dev", f"nh{k}"]
            self.ip("route", "add", f"10.{100 + i}.0.0/16", *hops)

    def ip(self, *args):
        return sh("ip", "-n", self.ns, *args)

    def dest(self, n, link):
        return f"10.{self.prefix[n]}.{link // 250}.{link % 250 + 1}"

    def paths(self, queries):
        """queries: [(n, link, sport)] -> [nexthop index], by the kernel's forwarding lookup."""
        with tempfile.NamedTemporaryFile("w", suffix=".batch") as f:
            for n, link, sport in queries:
                f.write(f"route get {self.dest(n, link)} from {SRC} iif in0 ipproto udp sport {sport} dport 4791\n")
            f.flush()
            out = sh("ip", "-n", self.ns, "-batch", f.name)
        got = [int(w[2:]) for line in out.splitlines() for w in line.split() if w.startswith("nh") and w[2:].isdigit()]
        if len(got) != len(queries):
            raise SystemExit(f"ip -batch answered {len(got)} lookups of {len(queries)}")
        return got

    def close(self):
        for ns in (self.ns, self.sink):
            subprocess.run(["ip", "netns", "del", ns], check=False)


def prober_ports(helper, links, flows, seconds, rotation):
    """{link: [(seconds, sport)]} from the real engine."""
    out = sh(helper, str(links), str(flows), str(seconds), str(rotation), "1")
    seq = {i: [] for i in range(links)}
    for line in out.splitlines():
        if line.startswith("#"):
            continue
        link, at, sport = line.split()
        seq[int(link)].append((float(at), int(sport)))
    return seq


def random_ports(seq, rng):
    return {link: [(at, rng.randint(SPORT_MIN, SPORT_MAX)) for at, _ in s] for link, s in seq.items()}


def coverage(seq, path_of, n, hours, horizon):
    """Per link: distinct paths seen by `hours`, and the time the N-th distinct path appeared (inf: never)."""
    seen_by, full_at, ports_by = [], [], []
    for link, s in seq.items():
        seen, full = set(), float("inf")
        for at, sport in s:
            seen.add(path_of[(n, link, sport)])
            if len(seen) == n and full == float("inf"):
                full = at
        seen_by.append(len({path_of[(n, link, sp)] for at, sp in s if at <= hours * 3600}))
        ports_by.append(len({sp for at, sp in s if at <= hours * 3600}))
        full_at.append(full)
    return seen_by, full_at, ports_by


def fmt_time(full_at, horizon_h):
    m = statistics.median(full_at)
    if m == float("inf"):
        return f">{horizon_h:g} h"
    if m < 60:
        return "at start" if m < 1 else f"{m:.0f} s"
    return f"{m / 60:.0f} min" if m < 3600 else f"{m / 3600:.1f} h"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--helper", required=True, help="bench_prober_flow_labels")
    ap.add_argument("--links", type=int, default=64, help="links sampled (distinct link keys; default max-peers 64)")
    ap.add_argument("--hours", type=float, default=1.0, help="when distinct paths are counted")
    ap.add_argument("--horizon-hours", type=float, default=6.0, help="how long the time to full coverage is followed")
    ap.add_argument("--flows", default="1,2,4,8")
    ap.add_argument("--ways", default="2,3,4,8,16,32,64")
    ap.add_argument("--rotation", type=int, default=60, help="flow-rotation in seconds (default the collector's 1m)")
    ap.add_argument("--seed", type=int, default=26, help="seed of the random ports")
    ap.add_argument("--hash-seed", type=int, help="net.ipv4.fib_multipath_hash_seed of the router (default: the kernel's)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (network namespaces)")
    ways = [int(x) for x in a.ways.split(",")]
    flows_list = [int(x) for x in a.flows.split(",")]
    if max(ways) > MAX_WAYS or min(ways) < 2:
        raise SystemExit(f"--ways: 2..{MAX_WAYS}")
    horizon = int(a.horizon_hours * 3600)
    rng = random.Random(a.seed)
    runs = {}
    for f in flows_list:
        ours = prober_ports(a.helper, a.links, f, horizon, a.rotation)
        runs[f] = {"ours": ours, "random": random_ports(ours, rng)}
    router = Router(ways, a.hash_seed)
    try:
        queries = sorted({(n, link, sp) for n in ways for r in runs.values() for s in r.values()
                          for link, seq in s.items() for _, sp in seq})
        path_of = dict(zip(queries, router.paths(queries)))
    finally:
        router.close()
    print(f"# {a.links} links, flow-rotation {a.rotation} s, paths counted after {a.hours:g} h, full coverage followed "
          f"for {a.horizon_hours:g} h; {len(queries)} kernel lookups (fib_multipath_hash_policy=1, "
          f"hash seed {'the kernel' + chr(39) + 's' if a.hash_seed is None else a.hash_seed})")
    print("| N | flows | ports/link by then | ours: paths median (min) | random: median (min) | expected | "
          "ours: time to all N (median) | random |")
    print("|---|---|---|---|---|---|---|---|")
    for n in ways:
        for f in flows_list:
            so, fo, po = coverage(runs[f]["ours"], path_of, n, a.hours, horizon)
            sr, fr, _ = coverage(runs[f]["random"], path_of, n, a.hours, horizon)
            k = statistics.median(po)
            expected = n * (1 - (1 - 1 / n) ** k)
            print(f"| {n} | {f} | {k:g} | {statistics.median(so):g} ({min(so)}) | {statistics.median(sr):g} ({min(sr)}) | "
                  f"{expected:.1f} | {fmt_time(fo, a.horizon_hours)} | {fmt_time(fr, a.horizon_hours)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
