#!/usr/bin/env python3
"""prometheus: Debian's prometheus scrapes the real exporter over TLS (verifying our CA)
with basic auth, on loopback, with a temporary data directory; stopped by PID. A second job with a
wrong password must show up == 0 (the 401 is real)."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

from hlib import Daemon, args, bcrypt, free_port, gen_sysfs, make_certs, stop_process

A = args()
EXE = A.exporter
PROM = shutil.which("prometheus") or "prometheus"  # the unpacked one ctest puts on PATH


class PrometheusTls(unittest.TestCase):
    def test_scrape_over_tls_with_basic_auth(self):
        self.assertTrue(os.path.exists(PROM), "Debian prometheus is not installed (scripts/install-deps.sh)")
        d0 = tempfile.mkdtemp(prefix="hard-prom-")
        prom = None
        log = None
        try:
            make_certs(d0)
            sysfs = gen_sysfs(os.path.join(d0, "sys"))
            with open(os.path.join(d0, "web.yml"), "w") as f:
                f.write("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                        f"basic_auth_users:\n  prometheus: '{bcrypt('s3cret', 10)}'\n")
            with Daemon(EXE, f"--web.config.file={d0}/web.yml", f"--path.sysfs={sysfs}",
                        cafile=f"{d0}/ca.crt", auth=("prometheus", "s3cret")) as d:
                pport = free_port()
                with open(f"{d0}/prometheus.yml", "w") as f:
                    f.write(f"""global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: rdma
    scheme: https
    tls_config: {{ca_file: {d0}/ca.crt, server_name: localhost}}
    basic_auth: {{username: prometheus, password: s3cret}}
    static_configs: [{{targets: ['127.0.0.1:{d.port}']}}]
  - job_name: rdma_wrong_password
    scheme: https
    tls_config: {{ca_file: {d0}/ca.crt, server_name: localhost}}
    basic_auth: {{username: prometheus, password: wrong}}
    static_configs: [{{targets: ['127.0.0.1:{d.port}']}}]
""")
                subprocess.run(["promtool", "check", "config", f"{d0}/prometheus.yml"], check=True,
                               capture_output=True)
                log = open(f"{d0}/prometheus.log", "w")
                prom = subprocess.Popen([PROM, f"--config.file={d0}/prometheus.yml", f"--storage.tsdb.path={d0}/data",
                                         f"--web.listen-address=127.0.0.1:{pport}", "--log.level=warn"],
                                        stdout=log, stderr=subprocess.STDOUT)

                def query(q):
                    url = f"http://127.0.0.1:{pport}/api/v1/query?" + urllib.parse.urlencode({"query": q})
                    with urllib.request.urlopen(url, timeout=10) as r:
                        return json.load(r)["data"]["result"]

                got = {}
                for _ in range(600):  # first sample after ~6 s (service discovery batches every 5 s)
                    try:
                        up = {r["metric"]["job"]: r["value"][1] for r in query("up")}
                        if len(up) == 2:
                            got = up
                            break
                    except OSError:
                        pass
                    time.sleep(0.1)
                self.assertEqual(got, {"rdma": "1", "rdma_wrong_password": "0"}, open(f"{d0}/prometheus.log").read())
                res = query('rdma_port_receive_bytes_total{job="rdma",device="mlx5_0",port="1"}')
                self.assertEqual(len(res), 1)
                info = query('rdma_exporter_build_info{job="rdma"}')
                self.assertEqual(len(info), 1)
                unauth = query('rdma_exporter_http_requests_rejected_total{job="rdma",reason="unauthorized"}')
                print(f"\nprometheus over TLS+basic auth: up={got}, unauthorized counted "
                      f"{unauth[0]['value'][1] if unauth else '?'}")
                self.assertIsNone(d.proc.poll())
        finally:
            if prom is not None:
                stop_process(prom, grace=30)
            if log is not None:
                log.close()
            shutil.rmtree(d0, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
