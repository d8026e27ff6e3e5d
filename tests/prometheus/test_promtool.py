#!/usr/bin/env python3
"""prometheus: `promtool check metrics` is clean on the exporter's real output (fixture tree with
every edge case, and the demo fabric), plain and gzip."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from exporter_harness import Exporter, take_exporter_arg, write_tree  # noqa: E402

EXPORTER = take_exporter_arg()


def promtool_check(text):
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


class PromtoolClean(unittest.TestCase):
    def check_profile(self, profile):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "sys")
            write_tree(root, profile)
            with Exporter(EXPORTER, f"--path.sysfs={root}") as e:
                status, headers, text = e.get()
                self.assertEqual(status, 200)
                self.assertTrue(headers["Content-Type"].startswith("text/plain; version=0.0.4"))
                rc, out = promtool_check(text)
                self.assertEqual(rc, 0, out)
                status, headers, gz_text = e.get(headers={"Accept-Encoding": "gzip"})
                self.assertEqual(headers.get("Content-Encoding"), "gzip")
                self.assertIn("rdma_port_info", gz_text)
                rc, out = promtool_check(gz_text)
                self.assertEqual(rc, 0, out)

    def test_fixture_tree(self):
        self.check_profile("fixtures")

    def test_demo_fabric(self):
        self.check_profile("demo")


if __name__ == "__main__":
    unittest.main(verbosity=2)
