#!/usr/bin/env python3
"""unit: the real binary's command line and config file handling: clear errors, non-zero exits."""
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from exporter_harness import take_exporter_arg  # noqa: E402

EXPORTER = take_exporter_arg()


def run(*args):
    p = subprocess.run([EXPORTER, *args], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


class Cli(unittest.TestCase):
    def test_help_and_version(self):
        rc, out, _ = run("--help")
        self.assertEqual(rc, 0)
        for flag in ["--web.listen-address", "--web.telemetry-path", "--path.sysfs", "--[no-]collector.port",
                     "--config.file", "--log.level", "--log.format", "--version"]:
            self.assertIn(flag, out)
        rc, out, _ = run("--version")
        self.assertEqual(rc, 0)
        self.assertRegex(out, r"^rdma_exporter version \d+\.\d+\.\d+ \(revision ")

    def test_unknown_flag_prints_usage(self):
        rc, _, err = run("--web.listen-adress=:1")
        self.assertEqual(rc, 2)
        self.assertIn("unknown flag --web.listen-adress", err)
        self.assertIn("usage: rdma_exporter", err)

    def test_bad_values(self):
        for args, needle in [(["--log.level=loud"], "flag --log.level: must be debug, info, warn or error, got 'loud'"),
                             (["--log.format=xml"], "flag --log.format: must be logfmt or json, got 'xml'"),
                             (["--scrape.timeout=fast"], "flag --scrape.timeout"),
                             (["--device.include=("], "invalid device regular expression"),
                             (["--web.listen-address=[::1]:9661"], "IPv6")]:
            with self.subTest(args=args):
                rc, _, err = run(*args, "--path.sysfs=/nonexistent")
                self.assertNotEqual(rc, 0)
                self.assertIn(needle, err)

    def test_config_file_errors_name_file_line_key(self):
        with tempfile.TemporaryDirectory() as tmp:
            cases = [("web:\n  listen_address: 127.0.0.1:0\n  bogus: 1\n", ":3:3: unknown key 'web.bogus'"),
                     ("scrape:\n  timeout: forever\n", ":2:12: key 'scrape.timeout'"),
                     ("collectors:\n  port:\n    enabled: [x]\n", ":3:14: key 'collectors.port.enabled'"),
                     ("web: {\n", "invalid YAML")]
            for i, (text, needle) in enumerate(cases):
                path = os.path.join(tmp, f"c{i}.yml")
                with open(path, "w") as f:
                    f.write(text)
                with self.subTest(config=text):
                    rc, _, err = run(f"--config.file={path}")
                    self.assertEqual(rc, 2)
                    self.assertIn(path + needle if needle.startswith(":") else needle, err)
            rc, _, err = run(f"--config.file={tmp}/missing.yml")
            self.assertEqual(rc, 2)
            self.assertIn("cannot open config file", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
