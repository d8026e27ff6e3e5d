#!/usr/bin/env python3
"""fixtures: the exposition budget that docs/metrics.md states (series per port, bytes per node),
checked on the generated trees with the default collectors: the demo fabric, the fixtures tree
(every driver and quirk) and the 16-HCA bench tree. The figures are read from the docs, so that the
docs and this test cannot disagree."""
import collections
import os
import re
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from exporter_harness import Exporter, parse_text, take_exporter_arg, write_tree  # noqa: E402

EXPORTER = take_exporter_arg()
DOCS = os.path.join(HERE, "..", "..", "docs", "metrics.md")


def budget():
    """(series per port, bytes per node, bytes per port) from the docs' 'Exposition budget' section."""
    with open(DOCS) as f:
        text = f.read()
    section = text.split("## Exposition budget", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"at most\s+\*\*(\d+) series per port\*\*,\s+and a node's scrape at most\s+\*\*(\d+) KB plus (\d+) KB"
                  r"\s+per port\*\*", section)
    if not m:
        raise AssertionError("docs/metrics.md: the budget sentence is not where this test reads it:\n" + section)
    return int(m.group(1)), int(m.group(2)) * 1000, int(m.group(3)) * 1000


class ExpositionBudget(unittest.TestCase):
    def check(self, profile):
        per_port, node_bytes, port_bytes = budget()
        with tempfile.TemporaryDirectory(prefix="rdma-budget-") as tmp:
            root = os.path.join(tmp, "sys")
            write_tree(root, profile=profile)
            with Exporter(EXPORTER, f"--path.sysfs={root}") as e:
                e.get()  # the first scrape; wraps and rates start from the second
                body = e.get()[2]
        samples, _ = parse_text(body)
        ports = collections.Counter()
        for name, labels in samples:
            l = dict(labels)
            if "device" in l and "port" in l:
                ports[(l["device"], l["port"])] += 1
        self.assertGreater(len(ports), 0, profile)
        worst, n = ports.most_common(1)[0]
        self.assertLessEqual(n, per_port, f"{profile}: {worst} has {n} series")
        limit = node_bytes + port_bytes * len(ports)
        self.assertLessEqual(len(body.encode()), limit,
                             f"{profile}: {len(body.encode())} bytes for {len(ports)} ports, budget {limit}")
        print(f"{profile}: {len(samples)} samples, {len(body.encode())} bytes, {len(ports)} ports, "
              f"at most {n} series per port ({worst}); budget {per_port} per port, {limit} bytes")

    def test_demo(self):
        self.check("demo")

    def test_fixtures(self):
        self.check("fixtures")

    def test_bench(self):
        self.check("bench")


if __name__ == "__main__":
    unittest.main()
