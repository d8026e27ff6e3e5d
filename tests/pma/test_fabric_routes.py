#!/usr/bin/env python3
"""InfiniBand routes from the switches' forwarding tables (issue 26) against ibsim and opensm.

routes: the route the exporter computes (/pma/routes, from the LinearForwardingTable of every
switch that fabric mode reads after each discovery) equals ibtracert's, hop by hop (node GUID, in
and out port), for every ordered pair of CA ports of a fat tree with parallel paths; again after a
spine-leaf cable is unlinked and opensm sweeps (opensm re-routes around it: the routes change, and
the exporter's follow). Then the intersection (/pma/routes/suspects, rdma::model::suspect_links fed
with these real routes and a loss verdict per pair given in the request, as a prober's would be):
pairs chosen so that exactly one cable is on all the lossy routes and on no clean one are named
with that cable, both ends.

usage: test_fabric_routes.py --exporter PATH routes
Exit 0 = pass, else fail (also when the simulator cannot be installed or started).
"""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from exporter_harness import take_exporter_arg  # noqa: E402
from ibsim_harness import Exporter, Sim, SetupError, get, run_sim_case, wait_for  # noqa: E402
from test_pma import FAILS, check, eq, http_get  # noqa: E402

# Two spines, three leaves, two single-port hosts per leaf: between leaves there are two paths, and
# opensm's min-hop routing spreads the destination LIDs over both spines.
NET = """Switch\t4 "rt-spine-1"
[1]\t"rt-leaf-1"[3]
[2]\t"rt-leaf-2"[3]
[3]\t"rt-leaf-3"[3]

Switch\t4 "rt-spine-2"
[1]\t"rt-leaf-1"[4]
[2]\t"rt-leaf-2"[4]
[3]\t"rt-leaf-3"[4]
"""
for leaf in (1, 2, 3):
    NET += '\nSwitch\t4 "rt-leaf-%d"\n[1]\t"rt-host-%d1"[1]\n[2]\t"rt-host-%d2"[1]\n[3]\t"rt-spine-1"[%d]\n[4]\t"rt-spine-2"[%d]\n' % (
        leaf, leaf, leaf, leaf, leaf)
for leaf in (1, 2, 3):
    for h in (1, 2):
        NET += '\nHca\t1 "rt-host-%d%d"\n[1]\t"rt-leaf-%d"[%d]\n' % (leaf, h, leaf, h)
HOSTS = ["rt-host-%d%d" % (l, h) for l in (1, 2, 3) for h in (1, 2)]


def guids(sim):
    """node name -> node GUID (0x + 16 hex digits), from ibnetdiscover."""
    out = sim.run(["ibnetdiscover"]).stdout
    res = {}
    for m in re.finditer(r'^(?:Switch|Ca)\s+\d+\s+"[SH]-([0-9a-f]+)"\s+# "([^"]+)"', out, re.M):
        res[m.group(2)] = "0x%016x" % int(m.group(1), 16)
    return res


def ibtracert(sim, src_lid, dst_lid):
    """[(node name, in port, out port)] as ibtracert walks it (0 = none), from source to destination.
    Names, not GUIDs: ibtracert prints a CA's port GUID on the hop lines and its node GUID on "From"."""
    r = sim.run(["ibtracert", str(src_lid), str(dst_lid)], timeout=30)
    if r.returncode != 0:
        raise AssertionError("ibtracert %d %d failed: %s" % (src_lid, dst_lid, (r.stdout + r.stderr)[-300:]))
    hops = []
    for line in r.stdout.splitlines():
        name = re.search(r'"([^"]*)"\s*$', line)
        m = re.match(r'^From \w+ \{0x[0-9a-f]+\} portnum (\d+)', line)
        if m and name:
            hops.append([name.group(1), 0, int(m.group(1))])
            continue
        m = re.match(r'^\[(\d+)\] -> \w+ port \{0x[0-9a-f]+\}\[(\d+)\]', line)
        if m and name and hops:
            hops[-1][2] = int(m.group(1))
            hops.append([name.group(1), int(m.group(2)), 0])
    if not hops:
        raise AssertionError("ibtracert %d %d: no hops in %r" % (src_lid, dst_lid, r.stdout[-300:]))
    return [tuple(h) for h in hops]


def exporter_route(e, src_guid, dst_lid):
    status, body = http_get(e.port, "/pma/routes?src=%s&dst=%d" % (src_guid, dst_lid))
    if status != 200:
        raise AssertionError("/pma/routes %s %d: %d %s" % (src_guid, dst_lid, status, body[:200]))
    (r,) = json.loads(body)["routes"]
    if r["error"]:
        return "error %s: %s" % (r["error"], r["detail"])
    return [(h["name"], h["in_port"], h["out_port"]) for h in r["hops"]]


def compare_all(sim, e, lids, g, what):
    """Every ordered pair of CA ports: the exporter's route equals ibtracert's. Returns the routes."""
    routes = {}
    same = 0
    for a in HOSTS:
        for b in HOSTS:
            if a == b:
                continue
            ref = ibtracert(sim, lids[a][1], lids[b][1])
            got = exporter_route(e, g[a], lids[b][1])
            same += got == ref
            if got != ref:
                print("%s: %s -> %s: exporter %s, ibtracert %s" % (what, a, b, got, ref))
            routes[(a, b)] = got
    eq(same, len(HOSTS) * (len(HOSTS) - 1), "%s: every CA pair's route equals ibtracert's" % what)
    return routes


def lft_reads(e):
    return get(e.metrics(), "rdma_pma_fabric_lft_reads_total")


def case_routes(sim, exe):
    lids = sim.lids()
    g = guids(sim)
    eq(sorted(h for h in HOSTS if h in g and h in lids), sorted(HOSTS), "every host has a GUID and a LID")
    e = Exporter(sim, exe, "--collector.pma.fabric", "--collector.pma.fabric-snapshot=false",
                 "--collector.pma.fabric-period=300ms", "--collector.pma.fabric-discovery-period=1s")
    wait_for(lambda: lft_reads(e) >= 1, 60, what="a first forwarding table read")
    m = e.metrics()
    eq(get(m, "rdma_pma_fabric_lft_switches"), 5, "the tables of all 5 switches")
    # 5 switches, LinearFDBTop under 64 here: one block (one SMP) each
    smps = get(m, "rdma_pma_fabric_lft_smps_total") / lft_reads(e)
    print("LFT SMPs per read: %.1f, read took %.3f s" % (smps, get(m, "rdma_pma_fabric_lft_read_duration_seconds")))
    eq(get(m, "rdma_pma_fabric_lft_failures_total"), 0, "no failed table read")
    before = compare_all(sim, e, lids, g, "after the first sweep")
    spines = {r[2][0] for r in before.values() if len(r) == 5}
    eq(len(spines), 2, "inter-leaf routes use both spines")
    # bad requests are answered, not crashed on
    eq(http_get(e.port, "/pma/routes")[0], 400, "no src: 400")
    eq(http_get(e.port, "/pma/routes?src=zz")[0], 400, "bad src: 400")
    eq(http_get(e.port, "/pma/routes?src=%s&dst=70000" % g[HOSTS[0]])[0], 400, "dst beyond unicast: 400")
    check("unknown_lid" in http_get(e.port, "/pma/routes?src=%s&dst=999" % g[HOSTS[0]])[1], "unknown LID: an error value")
    # Unlink rt-spine-1 <-> rt-leaf-3 and sweep: every route to or from leaf 3 goes through spine 2.
    sim.cmd('Unlink "rt-spine-1"[3]')
    r = sim.run(["opensm", "--once", "-f", os.path.join(sim.dir, "osm2.log")], timeout=60)
    eq(r.returncode, 0, "SM sweep after Unlink")
    n = lft_reads(e)
    wait_for(lambda: lft_reads(e) >= n + 2, 60, what="two table reads after the sweep")
    after = compare_all(sim, e, lids, g, "after Unlink and a sweep")
    leaf3 = [(a, b) for (a, b) in after if (a.startswith("rt-host-3") or b.startswith("rt-host-3")) and a[8] != b[8]]
    check(all("rt-spine-1" not in [h[0] for h in after[p]] for p in leaf3), "no route to or from leaf 3 crosses rt-spine-1")
    check(any(before[p] != after[p] for p in leaf3), "some routes changed with the sweep")
    # The intersection on the real routes: the pairs whose routes cross rt-spine-2 -> rt-leaf-3 are lossy,
    # every other pair clean: the one cable on all lossy routes and on no clean one is named.
    def crosses(route):
        return any(route[i][0] == "rt-spine-2" and route[i + 1][0] == "rt-leaf-3" for i in range(len(route) - 1))
    lossy = [p for p in after if crosses(after[p])]
    clean = [p for p in after if not crosses(after[p])]
    check(len(lossy) >= 2, "%d lossy pairs chosen" % len(lossy))
    spec = lambda ps: ",".join("%s/1-%d" % (g[a], lids[b][1]) for a, b in ps)  # noqa: E731
    status, body = http_get(e.port, "/pma/routes/suspects?lossy=%s&clean=%s" % (spec(lossy), spec(clean)))
    eq(status, 200, "/pma/routes/suspects answers (%s)" % body[:200])
    eq(http_get(e.port, "/pma/routes/suspects?lossy=zz")[0], 400, "a malformed pair list: 400")
    eq(http_get(e.port, "/pma/routes/suspects?clean=%s" % spec(clean))[0], 400, "no lossy pair: 400")
    sus = json.loads(body)["suspects"] if status == 200 else []
    eq([(s["from"], s["to"], s["lossy_flows"], s["clean_flows"]) for s in sus],
       [("rt-spine-2/3", "rt-leaf-3/4", len(lossy), 0)], "the one cable on every lossy route and no clean one, both ends")
    eq(sum(v for (n_, l), v in e.metrics().items() if n_ == "rdma_exporter_collector_errors_total"), 0, "no collector errors")
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")


def main():
    exe = take_exporter_arg()
    case = sys.argv[1]
    try:
        sim = Sim(NET, host="rt-host-11")
    except SetupError as s:
        print("FAIL - test bed:", s)
        return 1
    return run_sim_case(sim, case, {"routes": case_routes}, FAILS, exe)


if __name__ == "__main__":
    sys.exit(main())
