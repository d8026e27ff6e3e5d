#!/usr/bin/env python3
"""hardening: /healthz answers at once while more idle TCP connections than HTTP workers are held
open (connections that never send a request line), and a scrape still works beside them; keep-alive
connections left idle after a request are let go too. The latency of /healthz is printed."""
import os
import shutil
import socket
import statistics
import tempfile
import time
import unittest

from hlib import Daemon, args, gen_sysfs

A = args()
EXE = A.exporter
WORKERS = 16   # --web.max-requests: the HTTP worker threads
IDLE = 80      # more idle connections than workers (the default 72 workers included)


class IdleConnections(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = tempfile.mkdtemp(prefix="hard-idle-")
        cls.sys = gen_sysfs(os.path.join(cls.d, "sys"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.d, ignore_errors=True)

    def healthz_seconds(self, port):
        """One /healthz on a fresh connection: (status line, seconds)."""
        t0 = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=30) as c:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = c.recv(4096)
                if not chunk:
                    break
                data += chunk
        return data.split(b"\r\n", 1)[0], time.monotonic() - t0

    def test_healthz_beside_idle_connections(self):
        with Daemon(EXE, f"--path.sysfs={self.sys}", f"--web.max-requests={WORKERS}",
                    "--web.max-concurrent-scrapes=8") as d:
            idle = []
            try:
                for _ in range(IDLE):  # connected, then silent: the shape of a slowloris' first step
                    idle.append(socket.create_connection(("127.0.0.1", d.port), timeout=30))
                # Keep-alive connections that asked once and then stay open without a second request.
                for _ in range(WORKERS):
                    c = socket.create_connection(("127.0.0.1", d.port), timeout=30)
                    c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                    self.assertIn(b"200", c.recv(4096).split(b"\r\n", 1)[0])
                    idle.append(c)
                times = []
                for _ in range(5):
                    status, seconds = self.healthz_seconds(d.port)
                    self.assertIn(b"200", status)
                    times.append(seconds)
                print(f"\n/healthz with {IDLE} idle connections and {WORKERS} idle keep-alive ones held, "
                      f"{WORKERS} workers: median {statistics.median(times) * 1000:.1f} ms, "
                      f"max {max(times) * 1000:.1f} ms")
                # The request timeout (10 s) is far above what a healthy answer takes: a /healthz
                # that queued behind the held workers would take seconds.
                self.assertLess(max(times), 1.0, f"/healthz queued behind idle connections: {times}")
                st, body = d.request("/metrics", timeout=30)
                self.assertEqual(st, 200)
                self.assertIn("rdma_exporter_build_info", body)
            finally:
                for c in idle:
                    c.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
