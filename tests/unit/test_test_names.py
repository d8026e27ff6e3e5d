#!/usr/bin/env python3
"""unit: every ctest of this build is named <label>.<area>.<case> (docs/developing.md): the first
part is one of the test's labels, the area a collector (a folder of collectors/) or one of the
other parts of the tree, and a case follows. A branch that adds a test under another name fails
here, naming it."""
import json
import os
import re
import subprocess
import sys
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = sys.argv.pop(1) if len(sys.argv) > 1 else os.getcwd()
COLLECTORS = {d for d in os.listdir(os.path.join(REPO, "collectors"))
              if os.path.isfile(os.path.join(REPO, "collectors", d, "CMakeLists.txt"))}
AREAS = COLLECTORS | {"exporter", "deploy", "scripts", "tests", "harness", "sources"}


def tests():
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=BUILD, capture_output=True, text=True, check=True).stdout
    for t in json.loads(out)["tests"]:
        labels = next((p["value"] for p in t.get("properties", []) if p["name"] == "LABELS"), [])
        yield t["name"], labels


class TestNames(unittest.TestCase):
    def test_every_name_is_label_area_case(self):
        seen = 0
        for name, labels in tests():
            if re.fullmatch(r".+_NOT_BUILT(-[0-9a-f]+)?", name):
                continue  # a Catch2 executable not built yet: its cases are listed once it is
            seen += 1
            with self.subTest(test=name):
                m = re.match(r"([a-z_]+)\.([a-z_]+)\.(.+)", name)
                self.assertTrue(m, "not <label>.<area>.<case>")
                self.assertIn(m.group(1), labels, "the first part is not one of its labels %s" % labels)
                self.assertIn(m.group(2), AREAS, "unknown area (collectors: %s)" % ", ".join(sorted(COLLECTORS)))
        self.assertGreater(seen, 100, "ctest listed too few tests in " + BUILD)

    def test_collectors_are_found(self):
        self.assertTrue({"port", "pma", "prober"} <= COLLECTORS, COLLECTORS)


if __name__ == "__main__":
    unittest.main(verbosity=2)
