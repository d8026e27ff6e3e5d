#!/usr/bin/env python3
"""hardening: bytes that are not UTF-8 in a device's sysfs text (a NodeDescription any root user of
the fabric can set: here `ff fe`) keep the scrape valid: the body is UTF-8, `promtool check metrics`
accepts it, and the bytes show as U+FFFD in the label."""
import glob
import os
import shutil
import subprocess
import tempfile
import unittest
import urllib.request

from hlib import Daemon, args, gen_sysfs

A = args()
EXE = A.exporter


class HostileText(unittest.TestCase):
    def test_invalid_utf8_node_desc_keeps_the_scrape_valid(self):
        d = tempfile.mkdtemp(prefix="hard-text-")
        try:
            sysfs = gen_sysfs(os.path.join(d, "sys"))
            descs = sorted(glob.glob(os.path.join(sysfs, "class", "infiniband", "*", "node_desc")))
            self.assertTrue(descs, "the fixture tree has devices with a node_desc")
            with open(os.path.realpath(descs[0]), "wb") as f:
                f.write(b"hca\xff\xfe \"quoted\" \\ node\n")
            with Daemon(EXE, f"--path.sysfs={sysfs}") as dm:
                with urllib.request.urlopen(dm.url + "/metrics", timeout=60) as r:
                    raw = r.read()
            text = raw.decode("utf-8")  # strict: raises on any invalid byte
            self.assertIn('node_desc="hca\ufffd\ufffd \\"quoted\\" \\\\ node"', text)
            p = subprocess.run(["promtool", "check", "metrics"], input=raw, capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 0, (p.stdout + p.stderr).decode(errors="replace")[-800:])
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
