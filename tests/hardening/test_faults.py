#!/usr/bin/env python3
"""hardening/faults: sysfs files and whole devices are removed and re-added, and a counter file is
made unreadable in the ways a tmpfs allows without FUSE: replaced by a directory (read() -> EISDIR,
a real read error), by a dangling symlink (ENOENT at open), by garbage or empty content, and
by a file of mode 000 (EACCES). The exporter keeps counter files open between scrapes: a file
replaced in any of these ways is reopened (its directory changed), while a chmod of the file it
already holds open changes nothing, as for any open file. Real EIO from a driver cannot be made on tmpfs; the error path is the same (a
failed read, counted).

The fixture tree has faults of its own (a broken device, `N/A` files): their errors are the
baseline, measured on the same tree with no fault injected. Each injected fault must add exactly
its own error (the collector and reason it causes, once per scrape) to that baseline, and the
errors must fall back to the baseline once it is undone. Then the faults run again while scrapes
run in a loop: every scrape answers 200 with a well-formed text (an exception in that loop fails
the test). As root, the exporter runs as nobody:nogroup, so that chmod 000 stops it."""
import http.client
import os
import shutil
import threading
import time
import unittest

from hlib import Daemon, args, gen_sysfs, parse_text, series
from unprivileged import private_dir

A = args()
EXE = A.exporter
# Root reads a chmod-000 file: an unprivileged exporter is the one a permission error stops.
AS_USER = ("nobody", "nogroup") if os.geteuid() == 0 else None
# The series that the faulted file (mlx5_0 port 1 counters/port_rcv_data) is exported as.
RECEIVE_BYTES = ("rdma_port_receive_bytes_total", frozenset({"device": "mlx5_0", "port": "1"}.items()))
ERROR_FAMILIES = ("rdma_exporter_collector_errors_total", "rdma_exporter_discovery_errors_total")


def error_counts(samples):
    """{(family, labels): count} of the exporter's error counters."""
    return {(name, labels): int(v) for name in ERROR_FAMILIES for labels, v in series(samples, name).items()}


def delta(before, after):
    return {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after)
            if after.get(k, 0) != before.get(k, 0)}


def one_scrape(d):
    """(the errors that one scrape counts in the tree's current state, that scrape's samples)"""
    before = error_counts(d.scrape())
    s = d.scrape()
    return delta(before, error_counts(s)), s


def errors_of_one_scrape(d):
    return one_scrape(d)[0]


def show(errors):
    return ", ".join(f"{name.split('_')[2]}{dict(labels)}+{n}" for (name, labels), n in sorted(
        errors.items(), key=lambda kv: (kv[0][0], sorted(kv[0][1]))))


class CounterFile:
    """One counter file of the tree and the faults that can be made of it; undo() restores it."""

    def __init__(self, path):
        self.path = path
        with open(path) as f:
            self.orig = f.read()
        self.mode = os.stat(path).st_mode & 0o777

    def undo(self):
        if os.path.islink(self.path) or os.path.isfile(self.path):
            os.unlink(self.path)
        elif os.path.isdir(self.path):
            os.rmdir(self.path)
        with open(self.path, "w") as f:
            f.write(self.orig)
        os.chmod(self.path, self.mode)

    def write(self, text):
        os.unlink(self.path)
        with open(self.path, "w") as f:
            f.write(text)

    # name -> (make the fault, the reason the port collector counts for it; None: no error, as a
    # counter the driver does not have is no error)
    def faults(self):
        return {
            "removed": (lambda: os.unlink(self.path), None),
            "a directory": (lambda: (os.unlink(self.path), os.mkdir(self.path)), "other"),  # EISDIR
            "a dangling symlink": (lambda: (os.unlink(self.path), os.symlink("/nonexistent/rdma", self.path)),
                                   "not_found"),
            "garbage": (lambda: self.write("garbage\n"), "malformed"),
            "empty": (lambda: self.write(""), "malformed"),
            "mode 000": (lambda: (self.write(self.orig), os.chmod(self.path, 0)), "permission_denied"),
        }


class Faults(unittest.TestCase):
    def setUp(self):
        self.d0 = private_dir("hard-faults-")  # the unprivileged exporter reads the tree
        self.sysfs = gen_sysfs(os.path.join(self.d0, "sys"))
        self.ib = os.path.join(self.sysfs, "class", "infiniband")
        self.dev = os.path.realpath(os.path.join(self.ib, "mlx5_0"))
        self.file = CounterFile(os.path.join(self.dev, "ports", "1", "counters", "port_rcv_data"))

    def tearDown(self):
        shutil.rmtree(self.d0, ignore_errors=True)

    def test_each_fault_adds_its_error_to_the_baseline(self):
        with Daemon(EXE, f"--path.sysfs={self.sysfs}", user=AS_USER) as d:
            base = errors_of_one_scrape(d)
            print(f"\nbaseline (no fault) per scrape: {show(base) or 'none'}")
            self.assertEqual(errors_of_one_scrape(d), base, "the baseline is the same on every scrape")
            for name, (make, reason) in self.file.faults().items():
                with self.subTest(fault=name):
                    make()
                    try:
                        got, s = one_scrape(d)
                    finally:
                        self.file.undo()
                    print(f"port_rcv_data {name}: {show(got)}")
                    want = dict(base)
                    if reason:
                        key = ("rdma_exporter_collector_errors_total",
                               frozenset({"collector": "port", "reason": reason}.items()))
                        want[key] = want.get(key, 0) + 1
                    self.assertEqual(got, want, f"{name}: the baseline and one {reason} error of the port collector")
                    self.assertNotIn(RECEIVE_BYTES, s, f"{name}: no value exported for the file")
                    got, s = one_scrape(d)
                    self.assertEqual(got, base, f"{name} undone: the baseline again")
                    self.assertIn(RECEIVE_BYTES, s, f"{name} undone: the value is back")
            self.assertIsNone(d.proc.poll())

    def test_scrapes_answer_while_files_and_devices_come_and_go(self):
        with Daemon(EXE, f"--path.sysfs={self.sysfs}", user=AS_USER) as d:
            stop = threading.Event()
            statuses, failures = [], []

            def loop():
                try:
                    while not stop.is_set():
                        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
                        c.request("GET", "/metrics")
                        r = c.getresponse()
                        body = r.read().decode()
                        if r.status == 200:
                            parse_text(body)  # well-formed every time
                        statuses.append(r.status)
                        c.close()
                except Exception as e:  # noqa: BLE001 - handed to the test thread, which fails
                    failures.append(repr(e))
            t = threading.Thread(target=loop)
            t.start()

            def settle(n=3):  # let a few scrapes see the current state
                start = len(statuses)
                while len(statuses) < start + n and t.is_alive():
                    time.sleep(0.005)

            try:
                for _ in range(3):
                    for make, _reason in self.file.faults().values():
                        make()
                        settle()
                        self.file.undo()
                    # the whole device vanishes (class link and device directory) and comes back
                    link = os.path.join(self.ib, "mlx5_0")
                    target = os.readlink(link)
                    os.unlink(link)
                    settle()
                    os.symlink(target, link)
                    moved = self.dev + ".gone"
                    os.rename(self.dev, moved)  # class link now dangles
                    settle()
                    os.rename(moved, self.dev)
                    port1 = os.path.join(self.dev, "ports", "1")
                    shutil.copytree(port1, os.path.join(self.d0, "port1"), symlinks=True)
                    shutil.rmtree(port1)  # a port vanishes mid-life
                    settle()
                    shutil.move(os.path.join(self.d0, "port1"), port1)  # and is back
                    settle()
            finally:
                stop.set()
                t.join()
            print(f"\n{len(statuses)} scrapes during faults, statuses {sorted(set(statuses))}")
            self.assertEqual(failures, [], "the scrape loop failed")
            self.assertTrue(statuses and all(x == 200 for x in statuses), sorted(set(statuses)))
            self.assertIsNone(d.proc.poll())
            # Everything is back: mlx5_0's counters are exported again, next to mlx5_1's.
            s = d.scrape()
            for dev in ("mlx5_0", "mlx5_1"):
                self.assertTrue(any(dict(k).get("device") == dev for k in series(s, "rdma_port_receive_bytes_total")),
                                dev)


if __name__ == "__main__":
    unittest.main(verbosity=2)
