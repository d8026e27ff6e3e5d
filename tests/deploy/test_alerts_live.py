#!/usr/bin/env python3
"""prometheus: which alerts a real Prometheus raises with the shipped rules
(deploy/prometheus/rdma-exporter.rules.yml) over the exporter run with each shipped deployment's
configuration, on the demo fabric and on the generated fixture trees. The test asserts the exact
set of firing and pending alerts per target, each one named below with the reason it must be
there; any other alert (a healthy host paging) fails the test.

Targets (one Prometheus, 1 s scrape and evaluation interval, Debian's /usr/bin/prometheus):
  - the moving demo fabric (scripts/demo-fabric.sh: sysfs_gen.py --profile demo plus its ticker)
    under each shipped config: the .deb's deploy/rdma_exporter.yml (also the systemd unit's), the
    Kustomize base and the rdma-devices overlay config.yml (--path.sysfs points at the tree);
  - the fixtures profile (every driver quirk, a deliberately broken device) and the bench profile
    (a healthy 16-HCA node), under the .deb config.
Mid-run the test takes one ACTIVE demo port down (as a cable pull does), so that the demo shows
an alert raised by what changed on the host, not only by what the tree holds from the start.
usage: test_alerts_live.py --exporter BINARY"""
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
from exporter_harness import SYSFS_GEN, Exporter, Prometheus, take_exporter_arg, write_tree  # noqa: E402
from workload_doubles import Doubles, KubeApiDouble  # noqa: E402

EXPORTER = take_exporter_arg()
RULES = os.path.join(REPO, "deploy", "prometheus", "rdma-exporter.rules.yml")
CONFIGS = {
    "deb": os.path.join(REPO, "deploy", "rdma_exporter.yml"),
    "kustomize-base": os.path.join(REPO, "deploy", "kubernetes", "base", "config.yml"),
    "kustomize-rdma-devices": os.path.join(REPO, "deploy", "kubernetes", "overlays", "rdma-devices", "config.yml"),
}
# The demo port the test takes down, and the one the demo has DOWN from the start.
PULLED = ("mlx5_2", "1")


def alert(name, state, **labels):
    return (name, state, frozenset(labels.items()))


# The demo fabric's alerts while the test runs, and why nothing else:
#  - RdmaPortDown for the port the test pulled: it was ACTIVE, it is not now (for: 5m: pending).
#  - Not RdmaPortDown for mlx5_3/1, DOWN in the demo from the start: never ACTIVE in the last day,
#    an unused port, which the rule leaves out on purpose.
#  - Not RdmaRoceCnpRateHigh / RdmaRoceEcnMarkRateHigh: the demo's congestion counters move
#    below their thresholds (at most 900 ECN marks/s, 600 CNPs/s: sysfs_gen.py MOVING), however
#    long the demo runs (unit.deploy.rules checks those two rules fire).
#  - Not RdmaRoceConfigInconsistent: the demo's RoCE netdevs are not in this network namespace,
#    so PFC is pfc_unknown (what the exporter cannot read is shown, not paged), and ECN has no
#    ecn/ tree (inbox drivers: ecn_not_exposed, state of the host).
#  - Not RdmaExporterCollectorErrors: a healthy host counts no recurring error (no umad device,
#    no ECN tree, EOPNOTSUPP are capabilities, not errors).
DEMO = {alert("RdmaPortDown", "pending", device=PULLED[0], port=PULLED[1])}

# The fixtures profile: its deliberate faults.
FIXTURES = {
    # broken0: a counter file that is a directory (EISDIR: other), a dangling symlink (not_found),
    # "12abc", "-1", a bogus rate and state (malformed), on every scrape (for: 30m: pending).
    alert("RdmaExporterCollectorErrors", "pending", collector="port", reason="malformed"),
    alert("RdmaExporterCollectorErrors", "pending", collector="port", reason="not_found"),
    alert("RdmaExporterCollectorErrors", "pending", collector="port", reason="other"),
    # ionic_0: a counter reads 2^64-1, the driver's undecodable value, on every scrape.
    alert("RdmaExporterCollectorErrors", "pending", collector="hw_counters", reason="invalid_value"),
    # Counters the fixtures pin at their PMA maximum, as on a real ConnectX-7 (for: 1h: pending).
    alert("RdmaPortPmaCounterSaturated", "pending", device="mlx5_0", port="1", counter="link_downed"),
    alert("RdmaPortPmaCounterSaturated", "pending", device="mlx5_0", port="1", counter="port_xmit_discards"),
    alert("RdmaPortPmaCounterSaturated", "pending", device="mlx5_0", port="1",
          counter="excessive_buffer_overrun_errors"),
    alert("RdmaPortPmaCounterSaturated", "pending", device="mlx5_0", port="1", counter="port_xmit_wait"),
    alert("RdmaPortPmaCounterSaturated", "pending", device="mlx4_0", port="1", counter="port_xmit_wait"),
    # Not: i40iw's "N/A (no PMA)" (the port has no PMA: state), mlx4_0/2 DOWN (never ACTIVE),
    # EFA/rxe/irdma without counters/, the netdevs missing from this namespace (counted once).
}

BENCH = set()  # a healthy node: nothing

# Collector errors a target may count, as (collector, reason); each only once (the rate is 0).
# netdev_missing: a fake tree names netdevs that this network namespace does not have.
ONCE_ONLY = {("netdev", "netdev_missing")}


class AlertsLive(unittest.TestCase):
    def test_exact_alerts_per_deployment_config_and_tree(self):
        with tempfile.TemporaryDirectory() as tmp:
            trees = {p: os.path.join(tmp, p) for p in ("demo", "fixtures", "bench")}
            for profile, root in trees.items():
                write_tree(root, profile)
            ticker = subprocess.Popen([sys.executable, SYSFS_GEN, trees["demo"], "--tick", "--interval", "1"],
                                      stdout=subprocess.DEVNULL)
            exporters = []
            # The overlay's workload collector asks the kubelet's PodResources socket and the
            # Kubernetes API for this node's pods, which a Kubernetes node has: protocol doubles
            # stand in for them here (no pods), so that the overlay runs as on a healthy node.
            doubles = Doubles(tmp, {"pod_resources": []}, podresources=os.path.join(tmp, "kubelet.sock"))
            token = os.path.join(tmp, "sa-token")
            with open(token, "w") as f:
                f.write("sa-token\n")
            kube = KubeApiDouble(tmp, {"kind": "PodList", "apiVersion": "v1", "items": []}, "sa-token", "node-a")
            node_sockets = {"kustomize-rdma-devices": [
                f"--collector.workload.podresources-socket={os.path.join(tmp, 'kubelet.sock')}",
                f"--collector.workload.kubernetes-api={kube.url}", f"--collector.workload.kubernetes-ca-file={kube.ca}",
                f"--collector.workload.kubernetes-token-file={token}", "--collector.workload.node-name=node-a"]}
            try:
                targets = [(f"demo/{name}", "demo", cfg) for name, cfg in CONFIGS.items()]
                targets += [("fixtures/deb", "fixtures", CONFIGS["deb"]), ("bench/deb", "bench", CONFIGS["deb"])]
                instance = {}
                for label, profile, cfg in targets:
                    e = Exporter(EXPORTER, f"--config.file={cfg}", f"--path.sysfs={trees[profile]}",
                                 *node_sockets.get(label.split("/")[1], []))
                    exporters.append(e)
                    instance[f"127.0.0.1:{e.port}"] = label
                with Prometheus(tmp, list(instance), rule_files=[RULES], job="rdma-exporter") as prom:
                    self.check(prom, instance, trees["demo"])
            finally:
                for e in exporters:
                    e.stop()
                doubles.stop()
                kube.stop()
                ticker.terminate()
                ticker.wait(timeout=10)

    def wait_for(self, what, predicate, attempts=240):
        """Polls predicate() every 0.5 s, a bounded number of times; the bound is a hang guard."""
        for _ in range(attempts):
            try:
                if predicate():
                    return
            except OSError:
                pass
            time.sleep(0.5)
        self.fail(f"gave up waiting for {what}")

    def alerts(self, prom, instance):
        got = {label: set() for label in instance.values()}
        for a in prom.api("alerts")["alerts"]:
            labels = dict(a["labels"])
            target = instance[labels.pop("instance")]
            name = labels.pop("alertname")
            for k in ("job", "severity"):
                labels.pop(k, None)
            got[target].add((name, a["state"], frozenset(labels.items())))
        return got

    def check(self, prom, instance, demo_root):
        n = len(instance)
        # Every target scraped several times, and the rules evaluated over that data.
        self.wait_for("5 scrapes of every target",
                      lambda: len(prom.api("query", query="count_over_time(up[1m]) >= 5 and up == 1")["result"]) == n)
        groups = prom.api("rules")["groups"]
        self.assertTrue(groups and all(r.get("health") == "ok" for g in groups for r in g["rules"]),
                        [(r["name"], r.get("lastError")) for g in groups for r in g["rules"] if r.get("health") != "ok"])

        # The cable pull: the port goes DOWN/Polling, as the kernel reports it.
        port = os.path.join(os.path.realpath(os.path.join(demo_root, "class", "infiniband", PULLED[0])),
                            "ports", PULLED[1])
        for attr, text in (("state", "1: DOWN\n"), ("phys_state", "2: Polling\n")):
            with open(os.path.join(port, attr + ".tmp"), "w") as f:
                f.write(text)
            os.replace(os.path.join(port, attr + ".tmp"), os.path.join(port, attr))

        want = {}
        for label in instance.values():
            want[label] = {"demo": DEMO, "fixtures": FIXTURES, "bench": BENCH}[label.split("/")[0]]
        # Pending alerts appear one evaluation after their expression holds; wait until they are
        # all there (bounded), then hold the comparison over a few more evaluations.
        last = {}

        def settled():
            nonlocal last
            last = self.alerts(prom, instance)
            return last == want
        try:
            self.wait_for("the expected alerts", settled)
        except AssertionError:
            diff = {t: {"unexpected": sorted(last.get(t, set()) - w), "missing": sorted(w - last.get(t, set()))}
                    for t, w in want.items() if last.get(t, set()) != w}
            self.fail(f"alerts per target differ from the expected ones: {diff}")
        for _ in range(4):
            time.sleep(1)
            self.assertEqual(self.alerts(prom, instance), want)

        # What a target counts as errors: only what happens once (rate 0), never per scrape, except
        # the fixtures' broken device above.
        errs = prom.api("query", query="rdma_exporter_collector_errors_total")["result"]
        for r in errs:
            m = r["metric"]
            target = instance[m["instance"]]
            if target.startswith("fixtures/") and (m["collector"] == "port" or
                                                   (m["collector"], m["reason"]) == ("hw_counters", "invalid_value")):
                continue
            self.assertIn((m["collector"], m["reason"]), ONCE_ONLY, f"{target} counts {m}")
        rising = prom.api("query", query="increase(rdma_exporter_collector_errors_total[30s]) > 0")["result"]
        self.assertEqual(sorted((instance[r["metric"]["instance"]], r["metric"]["reason"]) for r in rising),
                         [("fixtures/deb", "invalid_value"), ("fixtures/deb", "malformed"), ("fixtures/deb", "not_found"),
                          ("fixtures/deb", "other")])
        for label, alerts in sorted(last.items()):
            print(f"{label}: {sorted((a[0], a[1], dict(a[2]).get('device', dict(a[2]).get('reason', ''))) for a in alerts)}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
