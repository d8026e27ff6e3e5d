#!/usr/bin/env python3
"""prometheus: a real Prometheus (Debian's prometheus, loopback, temporary data dir,
stopped by PID) with the shipped rules loaded scrapes the exporter on the moving demo fabric
(tests/lib/sysfs_gen.py --profile demo, as scripts/demo-fabric.sh). Checks:
  - every metric a dashboard or rule uses is in a real scrape, or is marked *hardware* in
    docs/metrics.md (listed with that reason);
  - every dashboard query (Grafana variables substituted, "All" = .*) returns data, or is listed
    with the reason it cannot on the demo (it needs a *hardware* metric);
  - every rule loaded and evaluates without error (health ok).
usage: test_dashboards_live.py --exporter BINARY"""
import glob
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "deploy"))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))
import promql_util  # noqa: E402
from exporter_harness import Exporter, Prometheus, take_exporter_arg  # noqa: E402

EXPORTER = take_exporter_arg()
RULES = os.path.join(REPO, "deploy", "prometheus", "rdma-exporter.rules.yml")
# Short windows: the test's Prometheus scrapes every second.
LIVE_BUILTINS = {"__rate_interval": "15s", "__interval": "2s", "__range": "1m"}


class LiveDashboards(unittest.TestCase):
    def test_queries_return_data_and_rules_evaluate(self):
        doc = promql_util.parse_metrics_doc(os.path.join(REPO, "docs", "metrics.md"))
        hardware = {n: d["needs"] for n, d in doc.items() if d["needs"]}
        exprs = []
        for path in sorted(glob.glob(os.path.join(REPO, "dashboards", "*.json"))):
            exprs += [(os.path.basename(path), w, e) for w, e in promql_util.dashboard_exprs(path)]
        rule_exprs = promql_util.rule_exprs(RULES)
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "sys")
            # What scripts/demo-fabric.sh does, in two steps: write the tree, then keep it moving.
            gen = os.path.join(REPO, "tests", "lib", "sysfs_gen.py")
            subprocess.run([sys.executable, gen, root, "--profile", "demo"], check=True, stdout=subprocess.DEVNULL)
            ticker = subprocess.Popen([sys.executable, gen, root, "--tick", "--interval", "1"],
                                      stdout=subprocess.DEVNULL)
            try:
                with Exporter(EXPORTER, f"--path.sysfs={root}") as e:
                    samples, types = e.scrape()
                    exported = {name for name, _ in samples} | set(types)
                    with Prometheus(tmp, [f"127.0.0.1:{e.port}"], rule_files=[RULES], job="rdma-exporter") as prom:
                        self.check_live(prom, exprs, rule_exprs, exported, hardware)
            finally:
                ticker.terminate()
                ticker.wait(timeout=10)

    def check_live(self, prom, exprs, rule_exprs, exported, hardware):
        # Metrics used: in the scrape, or hardware-only.
        records = promql_util.recorded_exprs(RULES)
        used = {m for _, _, e in exprs + [("", w, e) for w, e in rule_exprs]
                for m in promql_util.exported_metrics_in(promql_util.substitute(e), records)}
        missing, needs_hw = [], []
        for m in sorted(used - promql_util.PROMETHEUS_BUILTIN):
            fam = m[:-len("_bucket")] if m.endswith("_bucket") else m
            if m in exported or fam in exported:
                continue
            (needs_hw if fam in hardware else missing).append(m)
        for m in needs_hw:
            print(f"not in the demo scrape (needs {hardware[m[:-7] if m.endswith('_bucket') else m]}): {m}")
        self.assertEqual(missing, [], "metrics used by dashboards/rules but not exported on the demo fabric")

        # Wait (bounded) until rates have two samples in their window and the rules evaluated.
        ready = False
        for _ in range(240):
            time.sleep(0.5)
            try:
                r = prom.api("query", query='rate(rdma_port_transmit_bytes_total[15s]) > 0')["result"]
                groups = prom.api("rules")["groups"]
            except OSError:
                continue
            evaluated = groups and all(g.get("lastEvaluation", "").startswith("20") and
                                       not g["lastEvaluation"].startswith("0001") for g in groups)
            if r and evaluated:
                ready = True
                break
        self.assertTrue(ready, "no rate() data or rules not evaluated in time")
        time.sleep(3)

        empty, reasons, ok = [], [], 0
        for f, where, e in exprs:
            q = promql_util.substitute(e, LIVE_BUILTINS, var_value=".*")
            result = prom.api("query", query=q)["result"]
            if result:
                ok += 1
                continue
            hw = sorted(m for m in promql_util.exported_metrics_in(q, records) if m in needs_hw or
                        (m.endswith("_bucket") and m[:-7] in needs_hw))
            if hw:
                reasons.append(f"{f}: {where}: needs {hardware[hw[0][:-7] if hw[0].endswith('_bucket') else hw[0]]} "
                               f"({', '.join(hw)})")
            else:
                empty.append(f"{f}: {where}: {q}")
        for r in reasons:
            print("no data on the demo fabric, " + r)
        print(f"{ok} of {len(exprs)} dashboard queries return data; {len(reasons)} need what the demo lacks")
        self.assertEqual(empty, [], "dashboard queries without data on the demo fabric")

        groups = prom.api("rules")["groups"]
        rules = [r for g in groups for r in g["rules"]]
        self.assertEqual(len(rules), len(rule_exprs), "every rule of the file is loaded")
        bad = [(r["name"], r.get("lastError")) for r in rules if r.get("health") != "ok"]
        self.assertEqual(bad, [], "rules with evaluation errors")
        # Which alerts fire (and which must not) is prometheus.deploy.alerts_live's assertion.
        print(f"{len(rules)} rules healthy")


if __name__ == "__main__":
    unittest.main(verbosity=2)
