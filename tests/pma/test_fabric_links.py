#!/usr/bin/env python3
"""Fabric link table against ibsim: every link once with both ends, degraded exactly where
a link trained below what its two ends could do (iblinkinfo on the same fabric is the reference for
width, speed and far end), and a cable pulled after a discovery keeps its last-known far end until
it is back.

A persistent opensm (and a second one of higher priority) for the subnet manager series: one master
with its priority and an advancing ActCount, a handover counted as a master change, and after both
stop no master; the RdmaFabricNoMasterSm rule fires in a promtool test fed from that scrape.

PortExtendedSpeedsCounters in the per-target mode (target_fec): a port with extended speeds is asked
0x1F on its node's /pma?target= read; ibsim drops it, which is state (no series, one log line, no
error) and is not asked again, nor retried, on the next reads of the node.

sm_arrangements: SM health against `sminfo` (the reference) with the SM on the exporter's own node,
on another node, after `opensm --once` left its mark (no SM: no master, the silent LID counted),
and after each SM stops (see case_sm_arrangements for why the snapshot there reads no
PortExtendedSpeedsCounters).

usage: test_fabric_links.py --exporter PATH links|sm|sm_arrangements|target_fec
Exit 0 = pass, else fail (also when the simulator cannot be installed or started).
"""
import os
import re
import subprocess
import sys
import tempfile
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from exporter_harness import take_exporter_arg  # noqa: E402
from exporter_harness import stop_process  # noqa: E402
from ibsim_harness import Exporter, Sim, SetupError, get, parse_metrics, run_sim_case, wait_for  # noqa: E402
from test_pma import FAILS, check, eq, http_get  # noqa: E402  (one pass/fail reporter for the pma tests)


# A two-level fat tree with names as a GPU cluster has them, written in ibnetdiscover format (what
# `ibnetdiscover > net` on a real fabric gives, so a real cluster's topology replays the same way).
# ibsim reads each port line's `<width>x<speed>` token as that port's *enabled* width and speed (4x
# enables 1x|4x, 1x only 1x; HDR enables FDR|EDR|HDR, EDR FDR|EDR) and trains the link at the best
# both ends enable; every port supports 1x..12x and the fabric's fastest speed. So a link whose two
# ends carry different tokens trains at the lower one: what a port held back by its own configuration
# (or by firmware after a lane fault) looks like.
#
# No NDR: ibsim 0.10 (Debian 12) knows no NDR token ("parse_port_link_width_and_speed: cannot parse
# speed / invalid speed", and the port falls back to SDR) and rejects an extended-speed mask above 7
# ("bad extended speed 15 = should be between 0 to 7"): HDR is the fastest speed it can train. NDR and
# XDR decoding and the degraded rule on them are covered by the unit tests (tests/sources/mad/smp_decode_test.cpp).
#
# Every link is 4xHDR except
#  - sw-leaf-02 port 2 <-> gpu-b02: the HCA end is 1xHDR: trains at 1x where both ends support and
#    the leaf enables 4x: degraded on width;
#  - sw-leaf-01 port 1 <-> gpu-a01: the leaf end is 4xEDR (FDR|EDR enabled): trains at EDR where
#    both support and the HCA enables HDR: degraded on speed.
# The odd tokens sit on the switch ends because ibsim 0.10 trains a link when it parses the first of
# its two records (the switch's); the token on the far record only sets that port's enabled value.
# GUIDs are realistic (Mellanox OUI b8:59:9f) and 0x100 apart: ibsim makes a CA's port GUIDs node
# GUID + port, so GUIDs 1 apart would collide.
SWITCHES = {"sw-spine-01": 0xb8599f0300a01000, "sw-spine-02": 0xb8599f0300a02000,
            "sw-leaf-01": 0xb8599f0300a10000, "sw-leaf-02": 0xb8599f0300a20000}
HCAS = {"gpu-a01 mlx5_0": 0xb8599f0300c01000, "gpu-a02 mlx5_0": 0xb8599f0300c02000,
        "gpu-b01 mlx5_0": 0xb8599f0300c03000, "gpu-b02 mlx5_0": 0xb8599f0300c04000}
# (node, port, token at this end, node, port, token at that end)
CABLES = [("sw-spine-01", 1, "4xHDR", "sw-leaf-01", 3, "4xHDR"),
          ("sw-spine-01", 2, "4xHDR", "sw-leaf-02", 3, "4xHDR"),
          ("sw-spine-02", 1, "4xHDR", "sw-leaf-01", 4, "4xHDR"),
          ("sw-spine-02", 2, "4xHDR", "sw-leaf-02", 4, "4xHDR"),
          ("sw-leaf-01", 1, "4xEDR", "gpu-a01 mlx5_0", 1, "4xHDR"),
          ("sw-leaf-01", 2, "4xHDR", "gpu-a02 mlx5_0", 1, "4xHDR"),
          ("sw-leaf-02", 1, "4xHDR", "gpu-b01 mlx5_0", 1, "4xHDR"),
          ("sw-leaf-02", 2, "1xHDR", "gpu-b02 mlx5_0", 1, "4xHDR")]


def ibnetdiscover_net(switches, hcas, cables, switch_ports=4):
    """The net file as ibnetdiscover prints a fabric: a record per node, each cable from both ends."""
    guid = dict(switches, **hcas)
    ends = {}
    for a, ap, at, b, bp, bt in cables:
        ends.setdefault(a, []).append((ap, b, bp, at))
        ends.setdefault(b, []).append((bp, a, ap, bt))

    def nodeid(n):
        return ("S-%016x" if n in switches else "H-%016x") % guid[n]

    def far(n, p):  # a switch port's GUID is the node's; a CA port's is node GUID + port
        return '"%s"[%d]' % (nodeid(n), p) + ("" if n in switches else "(%x)" % (guid[n] + p))

    out = ["#", "# Topology file: ibnetdiscover format, as `ibnetdiscover` prints it", "#", ""]
    for n in switches:
        out += ["vendid=0x2c9", "devid=0xd2f2", "sysimgguid=0x%x" % guid[n], "switchguid=0x%x(%x)" % (guid[n], guid[n]),
                'Switch\t%d "%s"\t\t# "%s" enhanced port 0 lid 0 lmc 0' % (switch_ports, nodeid(n), n)]
        out += ['[%d]\t%s\t\t# "%s" lid 0 %s' % (p, far(b, bp), b, tok) for p, b, bp, tok in sorted(ends[n])]
        out.append("")
    for n in hcas:
        out += ["vendid=0x2c9", "devid=0x1021", "sysimgguid=0x%x" % guid[n], "caguid=0x%x" % guid[n],
                'Ca\t%d "%s"\t\t# "%s"' % (len(ends[n]), nodeid(n), n)]
        out += ['[%d](%x) \t%s\t\t# lid 0 lmc 0 "%s" lid 0 %s' % (p, guid[n] + p, far(b, bp), b, tok)
                for p, b, bp, tok in sorted(ends[n])]
        out.append("")
    return "\n".join(out)


NET = ibnetdiscover_net(SWITCHES, HCAS, CABLES)


def sim_node(name):
    """The ibsim nodeid of a node (in an ibnetdiscover-format net: S-/H- and its GUID, as ibnetdiscover
    names nodes), for console commands such as Unlink."""
    return ("S-%016x" % SWITCHES[name]) if name in SWITCHES else ("H-%016x" % HCAS[name])


def console(sim, command):
    """A console command that must not be refused (ibsim answers errors as '# ...' lines)."""
    out = sim.cmd(command)
    if any(l.startswith("#") for l in out):
        raise RuntimeError("ibsim refused %r: %s" % (command, out))
    return out

RATE = {"2.5": "SDR", "5.0": "DDR", "10.0": "QDR", "14.0625": "FDR", "25.78125": "EDR", "53.125": "HDR",
        "106.25": "NDR"}


def iblinkinfo(sim):
    """{(switch guid, port): (width, speed, far name, far port)} of every active switch port."""
    out = sim.run(["iblinkinfo"]).stdout
    res, guid = {}, None
    for line in out.splitlines():
        m = re.match(r"^Switch: (0x[0-9a-f]+) ", line)
        if m:
            guid = m.group(1)
            continue
        if line.startswith("CA:"):
            guid = None
            continue
        m = re.match(r'^\s+\d+\s+(\d+)\[\s*\]\s+==\(\s*(\d+)X\s+([\d.]+) Gbps\s+Active/\s+LinkUp\)==>\s+\d+\s+(\d+)\[\s*\]\s+"([^"]*)"',
                     line)
        if guid and m:
            res[(guid, int(m.group(1)))] = (m.group(2) + "x", RATE[m.group(3)], m.group(5), int(m.group(4)))
    return res


def links(m):
    """[(labels dict, value)] of rdma_pma_fabric_link_info."""
    return [dict(l) for n, l in m if n == "rdma_pma_fabric_link_info"]


def find_link(m, guid, port):
    for l in links(m):
        if (l["node_guid"], l["port"]) == (guid, str(port)) or (l["remote_guid"], l["remote_port"]) == (guid, str(port)):
            return l
    return None


def link_id(l):
    return {k: l[k] for k in ("node_guid", "port", "remote_guid", "remote_port")}


def degraded(m, l):
    hits = [(dict(lab), v) for (n, lab), v in m.items()
            if n == "rdma_pma_fabric_link_degraded" and all(dict(lab)[k] == x for k, x in link_id(l).items())]
    if len(hits) != 1:
        raise KeyError("degraded %s: %d" % (link_id(l), len(hits)))
    return hits[0]


def discoveries_settle(e, n=2, timeout=60):
    """Waits for n more refreshes (each runs a discovery with the 1 s discovery period used here)."""
    start = get(e.metrics(), "rdma_pma_fabric_refreshes_total")
    wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_refreshes_total") >= start + n, timeout,
             what="%d more fabric refreshes" % n)
    time.sleep(1.2)  # past one discovery period
    start = get(e.metrics(), "rdma_pma_fabric_refreshes_total")
    wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_refreshes_total") >= start + n, timeout,
             what="%d refreshes after a discovery" % n)


def case_links(sim, exe):
    # The net trains sw-leaf-01 port 1 at EDR (measured: smpquery before any SM shows 25.78125 Gbps),
    # but ibsim 0.10's PortInfo Set handler (sim_mad.c) retrains a link at the *set* port's enabled
    # speed alone, both ends, whatever the peer enables; opensm's sweep sets gpu-a01 (HDR enabled) and
    # so lifts the link to HDR. Setting the leaf port's own enabled value again (FDR|EDR, as the net
    # has it) through the same path puts the link back where the net file trained it.
    lids = sim.lids()
    r = sim.run(["ibportstate", str(lids["sw-leaf-01"]), "1", "espeed", "3"])
    eq(r.returncode, 0, "ibportstate espeed 3 on sw-leaf-01 port 1 (%s)" % r.stderr.strip()[-200:])
    ref = iblinkinfo(sim)
    eq(len(ref), 12, "iblinkinfo: 12 active switch ports (4 leaf-spine links seen from both ends, 4 leaf-host)")
    # snapshot mode: the refresh also asks PortExtendedSpeedsCounters, which ibsim refuses
    e = Exporter(sim, exe, "--collector.pma.fabric", "--collector.pma.fabric-period=300ms",
                 "--collector.pma.fabric-discovery-period=1s")
    wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_links", state="up") > 0, 60, what="first discovery")
    wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_refreshes_total") >= 3, 60, what="3 refreshes")
    text = e.text()
    m = parse_metrics(text)
    eq(get(m, "rdma_pma_fabric_links", state="up"), 8, "8 links (4 leaf-spine, 4 leaf-host), each once")
    eq(len(links(m)), 8, "8 link_info series")
    # every link against iblinkinfo: width, speed, far end
    for (guid, port), (width, speed, far_name, far_port) in sorted(ref.items()):
        l = find_link(m, guid, port)
        check(l is not None, "link of %s port %d present" % (guid, port))
        if l is None:
            continue
        here_a = (l["node_guid"], l["port"]) == (guid, str(port))
        eq((l["remote_name"] if here_a else l["node_name"], int(l["remote_port"] if here_a else l["port"])),
           (far_name, far_port), "%s port %d far end as iblinkinfo" % (guid, port))
        lab, _ = degraded(m, l)
        eq((lab["active_width"], lab["active_speed"]), (width, speed), "%s port %d width/speed as iblinkinfo" % (guid, port))
    bad = sorted((l["node_name"], l["port"], l["remote_name"], l["remote_port"]) for l in links(m) if degraded(m, l)[1] == 1)
    eq(bad, [("sw-leaf-01", "1", "gpu-a01 mlx5_0", "1"), ("sw-leaf-02", "2", "gpu-b02 mlx5_0", "1")],
       "exactly the two links below their ends' best are degraded, named by both ends")
    w = degraded(m, find_link(m, [l for l in links(m) if l["remote_name"] == "gpu-b02 mlx5_0"][0]["node_guid"], 2))[0]
    eq((w["active_width"], w["possible_width"], w["active_speed"], w["possible_speed"]), ("1x", "4x", "HDR", "HDR"),
       "width-degraded link: 1x where 4x is possible")
    s = degraded(m, [l for l in links(m) if l["remote_name"] == "gpu-a01 mlx5_0"][0])[0]
    eq((s["active_width"], s["possible_width"], s["active_speed"], s["possible_speed"]), ("4x", "4x", "EDR", "HDR"),
       "speed-degraded link: EDR where HDR is possible")
    eq(get(m, "rdma_pma_fabric_links_degraded"), 2, "links_degraded = 2")
    eq(get(m, "rdma_pma_fabric_link_changes_total", change="appeared"), 0, "the first discovery is the baseline")
    # PortExtendedSpeedsCounters: ibsim does not answer it: state (asked once per discovery), not an error
    check(not any(n.startswith("rdma_pma_fabric_port_fec_") for n, _ in m), "no FEC series where 0x1F is refused")
    check("answers PortExtendedSpeedsCounters with no reply" in e.log(), "the refusal is logged")
    eq(sum(v for (n, l), v in m.items() if n == "rdma_exporter_collector_errors_total"), 0, "no collector errors")
    # pull the cable of gpu-b01 after a discovery: the leaf port keeps its far end and the time
    gone = [l for l in links(m) if l["remote_name"] == "gpu-b01 mlx5_0"][0]
    seen_before = get(m, "rdma_pma_fabric_link_last_seen_up_timestamp_seconds", **link_id(gone))
    console(sim, 'Unlink "%s"[1]' % sim_node("sw-leaf-02"))
    wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_link_up", **link_id(gone)) == 0, 60, what="link down")
    discoveries_settle(e)
    m = parse_metrics(e.text())
    eq(get(m, "rdma_pma_fabric_link_info", **gone), 1, "the down link keeps its last-known far end (name, port)")
    last = get(m, "rdma_pma_fabric_link_last_seen_up_timestamp_seconds", **link_id(gone))
    check(seen_before <= last < time.time(), "last seen up %r: at or after the first discovery, before now" % last)
    eq(get(m, "rdma_pma_fabric_links", state="down"), 1, "one link down")
    eq(get(m, "rdma_pma_fabric_links", state="up"), 7, "seven up")
    eq(get(m, "rdma_pma_fabric_link_changes_total", change="disappeared"), 1, "disappeared once, over several discoveries")
    check(not any(n == "rdma_pma_fabric_link_degraded" and all(dict(l).get(k) == v for k, v in link_id(gone).items())
                  for n, l in m), "no degraded series for a link that is down")
    # ReLink and an SM sweep: back, each change counted once
    console(sim, 'ReLink "%s"[1]' % sim_node("sw-leaf-02"))
    r = sim.run(["opensm", "--once", "-f", os.path.join(sim.dir, "osm2.log")], timeout=60)
    eq(r.returncode, 0, "SM sweep after ReLink")
    wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_link_up", **link_id(gone)) == 1, 60, what="link back")
    discoveries_settle(e)
    m = parse_metrics(e.text())
    eq(get(m, "rdma_pma_fabric_links", state="up"), 8, "eight up again")
    eq(get(m, "rdma_pma_fabric_links", state="down"), 0, "none down")
    eq(get(m, "rdma_pma_fabric_link_changes_total", change="appeared"), 1, "appeared once")
    eq(get(m, "rdma_pma_fabric_link_changes_total", change="disappeared"), 1, "disappeared still once")
    eq(len(links(m)), 8, "8 link_info series: the returned link is the same series")
    eq(get(m, "rdma_pma_fabric_link_info", **gone), 1, "back with the same ends (name, port)")
    check(get(m, "rdma_pma_fabric_link_last_seen_up_timestamp_seconds", **link_id(gone)) >= last,
          "last seen up moves on once the link is up again")
    size = sum(len(line) + 1 for line in e.text().splitlines() if line.startswith("rdma_pma_fabric_link_"))
    print("exposition bytes per link (info, up, last seen, degraded): %d" % (size // 8))
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")


REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def start_sm(sim, node, priority):
    """A persistent opensm on `node` (ibsim allows one SM per node), sweeping every second."""
    env = dict(sim.shim_env, SIM_HOST=node)
    log = os.path.join(sim.dir, "osm-%d.log" % priority)
    return sim.track(subprocess.Popen(["opensm", "-f", log, "-p", str(priority), "-s", "1"], cwd=sim.dir, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))


def sm_of(m, node_name):
    hits = [dict(l)["sm_guid"] for n, l in m if n == "rdma_pma_fabric_sm_info" and dict(l)["node_name"] == node_name]
    if len(hits) != 1:
        raise KeyError("sm_info %s: %d" % (node_name, len(hits)))
    return hits[0]


def promtool_fires(scraped_masters):
    """The generated promtool case of RdmaFabricNoMasterSm, its input replaced by the scraped value."""
    with open(os.path.join(REPO, "tests", "deploy", "rules.test.yml")) as f:
        generated = yaml.safe_load(f)
    # Alert cases only: the file also holds the recording rules' promql_expr_test cases.
    alert_cases = [t for t in generated["tests"] if "alert_rule_test" in t]
    case = [t for t in alert_cases if t["alert_rule_test"][0]["alertname"] == "RdmaFabricNoMasterSm"
            and t["alert_rule_test"][0]["exp_alerts"]][0]
    case["input_series"] = [{"series": 'rdma_pma_fabric_sm_masters{job="rdma-exporter", instance="node1"}',
                             "values": "1 %dx20" % scraped_masters}]
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        yaml.safe_dump({"rule_files": [os.path.abspath(os.path.join(REPO, "deploy", "prometheus",
                                                                    "rdma-exporter.rules.yml"))],
                        "evaluation_interval": "1m", "tests": [case]}, f)
    r = subprocess.run(["promtool", "test", "rules", f.name], capture_output=True, text=True, timeout=60)
    os.unlink(f.name)
    return r


# Generous bounded deadlines for everything the SMs do: on a loaded CI machine opensm's first sweep,
# its 1 s resweeps and a handover can each take many seconds (this case once failed under load on a
# 30 s wait). Every wait polls the exporter's own series (one scrape per step, no extra simulator
# client); none asserts how long anything took.
SM_DEADLINE = 180


def sm_states(m):
    """{sm node name: (sm guid, state)} of the SMs the exporter lists."""
    guids = {dict(l)["sm_guid"]: dict(l)["node_name"] for n, l in m if n == "rdma_pma_fabric_sm_info"}
    return {guids[dict(l)["sm_guid"]]: (dict(l)["sm_guid"], dict(l)["state"]) for (n, l), v in m.items()
            if n == "rdma_pma_fabric_sm_state" and v == 1 and dict(l)["sm_guid"] in guids}


def scrape_when(e, pred, what):
    """The first scrape for which pred(metrics) holds (polled every 0.3 s, up to SM_DEADLINE)."""
    def poll():
        m = e.metrics()
        return m if pred(m) else None
    return wait_for(poll, SM_DEADLINE, step=0.3, what=what)


def case_sm(sim, exe):
    sm1 = start_sm(sim, "gpu-b01 mlx5_0", 1)
    wait_for(lambda: "SMINFO_MASTER" in sim.run(["sminfo"]).stdout, SM_DEADLINE, step=0.5, what="opensm master")
    e = Exporter(sim, exe, "--collector.pma.fabric", "--collector.pma.fabric-period=300ms",
                 "--collector.pma.fabric-discovery-period=1s", "--collector.pma.fabric-snapshot=false")
    m = scrape_when(e, lambda m: get(m, "rdma_pma_fabric_sm_masters") == 1 and
                    sm_states(m).get("gpu-b01 mlx5_0", ("", ""))[1] == "master", "one master, on gpu-b01")
    g1 = sm_of(m, "gpu-b01 mlx5_0")
    eq(get(m, "rdma_pma_fabric_sm_state", sm_guid=g1, state="master"), 1, "opensm on gpu-b01 is master")
    eq(get(m, "rdma_pma_fabric_sm_priority", sm_guid=g1), 1, "its priority")
    ref = re.search(r"sm lid (\d+) sm guid (0x[0-9a-f]+)", sim.run(["sminfo"]).stdout)
    eq(int(ref.group(2), 16), int(g1, 16), "SM GUID as sminfo reports it")
    eq(get(m, "rdma_pma_fabric_sm_info", sm_guid=g1, node_name="gpu-b01 mlx5_0"), 1, "sm_info names its node")
    check(dict([l for n, l in m if n == "rdma_pma_fabric_sm_info"][0])["lid"] == ref.group(1), "sm_info lid = sminfo's")
    a1 = get(m, "rdma_pma_fabric_sm_act_count", sm_guid=g1)
    m2 = scrape_when(e, lambda m: get(m, "rdma_pma_fabric_sm_act_count", sm_guid=g1) > a1, "ActCount advancing")
    check(get(m2, "rdma_pma_fabric_sm_act_count", sm_guid=g1) > a1, "ActCount advances: %d -> %d"
          % (a1, get(m2, "rdma_pma_fabric_sm_act_count", sm_guid=g1)))
    eq(get(m2, "rdma_pma_fabric_sm_stuck", sm_guid=g1), 0, "not stuck while ActCount advances")
    eq(get(m2, "rdma_pma_fabric_sm_master_changes_total"), 0, "no master change yet")
    # a second SM of higher priority takes over: one master change, the first one standby
    sm2 = start_sm(sim, "gpu-a01 mlx5_0", 10)
    m = scrape_when(e, lambda m: get(m, "rdma_pma_fabric_sm_master_changes_total") >= 1 and
                    get(m, "rdma_pma_fabric_sm_masters") == 1 and
                    [state for _, (_, state) in sorted(sm_states(m).items())] == ["master", "standby"],
                    "the handover: gpu-a01 master, gpu-b01 standby")
    g2 = sm_of(m, "gpu-a01 mlx5_0")
    eq(get(m, "rdma_pma_fabric_sm_master_changes_total"), 1, "the handover counted once")
    eq(get(m, "rdma_pma_fabric_sm_state", sm_guid=g2, state="master"), 1, "the priority-10 SM is master")
    eq(get(m, "rdma_pma_fabric_sm_priority", sm_guid=g2), 10, "its priority")
    eq(get(m, "rdma_pma_fabric_sm_state", sm_guid=g1, state="standby"), 1, "the first SM is standby")
    # both stop: no master within a few refreshes
    t0 = time.monotonic()
    stop_process(sm2)
    stop_process(sm1)
    m = scrape_when(e, lambda m: get(m, "rdma_pma_fabric_sm_masters") == 0, "no master")
    print("no master %.1f s after both SMs stopped (fabric-period 300ms)" % (time.monotonic() - t0))
    eq(get(m, "rdma_pma_fabric_sm_master_changes_total"), 1, "stopping is not a master change")
    check(get(m, "rdma_pma_fabric_sm_query_failures_total") > 0, "the stopped SMs' SMInfo failures are counted")
    r = promtool_fires(get(m, "rdma_pma_fabric_sm_masters"))
    eq(r.returncode, 0, "RdmaFabricNoMasterSm fires on the scraped value (promtool: %s)" % (r.stdout + r.stderr).strip()[-300:])
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")


def sminfo(sim):
    """What `sminfo` on the exporter's node says (SubnGet(SMInfo), LID-routed to the SM LID its port
    reports, as fabric_sm.cpp asks): {"lid", "guid", "priority", "state"} or None when no SM answers."""
    r = sim.run(["sminfo"])
    m = re.search(r"sm lid (\d+) sm guid (0x[0-9a-f]+), activity count \d+ priority (\d+) state (\d+)", r.stdout)
    if r.returncode != 0 or not m:
        return None
    return {"lid": int(m.group(1)), "guid": int(m.group(2), 16), "priority": int(m.group(3)), "state": int(m.group(4))}


def exporter_master(m):
    """The exporter's one master SM as {"lid", "guid", "node_name"}, or None (no master, or several)."""
    info = {dict(l)["sm_guid"]: dict(l) for n, l in m if n == "rdma_pma_fabric_sm_info"}
    masters = [g for (n, l), v in m.items() if n == "rdma_pma_fabric_sm_state" and v == 1 and dict(l)["state"] == "master"
               for g in [dict(l)["sm_guid"]]]
    if len(masters) != 1 or masters[0] not in info:
        return None
    i = info[masters[0]]
    return {"lid": int(i["lid"]), "guid": int(masters[0], 16), "node_name": i["node_name"]}


def agree_on_master(sim, e, node, what):
    """Waits until sminfo and the exporter both name the SM on `node` as the one master, and checks
    that they name the same SM (GUID and LID) and that the exporter counts one master."""
    m = scrape_when(e, lambda m: get(m, "rdma_pma_fabric_sm_masters") == 1 and
                    (exporter_master(m) or {}).get("node_name") == node, "%s: one master on %s" % (what, node))
    mine = exporter_master(m)
    ref = wait_for(lambda: (lambda r: r if r and r["guid"] == mine["guid"] else None)(sminfo(sim)), SM_DEADLINE,
                   step=0.3, what="%s: sminfo naming the exporter's master" % what)
    eq((mine["guid"], mine["lid"]), (ref["guid"], ref["lid"]), "%s: the exporter's master is sminfo's (GUID, LID)" % what)
    eq(ref["state"], 3, "%s: sminfo says SMINFO_MASTER" % what)
    return m


def no_master(sim, e, what):
    """Waits until the exporter counts no master; sminfo must then get no answer either, and every
    SMInfo of a further refresh is counted as failed (one attempt per polled port)."""
    m = scrape_when(e, lambda m: get(m, "rdma_pma_fabric_sm_masters") == 0, "%s: no master" % what)
    eq(sminfo(sim), None, "%s: sminfo gets no answer either" % what)
    check(not any(n == "rdma_pma_fabric_sm_info" for n, _ in m), "%s: no rdma_pma_fabric_sm_info" % what)
    mads, fails, refreshes = (get(m, x) for x in ("rdma_pma_fabric_sm_mads_total", "rdma_pma_fabric_sm_query_failures_total",
                                                  "rdma_pma_fabric_refreshes_total"))
    m2 = scrape_when(e, lambda m: get(m, "rdma_pma_fabric_refreshes_total") >= refreshes + 3, "%s: 3 more refreshes" % what)
    d_mads = get(m2, "rdma_pma_fabric_sm_mads_total") - mads
    eq(get(m2, "rdma_pma_fabric_sm_query_failures_total") - fails, d_mads, "%s: every SMInfo since failed" % what)
    d_refreshes = get(m2, "rdma_pma_fabric_refreshes_total") - refreshes
    check(d_refreshes <= d_mads <= 2 * d_refreshes,
          "%s: one SMInfo per polled port and refresh, one attempt each (%d SMPs in %d refreshes)" % (what, d_mads, d_refreshes))
    eq(get(m2, "rdma_pma_fabric_sm_masters"), 0, "%s: still no master" % what)
    return m2


def case_sm_arrangements(sim, exe):
    """SM health against sminfo with the SM on the exporter's own node, on another node, after an
    `opensm --once` left its mark (the Sim's own sweep: no SM runs, the ports still name its LID as
    master), and after each SM stops.

    Snapshot mode on, PortExtendedSpeedsCounters off: ibsim hands a MAD it does not simulate (PMA
    0x1F) that arrives at a port to the SM client attached to that node ("zero qp - only issm
    clients may get requests", ibsim.c find_client), and opensm, which registered no PerfMgt agent,
    dies in the umad2sim shim (SIGSEGV): then neither sminfo nor the exporter finds a master. That
    is what made SM health look wrong with an SM on the exporter's node (any node the snapshot reads
    does the same; `perfquery --extended_speeds <SM LID> 1` alone kills it too). On hardware the
    HCA's PMA answers PMA MADs and the SM never sees them."""
    e = Exporter(sim, exe, "--collector.pma.fabric", "--collector.pma.fabric-period=300ms",
                 "--collector.pma.fabric-discovery-period=1s", "--collector.pma.fabric-ext-speeds=false")
    own = "gpu-a02 mlx5_0"  # the Sim's node: the exporter's, where `opensm --once` ran
    # 1. The mark of `opensm --once`: no SM runs; ports still report its LID as MasterSMLID.
    eq(sminfo(sim), None, "after opensm --once: sminfo gets no answer")
    m = no_master(sim, e, "after opensm --once")
    check(get(m, "rdma_pma_fabric_sm_query_failures_total") > 0, "the gone SM's LID is polled and its silence counted")
    r = promtool_fires(get(m, "rdma_pma_fabric_sm_masters"))
    eq(r.returncode, 0, "RdmaFabricNoMasterSm fires on it (promtool: %s)" % (r.stdout + r.stderr).strip()[-300:])
    # 2. A persistent SM on the exporter's own node.
    sm = start_sm(sim, own, 1)
    agree_on_master(sim, e, own, "SM on the exporter's node")
    f0 = get(e.metrics(), "rdma_pma_fabric_sm_query_failures_total")
    r0 = get(e.metrics(), "rdma_pma_fabric_refreshes_total")
    m = scrape_when(e, lambda m: get(m, "rdma_pma_fabric_refreshes_total") >= r0 + 5, "5 refreshes with the SM up")
    eq(get(m, "rdma_pma_fabric_sm_masters"), 1, "SM on the exporter's node: still one master after 5 snapshot refreshes")
    eq(get(m, "rdma_pma_fabric_sm_query_failures_total"), f0, "SM on the exporter's node: no SMInfo failed meanwhile")
    eq(sm.poll(), None, "the SM on the exporter's node is alive")
    agree_on_master(sim, e, own, "SM on the exporter's node, later")
    # 3. It stops: no master, and sminfo agrees.
    stop_process(sm)
    no_master(sim, e, "SM on the exporter's node stopped")
    # 4. A persistent SM on another node; then it stops too.
    other = "gpu-b01 mlx5_0"
    sm = start_sm(sim, other, 2)
    agree_on_master(sim, e, other, "SM on another node")
    eq(sm.poll(), None, "the SM on the other node is alive")
    stop_process(sm)
    no_master(sim, e, "SM on another node stopped")
    eq(get(e.metrics(), "rdma_pma_fabric_sm_master_changes_total"), 1,
       "one master change (own node's SM to the other's); stopping is none")
    eq(sum(v for (n, l), v in e.metrics().items() if n == "rdma_exporter_collector_errors_total"), 0, "no collector errors")
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")


def target_mads(body):
    return get(parse_metrics(body), "rdma_pma_fabric_target_mads")


def case_target_fec(sim, exe):
    lids = sim.lids()
    r = sim.run(["ibportstate", str(lids["sw-leaf-01"]), "1", "espeed", "3"])
    eq(r.returncode, 0, "ibportstate espeed 3 on sw-leaf-01 port 1 (%s)" % r.stderr.strip()[-200:])
    e = Exporter(sim, exe, "--collector.pma.fabric", "--collector.pma.fabric-snapshot=false", "--collector.pma.fabric-targets-allow-unauthenticated",
                 "--collector.pma.fabric-target-cache=1ms", "--collector.pma.fabric-period=300ms")
    wait_for(lambda: get(e.metrics(), "rdma_pma_fabric_discoveries_total") >= 1, 60, what="first discovery")
    status, body = http_get(e.port, "/pma/targets")
    eq(status, 200, "/pma/targets answers")
    groups = {g["labels"]["__meta_rdma_node_name"]: g for g in yaml.safe_load(body)}
    guid = {name: g["targets"][0] for name, g in groups.items()}
    ports = int(groups["sw-leaf-01"]["labels"]["__meta_rdma_node_ports"])
    reads = []
    for i in range(3):
        status, body = http_get(e.port, "/pma?target=" + guid["sw-leaf-01"])
        eq(status, 200, "read %d of sw-leaf-01 answers 200" % i)
        m = parse_metrics(body)
        check(not any(n.startswith("rdma_pma_fabric_port_fec_") for n, _ in m), "read %d: no FEC series where 0x1F is dropped" % i)
        eq(get(m, "rdma_pma_fabric_target_ports_answered"), ports, "read %d: every port answered" % i)
        reads.append(target_mads(body))
    # ClassPortInfo and one 0x1F attempt per port (no retries; a switch's ports share port 0's
    # IsExtendedSpeedsSupported) on the first read only; then the counters alone
    eq(reads[0] - reads[1], 1 + ports, "first read: ClassPortInfo + one PortExtendedSpeedsCounters attempt per port "
       "more, not retried (%s)" % reads)
    eq(reads[1], reads[2], "later reads: the same MADs, 0x1F not asked again (%s)" % reads)
    eq(reads[1], 2 * ports, "later reads: PortCounters + PortCountersExtended per port (%d ports)" % ports)
    check("answers PortExtendedSpeedsCounters with no reply" in e.log(), "the refusal is logged")
    m = e.metrics()
    eq(sum(v for (n, l), v in m.items() if n == "rdma_exporter_collector_errors_total"), 0, "no collector errors")
    eq(get(m, "rdma_pma_fabric_target_requests_total", result="ok"), 3, "3 target requests ok")
    eq(e.stop(), 0, "exporter exits 0 on SIGTERM")


def main():
    exe = take_exporter_arg()
    case = sys.argv[1]
    try:
        sim = Sim(NET, host="gpu-a02 mlx5_0")
    except SetupError as s:
        print("FAIL - test bed:", s)
        return 1
    return run_sim_case(sim, case, {"links": case_links, "sm": case_sm, "sm_arrangements": case_sm_arrangements,
                                    "target_fec": case_target_fec}, FAILS, exe)


if __name__ == "__main__":
    sys.exit(main())
