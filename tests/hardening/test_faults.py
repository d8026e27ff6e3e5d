#!/usr/bin/env python3
"""hardening/faults: while scrapes run in a loop, sysfs files and whole devices are removed and
re-added, and counter files are made unreadable in the ways a tmpfs allows without FUSE: replaced
by a directory (read() -> EISDIR, a real read error), by a dangling symlink (ENOENT at open), by
garbage or empty content, and chmod 000 (EACCES; only when not root, root bypasses it). Real EIO
from a driver cannot be made on tmpfs; the error path is the same (a failed read, counted).
Every scrape must answer 200 and the errors must be counted in
rdma_exporter_collector_errors_total / rdma_exporter_discovery_errors_total."""
import http.client
import os
import shutil
import tempfile
import threading
import time
import unittest

from hlib import Daemon, args, gen_sysfs, parse_text, series

A = args()
EXE = A.exporter


def errors_total(samples):
    n = 0
    for name in ("rdma_exporter_collector_errors_total", "rdma_exporter_discovery_errors_total"):
        n += sum(int(float(v)) for v in series(samples, name).values())
    return n


class Faults(unittest.TestCase):
    def test_exporter_keeps_answering_and_counts(self):
        d0 = tempfile.mkdtemp(prefix="hard-faults-")
        try:
            sysfs = gen_sysfs(os.path.join(d0, "sys"))
            ib = os.path.join(sysfs, "class", "infiniband")
            dev = os.path.realpath(os.path.join(ib, "mlx5_0"))
            counters = os.path.join(dev, "ports", "1", "counters")
            with Daemon(EXE, f"--path.sysfs={sysfs}") as d:
                base = errors_total(d.scrape())
                stop = threading.Event()
                statuses = []

                def loop():
                    while not stop.is_set():
                        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
                        c.request("GET", "/metrics")
                        r = c.getresponse()
                        body = r.read().decode()
                        statuses.append(r.status)
                        if r.status == 200:
                            parse_text(body)  # well-formed every time
                        c.close()
                t = threading.Thread(target=loop)
                t.start()

                def settle(n=3):  # let a few scrapes see the current state
                    start = len(statuses)
                    while len(statuses) < start + n and t.is_alive():
                        time.sleep(0.005)

                f = os.path.join(counters, "port_rcv_data")
                with open(f) as fh:
                    orig = fh.read()
                for _ in range(5):
                    os.unlink(f)                      # a counter file disappears
                    settle()
                    os.mkdir(f)                       # ... is a directory: read() fails with EISDIR
                    settle()
                    os.rmdir(f)
                    os.symlink("/nonexistent/rdma", f)  # ... a dangling symlink
                    settle()
                    os.unlink(f)
                    with open(f, "w") as fh:          # ... garbage, then empty
                        fh.write("garbage\n")
                    settle()
                    with open(f, "w"):
                        pass
                    settle()
                    with open(f, "w") as fh:          # restored
                        fh.write(orig)
                    if os.geteuid() != 0:
                        os.chmod(f, 0)                # EACCES (root would still read it)
                        settle()
                        os.chmod(f, 0o444)
                    # the whole device vanishes (class link and device directory) and comes back
                    link = os.path.join(ib, "mlx5_0")
                    target = os.readlink(link)
                    os.unlink(link)
                    settle()
                    os.symlink(target, link)
                    moved = dev + ".gone"
                    os.rename(dev, moved)             # class link now dangles
                    settle()
                    os.rename(moved, dev)
                    shutil.copytree(os.path.join(dev, "ports", "1"), os.path.join(d0, "port1"), symlinks=True)
                    shutil.rmtree(os.path.join(dev, "ports", "1"))  # a port vanishes mid-life
                    settle()
                    shutil.move(os.path.join(d0, "port1"), os.path.join(dev, "ports", "1"))  # and is back
                    settle()
                stop.set()
                t.join()
                s = d.scrape()
                after = errors_total(s)
                print(f"\nfaults: {len(statuses)} scrapes during faults, statuses {sorted(set(statuses))}, "
                      f"errors counted {base} -> {after}: "
                      + ", ".join(f"{dict(k)}={v}" for k, v in
                                  series(s, "rdma_exporter_collector_errors_total").items()))
                self.assertTrue(statuses and all(x == 200 for x in statuses), sorted(set(statuses)))
                self.assertGreater(after, base)
                reasons = {dict(k).get("reason") for k in series(s, "rdma_exporter_collector_errors_total")}
                self.assertTrue(reasons & {"not_found", "io_error", "malformed", "invalid_argument"}, reasons)
                self.assertIsNone(d.proc.poll())
                # Other devices were never affected.
                self.assertTrue(any(dict(k).get("device") == "mlx5_1"
                                    for k in series(s, "rdma_port_receive_bytes_total")))
        finally:
            shutil.rmtree(d0, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
