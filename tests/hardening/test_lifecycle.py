#!/usr/bin/env python3
"""hardening: SIGTERM/SIGINT stop the daemon promptly (idle keep-alive connections and a scrape
loop running), SIGHUP reloads the YAML config and counts the result in
rdma_exporter_config_reloads_total{result} / rdma_exporter_config_last_reload_successful; a
collector whose settings a reload leaves alone keeps its state (hw_counters' wrap extension),
and the log level and format of the new config apply."""
import glob
import json
import http.client
import os
import shutil
import signal
import tempfile
import threading
import time
import unittest

from hlib import Daemon, args, gen_sysfs, value

A = args()
EXE = A.exporter
STOP_TIMES = []


def hup_until(test, d, result, n):
    """SIGHUP, then polls until reloads_total{result} reaches n; returns a scrape taken after it."""
    d.proc.send_signal(signal.SIGHUP)
    for _ in range(600):  # the reload runs on the main thread; poll until it is counted
        s = d.scrape()
        if value(s, "rdma_exporter_config_reloads_total", result=result) == str(n):
            # A scrape that began before the reload was applied may still finish on the old
            # configuration with the counter already raised; what a reload guarantees is that
            # scrapes begun after it is counted use the new one.
            return d.scrape()
        time.sleep(0.05)
    test.fail(f"reload {result} #{n} never counted: {d.log()}")


class Lifecycle(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = tempfile.mkdtemp(prefix="hard-life-")
        cls.sys = gen_sysfs(os.path.join(cls.d, "sys"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.d, ignore_errors=True)
        if STOP_TIMES:
            print("\nstop times (signal -> exit): " + ", ".join(f"{n} {t*1000:.0f} ms" for n, t in STOP_TIMES))

    def stop_under_load(self, sig):
        with Daemon(EXE, f"--path.sysfs={self.sys}") as d:
            idle = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)  # keep-alive, then idle
            idle.request("GET", "/healthz")
            self.assertEqual(idle.getresponse().read(), b"ok\n")
            stop = threading.Event()
            results = []

            def loop():
                while not stop.is_set():
                    try:
                        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
                        c.request("GET", "/metrics")
                        results.append(c.getresponse().status)
                        c.close()
                    except OSError:
                        results.append("closed")  # the listener is gone: expected at the end
                        return
            t = threading.Thread(target=loop)
            t.start()
            while len(results) < 20:
                time.sleep(0.01)
            rc, secs = d.signal_and_wait(sig)
            stop.set()
            t.join()
            idle.close()
            STOP_TIMES.append((signal.Signals(sig).name, secs))
            self.assertEqual(rc, 0, d.log())
            self.assertIn("shutting down", d.log())
            self.assertIn("stopped in", d.log())
            self.assertTrue(all(r in (200, "closed") for r in results), set(map(str, results)))

    def test_sigterm(self):
        self.stop_under_load(signal.SIGTERM)

    def test_sigint(self):
        self.stop_under_load(signal.SIGINT)

    def test_sighup_reload_is_counted(self):
        cfg = os.path.join(self.d, "config.yml")
        with open(cfg, "w") as f:
            f.write("device:\n  include: '^mlx5_0$'\n")
        with Daemon(EXE, f"--config.file={cfg}", f"--path.sysfs={self.sys}") as d:
            s = d.scrape()
            self.assertEqual(value(s, "rdma_exporter_config_last_reload_successful"), "1")
            self.assertEqual(value(s, "rdma_exporter_config_reloads_total", result="success"), "0")
            self.assertEqual(value(s, "rdma_exporter_config_reloads_total", result="failure"), "0")
            self.assertEqual(value(s, "rdma_exporter_devices"), "1")

            with open(cfg, "w") as f:  # good change: two devices
                f.write("device:\n  include: '^mlx5_[01]$'\n")
            s = hup_until(self, d, "success", 1)
            self.assertEqual(value(s, "rdma_exporter_config_last_reload_successful"), "1")
            self.assertEqual(value(s, "rdma_exporter_devices"), "2")

            with open(cfg, "w") as f:  # bad: invalid regex -> old config kept
                f.write("device:\n  include: '^mlx5_[01'\n")
            s = hup_until(self, d, "failure", 1)
            self.assertEqual(value(s, "rdma_exporter_config_last_reload_successful"), "0")
            self.assertEqual(value(s, "rdma_exporter_config_reloads_total", result="success"), "1")
            self.assertEqual(value(s, "rdma_exporter_devices"), "2")
            self.assertIn("configuration reload failed", d.log())

            with open(cfg, "w") as f:  # bad YAML
                f.write("device: [\n")
            s = hup_until(self, d, "failure", 2)
            self.assertEqual(value(s, "rdma_exporter_devices"), "2")

            with open(cfg, "w") as f:  # fixed again
                f.write("device:\n  include: '^mlx5_0$'\n")
            s = hup_until(self, d, "success", 2)
            self.assertEqual(value(s, "rdma_exporter_config_last_reload_successful"), "1")
            self.assertEqual(value(s, "rdma_exporter_devices"), "1")
            rc, _ = d.signal_and_wait(signal.SIGTERM)
            self.assertEqual(rc, 0)

    def test_sighup_keeps_state_and_applies_log_settings(self):
        # A tree of its own: a hw counter file is rewritten here.
        sys_root = gen_sysfs(os.path.join(self.d, "sys-wrap"))
        counter, = glob.glob(f"{sys_root}/devices/*/*/infiniband/mlx5_0/ports/1/hw_counters/rx_write_requests")
        cfg = os.path.join(self.d, "wrap.yml")

        def config(text):
            with open(cfg, "w") as f:
                f.write(text)

        def write_counter(v):
            with open(counter, "w") as f:
                f.write(f"{v}\n")

        def rx(s):
            labels = dict(device="mlx5_0", port="1", counter="rx_write_requests")
            # The wraps series appears with the counter's first wrap.
            wraps = s.get(("rdma_hw_counters_wraps_total", frozenset(labels.items())), 0)
            return int(value(s, "rdma_hw_counters_total", **labels)), int(wraps)

        config("log:\n  level: info\n")
        with Daemon(EXE, f"--config.file={cfg}", f"--path.sysfs={sys_root}") as d:
            self.assertEqual(rx(d.scrape()), (4294967000, 0))  # the fixture's value, 296 below 2^32
            write_counter(100)  # the 32-bit counter wrapped
            self.assertEqual(rx(d.scrape()), (2**32 + 100, 1))

            s = hup_until(self, d, "success", 1)  # same config
            self.assertEqual(rx(s), (2**32 + 100, 1))
            self.assertRegex(d.log(), r"collectors kept \[[^]]*hw_counters")

            config("log:\n  level: info\nscrape:\n  timeout: 5s\ncollectors:\n  port:\n    verbs: false\n")
            s = hup_until(self, d, "success", 2)  # other settings changed, not hw_counters'
            self.assertEqual(rx(s), (2**32 + 100, 1))
            write_counter(200)
            self.assertEqual(rx(d.scrape()), (2**32 + 200, 1))  # still extended: no reset

            config("log:\n  level: warn\n  format: json\n")
            hup_until(self, d, "success", 3)
            mark = len(d.log())
            config("log: [\n")  # bad YAML: an error, logged at the new level in the new format
            hup_until(self, d, "failure", 1)
            self.assertEqual(rx(d.scrape()), (2**32 + 200, 1))
            rc, _ = d.signal_and_wait(signal.SIGTERM)
            self.assertEqual(rc, 0)
            after = [json.loads(line) for line in d.log()[mark:].splitlines()]  # every line is JSON
            self.assertEqual([r["level"] for r in after], ["error"], after)  # info lines (shutdown) are gone
            self.assertIn("configuration reload failed", after[0]["msg"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
