#!/usr/bin/env python3
"""unit: tests/sources/tests_of_sources.txt names, for every folder of sources/, the ctests that
whoever changes it runs (`ctest -R "$(tests/sources/tests-of.sh sources/mad)"`). A folder added to
sources/ without a line, a line for a folder that is gone, or a regex that selects no test of this
build fails here. So does a test in tests/sources/ that is not where a reader looks for it: the
tests of sources/<x>/<file>.h are tests/sources/<x>/<file>[_<what>]_test.cpp."""
import json
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = sys.argv.pop(1) if len(sys.argv) > 1 else os.getcwd()


def table():
    rows = {}
    with open(os.path.join(HERE, "tests_of_sources.txt")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                folder, regex = line.split()
                rows[folder] = regex
    return rows


def folders():
    src = os.path.join(REPO, "sources")
    return {d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))}


def test_names():
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=BUILD, capture_output=True, text=True,
                         check=True).stdout
    return [t["name"] for t in json.loads(out)["tests"]]


class TestSourcesMap(unittest.TestCase):
    def test_every_folder_has_a_line(self):
        self.assertEqual(set(table()), folders())

    def test_every_regex_selects_tests(self):
        names = test_names()
        self.assertGreater(len(names), 100, "ctest listed too few tests in " + BUILD)
        for folder, regex in table().items():
            with self.subTest(folder=folder):
                self.assertTrue(any(re.search(regex, n) for n in names), "%s selects no test" % regex)

    def test_tests_are_named_after_what_they_test(self):
        here = os.path.join(REPO, "tests", "sources")
        for d in sorted(os.listdir(here)):
            if not os.path.isdir(os.path.join(here, d)) or d == "__pycache__":
                continue
            with self.subTest(folder=d):
                self.assertIn(d, folders(), "tests/sources/%s has no sources/%s" % (d, d))
                headers = {f[:-2] for f in os.listdir(os.path.join(REPO, "sources", d)) if f.endswith(".h")}
                for f in os.listdir(os.path.join(here, d)):
                    if f.endswith(".cpp"):
                        self.assertTrue(f.endswith("_test.cpp") and
                                        any(f == h + "_test.cpp" or f.startswith(h + "_") for h in headers),
                                        "tests/sources/%s/%s is not named <header of sources/%s>_test.cpp" % (d, f, d))


if __name__ == "__main__":
    unittest.main(verbosity=2)
