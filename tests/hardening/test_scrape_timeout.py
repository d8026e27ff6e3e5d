#!/usr/bin/env python3
"""hardening: the scrape timeout follows the scraper. A counter file of the generated sysfs tree is
a FIFO with no writer, so the port collector blocks in open() the way a hung firmware read does;
the scrape still answers, within the scraper's X-Prometheus-Scrape-Timeout-Seconds less
--web.timeout-offset, capped by --scrape.timeout. The timeouts are read back from the exporter's
own self-metrics (the time it gave the collectors), never from a clock."""
import os
import shutil
import tempfile
import unittest

from hlib import Daemon, args, gen_sysfs, parse_text, value

A = args()
EXE = A.exporter


class ScrapeTimeout(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp(prefix="hard-timeout-")
        self.sys = gen_sysfs(os.path.join(self.d, "sys"))
        self.fifo = os.path.join(os.path.realpath(os.path.join(self.sys, "class", "infiniband", "mlx5_0")),
                                 "ports", "1", "counters", "symbol_error")

    def tearDown(self):
        shutil.rmtree(self.d, ignore_errors=True)

    def hang(self):
        os.unlink(self.fifo)
        os.mkfifo(self.fifo)

    def release(self):
        """Lets the reader blocked in open() finish, then puts a regular file back."""
        tmp = self.fifo + ".tmp"
        with open(tmp, "w") as f:
            f.write("3\n")
        fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)  # the blocked reader makes this succeed
        os.write(fd, b"3\n")
        os.close(fd)
        os.replace(tmp, self.fifo)

    def scrape(self, d, header=None):
        status, _, body = d.get(headers={"X-Prometheus-Scrape-Timeout-Seconds": header} if header else None)
        self.assertEqual(status, 200)
        return parse_text(body)[0]

    def test_header_less_offset_capped_by_scrape_timeout(self):
        with Daemon(EXE, f"--path.sysfs={self.sys}", "--scrape.timeout=3s", "--web.timeout-offset=500ms") as d:
            # No slow collector: what each request gets.
            for header, want in [("2", "1.5"), ("2.25", "1.75"), ("100", "3"), ("banana", "3"), ("-1", "3"),
                                 (None, "3"), ("0.3", "0.3")]:
                s = self.scrape(d, header)
                self.assertEqual(value(s, "rdma_exporter_scrape_timeout_seconds"), want, header)
                self.assertEqual(value(s, "rdma_exporter_collector_success", collector="port"), "1", header)

            # A hung read: the port collector fails after the scraper's budget, the rest is served.
            self.hang()
            s = self.scrape(d, "2")
            self.assertEqual(value(s, "rdma_exporter_scrape_timeout_seconds"), "1.5")
            self.assertEqual(value(s, "rdma_exporter_collector_success", collector="port"), "0")
            self.assertEqual(value(s, "rdma_exporter_collector_scrape_duration_seconds", collector="port"), "1.5")
            self.assertEqual(value(s, "rdma_exporter_collector_errors_total", collector="port", reason="timeout"), "1")
            self.assertEqual(value(s, "rdma_exporter_collector_success", collector="hw_counters"), "1")
            self.assertIn(("rdma_icrc_errors_total", frozenset({"device": "mlx5_1", "port": "1"}.items())), s)
            self.assertNotIn(("rdma_port_state", frozenset({"device": "mlx5_1", "port": "1"}.items())), s)
            self.release()

            # Without a header (or with a longer one) the cap applies to the hung read.
            self.hang()
            for _ in range(10):  # the released run may still be finishing: a skipped scrape or two
                s = self.scrape(d, "100")
                if value(s, "rdma_exporter_collector_errors_total", collector="port", reason="timeout") == "2":
                    break
            else:
                self.fail("the hung read never timed out under the --scrape.timeout cap")
            self.assertEqual(value(s, "rdma_exporter_collector_scrape_duration_seconds", collector="port"), "3")
            self.release()
            self.assertIsNone(d.proc.poll(), "exporter died: " + d.log())


if __name__ == "__main__":
    unittest.main()
