#!/usr/bin/env python3
"""deploy/generate.py, the one source of the dashboards and alert rules:
- the committed outputs are current (`--check`);
- a metric a query uses that docs/metrics.md does not document is an error that names it, and
  nothing is written;
- `--config` retargets every alert and the dashboards' Job variable through CONFIG's selector,
  and a threshold through its key, without a query edited;
- `--runbook-url-base` sets where every runbook_url points (default: the .deb's installed docs)."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GENERATE = os.path.join(REPO, "deploy", "generate.py")
DEFAULT_SELECTOR = 'job=~".*rdma.exporter.*"'


def generate(*args):
    return subprocess.run([sys.executable, GENERATE, *args], capture_output=True, text=True)


def rule_exprs(root):
    with open(os.path.join(root, "deploy", "prometheus", "rdma-exporter.rules.yml"), encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    return {r["alert"]: r["expr"] for g in doc["groups"] for r in g["rules"] if "alert" in r}  # recording rules have none


class Generate(unittest.TestCase):
    def test_committed_outputs_are_current(self):
        p = generate("--check")
        self.assertEqual(p.returncode, 0, "run python3 deploy/generate.py and commit:\n" + p.stdout + p.stderr)

    def test_an_undocumented_metric_is_an_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            doc = os.path.join(tmp, "metrics.md")
            with open(os.path.join(REPO, "docs", "metrics.md"), encoding="utf-8") as f:
                lines = [l for l in f if not l.startswith("| rdma_port_symbol_errors_total ")]
            with open(doc, "w", encoding="utf-8") as f:
                f.writelines(lines)
            out = os.path.join(tmp, "out")
            p = generate("--metrics-doc", doc, "--out", out)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("rdma_port_symbol_errors_total", p.stderr)
            self.assertIn("alert RdmaPortSymbolErrorsRising", p.stderr)
            self.assertFalse(os.path.exists(out), "nothing is written")

    def test_config_retargets_selector_and_thresholds(self):
        with tempfile.TemporaryDirectory() as tmp:
            cfg = os.path.join(tmp, "config.yml")
            with open(cfg, "w", encoding="utf-8") as f:
                f.write('selector: \'job="gpu-nodes"\'\nsymbol_errors_per_10m: 25\n')
            out = os.path.join(tmp, "out")
            p = generate("--config", cfg, "--out", out)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            exprs = rule_exprs(out)
            self.assertEqual(len(exprs), len(rule_exprs(REPO)))
            for name, expr in exprs.items():
                with self.subTest(alert=name):
                    self.assertNotIn(DEFAULT_SELECTOR, expr)
                    if not name.startswith("RdmaFabric"):  # the fabric snapshot has its own selector
                        self.assertIn('job="gpu-nodes"', expr)
            self.assertTrue(exprs["RdmaPortSymbolErrorsRising"].endswith("> 25"), exprs["RdmaPortSymbolErrorsRising"])
            dashboards = glob.glob(os.path.join(out, "dashboards", "*.json"))
            self.assertEqual(len(dashboards), len(glob.glob(os.path.join(REPO, "dashboards", "*.json"))))
            for path in dashboards:
                with open(path, encoding="utf-8") as f:
                    job = next(v for v in json.load(f)["templating"]["list"] if v["name"] == "job")
                self.assertEqual(job["definition"], 'label_values(rdma_exporter_build_info{job="gpu-nodes"}, job)', path)
            self.assertFalse(os.path.exists(os.path.join(out, "tests")), "the promtool cases fit the defaults only")

    def test_table_columns_name_their_queries(self):
        # A table of several instant queries merges them into columns "Value #<refId>"; a rename
        # that names no query of the panel (targets reordered or dropped) would leave a column
        # unnamed and show another under a wrong name.
        tables = 0
        for path in sorted(glob.glob(os.path.join(REPO, "dashboards", "*.json"))):
            with open(path, encoding="utf-8") as f:
                panels = json.load(f)["panels"]
            for p in panels + [c for r in panels for c in r.get("panels", [])]:
                renames = {k: v for t in p.get("transformations", []) if t["id"] == "organize"
                           for k, v in t["options"].get("renameByName", {}).items() if k.startswith("Value #")}
                if not renames:
                    continue
                tables += 1
                with self.subTest(dashboard=os.path.basename(path), panel=p["title"]):
                    refs = ["Value #" + t["refId"] for t in p["targets"]]
                    self.assertEqual(sorted(renames), sorted(refs), "one named column per query")
                    self.assertEqual(len(set(renames.values())), len(renames), "column names are distinct")
        self.assertGreaterEqual(tables, 1, "the suspect table renames its evidence columns")

    def test_runbook_url_base_is_a_setting(self):
        # The shipped rules link to the runbooks the .deb installs; --runbook-url-base points every
        # alert elsewhere (an internal wiki) and the promtool cases follow it.
        for r in yaml.safe_load(open(os.path.join(REPO, "deploy", "prometheus", "rdma-exporter.rules.yml")))["groups"]:
            for rule in r["rules"]:
                if "alert" in rule:
                    self.assertEqual(rule["annotations"]["runbook_url"],
                                     "file:///usr/share/doc/rdma-exporter/runbooks.md#" + rule["alert"].lower())
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            p = generate("--runbook-url-base", "https://wiki.example/rdma", "--out", out)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(os.path.join(out, "deploy", "prometheus", "rdma-exporter.rules.yml"), encoding="utf-8") as f:
                text = f.read()
            self.assertNotIn("file:///", text)
            self.assertIn('runbook_url: "https://wiki.example/rdma#rdmaexporterdown"', text)
            with open(os.path.join(out, "tests", "deploy", "rules.test.yml"), encoding="utf-8") as f:
                self.assertIn("https://wiki.example/rdma#rdmaexporterdown", f.read())
            self.assertEqual(rule_exprs(out), rule_exprs(REPO), "no query changes")

    def test_unknown_config_key_is_an_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            cfg = os.path.join(tmp, "config.yml")
            with open(cfg, "w", encoding="utf-8") as f:
                f.write("selectr: 'job=\"x\"'\n")
            p = generate("--config", cfg, "--out", os.path.join(tmp, "out"))
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("selectr", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
