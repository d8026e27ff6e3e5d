#!/usr/bin/env python3
"""docs/metrics.md matches what the exporter really exports.

Scrapes the exporter (all default collectors) on the fixture tree and on the demo fabric, then:
- every exported family is documented, with the same type and the same label names;
- every documented row is exported, unless its description carries a marker saying what it
  needs that these trees lack (deploy/promql_util.py NEEDS_MARKERS: *hardware*, *ibsim*, *vm*,
  *netns*, *prober*, *after a wrap*: a series that appears once a counter wrapped, which one
  scrape of a tree cannot show, *on error*: a series that appears with the first error).
"""
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(REPO, "deploy"))
import promql_util  # noqa: E402  (the one reader of docs/metrics.md's tables)
from exporter_harness import Exporter, take_exporter_arg, write_tree  # noqa: E402

EXPORTER = take_exporter_arg()
SUFFIXES = ("_bucket", "_sum", "_count")


def documented():
    return {name: {"type": row["type"], "labels": set(row["labels"]), "needs": row["needs"] is not None}
            for name, row in promql_util.parse_metrics_doc(os.path.join(REPO, "docs", "metrics.md")).items()}


def exported():
    fams = {}
    for profile in ("fixtures", "demo"):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "sys")
            write_tree(root, profile)
            with Exporter(EXPORTER, f"--path.sysfs={root}") as e:
                samples, types = e.scrape()
        for (name, labels) in samples:
            fam = name
            for s in SUFFIXES:
                if name.endswith(s) and name[: -len(s)] in types and types[name[: -len(s)]] == "histogram":
                    fam = name[: -len(s)]
            entry = fams.setdefault(fam, {"type": types.get(fam), "labels": set()})
            entry["labels"] |= {k for k, _ in labels if k != "le"}
    return fams


class MetricsDoc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.doc = documented()
        cls.exp = exported()

    def test_every_exported_family_is_documented(self):
        for fam, e in sorted(self.exp.items()):
            with self.subTest(metric=fam):
                self.assertIn(fam, self.doc, f"{fam} is exported but not in docs/metrics.md")
                self.assertEqual(self.doc[fam]["type"], e["type"], fam)
                self.assertEqual(self.doc[fam]["labels"], e["labels"], fam)

    def test_every_documented_metric_is_exported(self):
        for name, row in sorted(self.doc.items()):
            if row["needs"]:
                continue
            with self.subTest(metric=name):
                self.assertIn(name, self.exp, f"{name} is documented but not exported by the demo/fixture trees "
                                              "(mark it with what it needs: " + ", ".join("*%s*" % m for m in promql_util.NEEDS_MARKERS) + ")")


if __name__ == "__main__":
    unittest.main(verbosity=2)
