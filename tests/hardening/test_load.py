#!/usr/bin/env python3
"""hardening/load (bounded by count, not time): 10,000 scrapes of a generated sysfs tree over 8
keep-alive connections at once; no errors; RSS after the first 1,000 (warm) and at the end is
reported, and its growth must stay small (a leak of even 1 KiB per scrape would show ~9 MiB).
Latency percentiles are reported, never asserted. The daemon runs with its default web settings.
Also: the binary's static TLS, which each of its threads gets a copy of, stays small.
The 50-connection, 60 s run (plain and TLS with basic auth) is bench/load/."""
import http.client
import os
import shutil
import struct
import tempfile
import threading
import time
import unittest

from hlib import Daemon, args, gen_sysfs, value

A = args()
EXE = A.exporter
TOTAL = int(os.environ.get("RDMA_LOAD_SCRAPES", "10000"))
CONNS = 8
WARM = 1000


def static_tls_bytes(path):
    """The size of the binary's PT_TLS segment (ELF64): the static thread-local storage that every
    thread of the process gets its own zeroed or copied instance of at creation."""
    with open(path, "rb") as f:
        elf = f.read()
    assert elf[:4] == b"\x7fELF" and elf[4] == 2, "not an ELF64 file: " + path
    order = "<" if elf[5] == 1 else ">"
    phoff, = struct.unpack_from(order + "Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from(order + "HH", elf, 0x36)
    for i in range(phnum):
        p_type, = struct.unpack_from(order + "I", elf, phoff + i * phentsize)
        if p_type == 7:  # PT_TLS
            return struct.unpack_from(order + "Q", elf, phoff + i * phentsize + 0x28)[0]
    return 0


class Load(unittest.TestCase):
    def test_static_tls_stays_small(self):
        # The daemon runs about 75 threads (72 HTTP workers by default), each with its own copy of
        # the static TLS: a thread_local engine of 5,000 bytes once cost about 300 KiB of RSS.
        # Large per-thread state belongs on the heap, made by the threads that use it.
        size = static_tls_bytes(EXE)
        print(f"\nstatic TLS of {EXE}: {size} bytes")
        self.assertLessEqual(size, 512, "static TLS per thread grew: look for a large thread_local")

    def test_10000_scrapes_no_errors_flat_rss(self):
        d0 = tempfile.mkdtemp(prefix="hard-load-")
        try:
            sysfs = gen_sysfs(os.path.join(d0, "sys"))
            # One HCA (a typical node): the count, not the tree size, is what this test is about.
            with Daemon(EXE, f"--path.sysfs={sysfs}", "--device.include=^mlx5_0$") as d:
                lock = threading.Lock()
                done = [0]
                errors = []
                lat = []
                rss = {}

                def worker():
                    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
                    while True:
                        with lock:
                            if done[0] >= TOTAL:
                                return
                            done[0] += 1
                            n = done[0]
                        t0 = time.perf_counter()
                        try:
                            c.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
                            r = c.getresponse()
                            body = r.read()
                            if r.status != 200 or not body:
                                errors.append(r.status)
                        except (OSError, http.client.HTTPException) as e:
                            errors.append(repr(e))
                            c.close()
                            c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
                        dt = time.perf_counter() - t0
                        with lock:
                            lat.append(dt)
                            if n == WARM:
                                rss["warm"] = d.rss_kib()
                threads = [threading.Thread(target=worker) for _ in range(CONNS)]
                t0 = time.perf_counter()
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                wall = time.perf_counter() - t0
                rss["end"] = d.rss_kib()
                s = d.scrape()
                lat.sort()
                p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000  # noqa: E731
                print(f"\nload: {TOTAL} scrapes, {CONNS} connections, {wall:.1f} s ({TOTAL / wall:.0f}/s); "
                      f"latency p50 {p(0.5):.2f} ms p99 {p(0.99):.2f} ms max {lat[-1]*1000:.1f} ms; "
                      f"RSS after {WARM}: {rss['warm']} KiB, after {TOTAL}: {rss['end']} KiB "
                      f"(+{rss['end'] - rss['warm']} KiB); errors {len(errors)}")
                self.assertEqual(errors, [])
                self.assertEqual(len(lat), TOTAL)
                # Concurrent requests share a running collection (single flight): every request was
                # answered (above), with at most one collection each and at least one in all.
                collections = int(value(s, "rdma_exporter_scrapes_total"))
                self.assertGreaterEqual(collections, 1)
                self.assertLessEqual(collections, TOTAL + 1)
                print(f"collections: {collections} for {TOTAL} requests")
                self.assertEqual(value(s, "rdma_exporter_http_requests_rejected_total", reason="too_many_scrapes"), "0")
                self.assertLess(rss["end"] - rss["warm"], 8 * 1024, "RSS grew over the run")
        finally:
            shutil.rmtree(d0, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
