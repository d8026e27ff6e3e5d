#!/usr/bin/env python3
"""InfiniBand routes from the switches' forwarding tables against ibsim and opensm.

routes: the route the exporter computes (/pma/routes, from the LinearForwardingTable of every
switch that fabric mode reads after each discovery) equals ibtracert's, hop by hop (node GUID, in
and out port), for every ordered pair of CA ports of a fat tree with parallel paths; again after a
spine-leaf cable is unlinked and opensm sweeps (opensm re-routes around it: the routes change, and
the exporter's follow). Then the intersection (/pma/routes/suspects, rdma::model::suspect_links fed
with these real routes and a loss verdict per pair given in the request, as a prober's would be):
pairs chosen so that exactly one cable is on all the lossy routes and on no clean one are named
with that cable, both ends. Adaptive routing: ibsim drops the vendor SMP AdaptiveRoutingInfo, so
every switch reads as `unsupported` after one SMP (cached over later table reads: no more SMPs, no
error, one log line), no route or suspect is labelled adaptive, and the routes still equal
ibtracert's.

routes_access (hardening): who may ask. Without a web config every caller is anonymous: both paths
answer 403 before reading the query; with basic auth (--web.config.file) an authenticated caller
gets 200, and a burst of parallel requests beyond the rate bound gets 429 with Retry-After, each
answer counted by result.

usage: test_fabric_routes.py --exporter PATH routes|routes_access
Exit 0 = pass, else fail (also when the simulator cannot be installed or started).
"""
import base64
import concurrent.futures
import crypt
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from exporter_harness import take_exporter_arg  # noqa: E402
from ibsim_harness import Exporter, Sim, SetupError, get, parse_metrics, run_sim_case, wait_for  # noqa: E402
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
    # This case compares 60 routes with ibtracert's, one request each: anonymous callers allowed and
    # the rate lifted (the bounds themselves are routes_access's).
    e = Exporter(sim, exe, "--collector.pma.fabric", "--collector.pma.fabric-snapshot=false",
                 "--collector.pma.fabric-period=300ms", "--collector.pma.fabric-discovery-period=1s",
                 "--collector.pma.fabric-routes-allow-unauthenticated", "--collector.pma.fabric-routes-rate=10000")
    wait_for(lambda: lft_reads(e) >= 1, 60, what="a first forwarding table read")
    m = e.metrics()
    eq(get(m, "rdma_pma_fabric_lft_switches"), 5, "the tables of all 5 switches")
    # 5 switches, LinearFDBTop under 64 here: one block (one SMP) each
    smps = get(m, "rdma_pma_fabric_lft_smps_total") / lft_reads(e)
    print("LFT SMPs per read: %.1f, read took %.3f s" % (smps, get(m, "rdma_pma_fabric_lft_read_duration_seconds")))
    eq(get(m, "rdma_pma_fabric_lft_failures_total"), 0, "no failed table read")
    # Adaptive routing: ibsim drops vendor SMPs, so AdaptiveRoutingInfo (0xFF20) gets no answer from
    # any switch: each reads as unsupported after one SMP, and the routes are taken as static.
    switches = ["rt-spine-1", "rt-spine-2", "rt-leaf-1", "rt-leaf-2", "rt-leaf-3"]
    for sw in switches:
        eq([get(m, "rdma_pma_fabric_switch_adaptive_routing", node_name=sw, state=st) for st in ("enabled", "disabled", "unsupported")],
           [0, 0, 1], "%s: adaptive routing unsupported (vendor SMP dropped)" % sw)
    eq(get(m, "rdma_pma_fabric_adaptive_routing_smps_total"), len(switches), "one AdaptiveRoutingInfo SMP per switch")
    # No prober in this process: no probe link to route, and no per-link series.
    eq(get(m, "rdma_pma_route_probe_links"), 0, "no probe links published")
    check(not any(n_ == "rdma_pma_route_hops" for (n_, _l) in m), "no rdma_pma_route_hops without probe links")
    before = compare_all(sim, e, lids, g, "after the first sweep")
    spines = {r[2][0] for r in before.values() if len(r) == 5}
    eq(len(spines), 2, "inter-leaf routes use both spines")
    status, body = http_get(e.port, "/pma/routes?src=%s" % g[HOSTS[0]])
    eq(status, 200, "/pma/routes from one host to every LID")
    rs = json.loads(body)["routes"]
    eq([r["dst_lid"] for r in rs if r["adaptive_routing"] or any(h.get("adaptive") for h in r["hops"])], [],
       "no route is labelled adaptive where no switch routes adaptively")
    eq(sorted({h["ar_state"] for r in rs for h in r["hops"] if "ar_state" in h}), ["unsupported"],
       "every switch hop says its AR state: unsupported")
    # bad requests are answered, not crashed on
    eq(http_get(e.port, "/pma/routes")[0], 400, "no src: 400")
    eq(http_get(e.port, "/pma/routes?src=zz")[0], 400, "bad src: 400")
    eq(http_get(e.port, "/pma/routes?src=%s&dst=70000" % g[HOSTS[0]])[0], 400, "dst beyond unicast: 400")
    check("unknown_lid" in http_get(e.port, "/pma/routes?src=%s&dst=999" % g[HOSTS[0]])[1], "unknown LID: an error value")
    eq(get(e.metrics(), "rdma_pma_fabric_lft_failures_total"), 0, "no failed table read before the Unlink")
    # Unlink rt-spine-1 <-> rt-leaf-3 and sweep: every route to or from leaf 3 goes through spine 2.
    sim.cmd('Unlink "rt-spine-1"[3]')
    r = sim.run(["opensm", "--once", "-f", os.path.join(sim.dir, "osm2.log")], timeout=60)
    eq(r.returncode, 0, "SM sweep after Unlink")
    n = lft_reads(e)
    wait_for(lambda: lft_reads(e) >= n + 2, 60, what="two table reads after the sweep")
    # A read that ran between the Unlink and the sweep's new tables may have failed (its SMPs routed
    # over the cable just removed): the fabric really was broken then. Once the SM has swept, none may.
    failed_before_sweep = get(e.metrics(), "rdma_pma_fabric_lft_failures_total")
    print("table reads failed between the Unlink and the sweep: %d" % failed_before_sweep)
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
    eq([s["adaptive_routing"] for s in sus], [False], "the suspect is strict: no switch on the routes routes adaptively")
    # The unsupported state is cached: no more AdaptiveRoutingInfo SMPs over the later table reads,
    # no error, one log line.
    m = e.metrics()
    check(get(m, "rdma_pma_fabric_lft_reads_total") >= 3, "several table reads (%d)" % get(m, "rdma_pma_fabric_lft_reads_total"))
    eq(get(m, "rdma_pma_fabric_adaptive_routing_smps_total"), len(switches),
       "still one AdaptiveRoutingInfo SMP per switch after %d table reads" % get(m, "rdma_pma_fabric_lft_reads_total"))
    eq(get(m, "rdma_pma_fabric_adaptive_routing_misses_total"), 0, "no AdaptiveRoutingInfo miss counted")
    eq(get(m, "rdma_pma_fabric_lft_failures_total"), failed_before_sweep, "no failed table read once the SM has swept")
    eq(e.log().count("answer no AdaptiveRoutingInfo"), 1, "one log line for the switches without AdaptiveRoutingInfo")
    eq(sum(v for (n_, l), v in m.items() if n_ == "rdma_exporter_collector_errors_total"), 0, "no collector errors")
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")


def get_with_headers(port, path, headers):
    """(status, body, response headers) of GET path, 4xx/5xx included."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode(), r.headers
    except urllib.error.HTTPError as x:
        return x.code, x.read().decode(), x.headers


def route_results(e, headers):
    """rdma_pma_fabric_route_requests_total by result."""
    m = parse_metrics(e.get(headers=headers)[2])
    return {dict(l)["result"]: v for (n_, l), v in m.items() if n_ == "rdma_pma_fabric_route_requests_total"}


def case_routes_access(sim, exe):
    lids = sim.lids()
    g = guids(sim)
    src, dst = g[HOSTS[0]], lids[HOSTS[-1]][1]
    routes = "/pma/routes?src=%s&dst=%d" % (src, dst)
    suspects = "/pma/routes/suspects?lossy=%s/1-%d" % (src, dst)
    common = ("--collector.pma.fabric", "--collector.pma.fabric-snapshot=false", "--collector.pma.fabric-period=300ms",
              "--collector.pma.fabric-discovery-period=1s")
    # No web config: nobody is authenticated, so nobody maps the fabric (not even with a bad query).
    e = Exporter(sim, exe, *common)
    wait_for(lambda: lft_reads(e) >= 1, 60, what="a first forwarding table read")
    for path in (routes, suspects, "/pma/routes?src=zz"):
        status, body, _ = get_with_headers(e.port, path, {})
        eq(status, 403, "anonymous %s: 403" % path)
        check("refused: needs basic auth or a verified client certificate" in body, "the 403 says why (%r)" % body[:120])
    eq(route_results(e, {}).get("unauthenticated"), 3, "the refusals are counted")
    # /pma and /pma/targets: the same rule (the inventory, and a MAD per read), before any query or MAD.
    for path in ("/pma/targets", "/pma?target=%s" % src, "/pma?target=zz"):
        status, body, _ = get_with_headers(e.port, path, {})
        eq(status, 403, "anonymous %s: 403" % path)
        check("collectors.pma.fabric_targets_allow_unauthenticated: true" in body, "the 403 names the setting (%r)" % body[:160])
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")

    # Basic auth: an authenticated caller is answered; the burst bound (2 a second) holds.
    hashed = crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16))
    web = os.path.join(sim.dir, "web.yml")
    with open(web, "w") as f:
        f.write("basic_auth_users:\n  prometheus: '%s'\n" % hashed)
    auth = {"Authorization": "Basic " + base64.b64encode(b"prometheus:s3cret").decode()}
    e = Exporter(sim, exe, *common, "--web.config.file=" + web, "--collector.pma.fabric-routes-rate=2")
    wait_for(lambda: get(parse_metrics(e.get(headers=auth)[2]), "rdma_pma_fabric_lft_reads_total") >= 1, 60,
             what="a first forwarding table read")
    eq(get_with_headers(e.port, routes, {})[0], 401, "no credentials: 401 from the server, before the path")
    eq(get_with_headers(e.port, "/pma/targets", auth)[0], 200, "/pma/targets answers an authenticated caller")
    eq(get_with_headers(e.port, "/pma?target=%s" % src, auth)[0], 200, "/pma?target= answers an authenticated caller")
    time.sleep(1.1)  # a full bucket: the bound below starts from a burst of 2
    burst = 12
    with concurrent.futures.ThreadPoolExecutor(burst) as pool:
        answers = list(pool.map(lambda i: get_with_headers(e.port, routes if i % 2 else suspects, auth), range(burst)))
    codes = sorted(a[0] for a in answers)
    print("burst of %d: %s" % (burst, codes))  # which 429s were busy and which rate_limited: route_results below
    check(set(codes) <= {200, 429}, "every answer in the burst is 200 or 429 (%s)" % codes)
    ok = codes.count(200)
    check(1 <= ok <= 3, "the rate bound (2 a second, a burst of 2) admits 1 to 3 of %d: %d" % (burst, ok))
    check(all(a[2].get("Retry-After") == "1" for a in answers if a[0] == 429), "every 429 says Retry-After: 1")
    for status, body, _ in answers:
        if status == 200:
            check(set(json.loads(body)) & {"routes", "suspects"}, "a 200 is the JSON answer")
    res = route_results(e, auth)
    print("route requests by result: %s" % res)
    eq(res.get("ok", 0), ok, "each 200 counted as ok")
    eq(res.get("busy", 0) + res.get("rate_limited", 0), burst - ok, "each 429 counted as busy or rate_limited")
    time.sleep(1.1)
    status, body, _ = get_with_headers(e.port, routes, auth)
    eq(status, 200, "after a second an authenticated request is answered again")
    check(json.loads(body)["truncated"] is False, "the answer is whole")
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")


def main():
    exe = take_exporter_arg()
    case = sys.argv[1]
    try:
        sim = Sim(NET, host="rt-host-11")
    except SetupError as s:
        print("FAIL - test bed:", s)
        return 1
    return run_sim_case(sim, case, {"routes": case_routes, "routes_access": case_routes_access}, FAILS, exe)


if __name__ == "__main__":
    sys.exit(main())
