#!/usr/bin/env python3
"""hardening: /healthz answers at once while more idle TCP connections than HTTP workers are held
open (connections that never send a request line), and a scrape still works beside them; keep-alive
connections left idle after a request are let go too. Then the floods, each while a Prometheus-like
client scrapes /metrics and a kubelet-like client polls /healthz (tests/lib/exporter_harness.py,
Watchers): 400 silent connections plus 400 that send one byte (more than civetweb's listen backlog
of 200, past which SYN cookies used to hand them to the workers), and 72 slowloris heads that
trickle a byte every 0.3 s and are re-opened when the server drops them. No scrape may fail and
every /healthz must be answered; the latencies are printed (and bounded only far above what a
healthy answer takes: before the accept-side gate they were 9-19 s)."""
import os
import shutil
import socket
import statistics
import tempfile
import time
import unittest

from hlib import Daemon, args, gen_sysfs, value
from exporter_harness import Holders, Watchers, parse_text

A = args()
EXE = A.exporter
WORKERS = 16   # --web.max-requests: the HTTP worker threads
IDLE = 80      # more idle connections than workers (the default 72 workers included)
FLOOD_SECONDS = 6  # each flood: long enough for several head deadlines (1 s) and re-opens
GENEROUS = 5.0     # seconds: far above a healthy answer, far below the 9-19 s the floods used to cause


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

    def run_flood(self, what, holders):
        """Runs the holders for FLOOD_SECONDS with the watchers on; checks and prints what they saw."""
        with Daemon(EXE, f"--path.sysfs={self.sys}", "--device.include=^mlx5_0$") as d:
            with holders(d.port) as h:
                time.sleep(0.5)  # the flood is in place before the first watched request
                with Watchers(d.port) as w:
                    time.sleep(FLOOD_SECONDS)
            print(f"\n{what}: {w.summary()}; server-ended attack connections re-opened: {h.reopened}")
            self.assertFalse(Watchers.failed(w.scrapes), f"failed scrapes during {what}: {Watchers.failed(w.scrapes)}")
            self.assertFalse(Watchers.failed(w.healthz), f"/healthz failed during {what}: {Watchers.failed(w.healthz)}")
            self.assertGreaterEqual(len(w.scrapes), 2, "the scraper got answers")
            self.assertGreaterEqual(len(w.healthz), 5, "the kubelet got answers")
            worst = max(t for _, t in w.healthz)
            self.assertLess(worst, GENEROUS, f"/healthz queued behind the flood: {worst:.1f} s")
            st, body = d.request("/metrics", timeout=30)
            self.assertEqual(st, 200)
            return h, parse_text(body)[0]

    def test_more_silent_and_one_byte_connections_than_the_backlog(self):
        class Both:  # 400 silent connections and 400 that send one byte and stop
            def __init__(self, port):
                self.parts = [Holders(port, 400), Holders(port, 400, first=b"G")]

            def __enter__(self):
                for p in self.parts:
                    p.__enter__()
                return self

            def __exit__(self, *exc):
                for p in self.parts:
                    p.__exit__(*exc)

            @property
            def reopened(self):
                return sum(p.reopened for p in self.parts)
        h, samples = self.run_flood("400 silent + 400 one-byte connections", Both)
        # The one-byte connections were closed at the head deadline and came back.
        self.assertGreater(h.parts[1].reopened, 0, "the one-byte connections were never dropped")
        self.assertGreater(float(value(samples, "rdma_exporter_http_requests_rejected_total", reason="head_timeout")), 0)

    def test_slowloris_heads(self):
        head = b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
        h, samples = self.run_flood(
            "72 slowloris heads", lambda port: Holders(port, 72, first=head, trickle=b"X-Slow: 1\r\n", every=0.3))
        self.assertGreater(h.reopened, 0, "the slow heads were never dropped")
        self.assertGreater(float(value(samples, "rdma_exporter_http_requests_rejected_total", reason="head_timeout")), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
