#!/usr/bin/env python3
"""prometheus: a real Prometheus server (Debian's prometheus, on loopback, temporary
data directory, stopped by PID) scrapes the exporter on the moving demo fabric: `up` is 1 and
rate() of a moving demo counter is above 0."""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from exporter_harness import Exporter, Prometheus, take_exporter_arg  # noqa: E402

EXPORTER = take_exporter_arg()


def query(base, expr):
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return body["data"]["result"]


class RealPrometheus(unittest.TestCase):
    def test_up_and_rate(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "sys")
            ticker = subprocess.Popen([os.path.join(REPO, "scripts/demo-fabric.sh"), root])
            try:
                while not os.path.exists(os.path.join(root, "class/infiniband/mlx5_0")):
                    time.sleep(0.1)
                with Exporter(EXPORTER, f"--path.sysfs={root}") as e:
                    with Prometheus(tmp, [f"127.0.0.1:{e.port}"]) as prom:
                        # Prometheus batches target updates every 5 s; wait (bounded) for samples.
                        up, rate = [], []
                        for _ in range(120):
                            time.sleep(0.5)
                            try:
                                up = query(prom.url, 'up{job="rdma"}')
                                rate = query(prom.url, 'rate(rdma_port_transmit_bytes_total{device="mlx5_0"}[5s])')
                            except OSError:
                                continue
                            if up and rate and float(rate[0]["value"][1]) > 0:
                                break
                        self.assertTrue(up, "no up series")
                        self.assertEqual(up[0]["value"][1], "1")
                        self.assertTrue(rate, "no rate series")
                        self.assertGreater(float(rate[0]["value"][1]), 0)
            finally:
                ticker.terminate()
                ticker.wait(timeout=10)


if __name__ == "__main__":
    unittest.main(verbosity=2)
