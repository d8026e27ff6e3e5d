#!/usr/bin/env python3
"""hardening: in-process TLS (through exporter/tls's libssl shim) and basic auth, checked with
curl (certificate verification, 401 without / 200 with credentials, client certificates), bad web
configs (clear error, non-zero exit), and the installed layout (DT_RPATH $ORIGIN/../lib/rdma_exporter)."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from hlib import Daemon, args, bcrypt, empty_sysfs, free_port, make_certs, run_to_exit, parse_text, value

A = args()
EXE = A.exporter


def curl(*a):
    p = subprocess.run(["curl", "-sS", "-o", "/dev/stdout", "-w", "\n%{http_code}", "--max-time", "30", *a],
                       capture_output=True, text=True)
    body, _, code = p.stdout.rpartition("\n")
    return p.returncode, int(code or 0), body, p.stderr


class TlsAuth(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = tempfile.mkdtemp(prefix="hard-tls-")
        make_certs(cls.d)
        cls.sys = empty_sysfs(os.path.join(cls.d, "sys"))
        cls.hash = bcrypt("s3cret")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.d, ignore_errors=True)

    def web(self, text, name="web.yml"):
        p = os.path.join(self.d, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    def tls_auth_config(self):
        return self.web("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                        f"basic_auth_users:\n  prometheus: '{self.hash}'\n")

    def test_curl_tls_verify_and_basic_auth(self):
        cfg = self.tls_auth_config()
        ca = os.path.join(self.d, "ca.crt")
        with Daemon(EXE, f"--web.config.file={cfg}", f"--path.sysfs={self.sys}", cafile=ca,
                    auth=("prometheus", "s3cret")) as d:
            url = f"https://localhost:{d.port}"
            rc, code, body, _ = curl("--cacert", ca, url + "/metrics")
            self.assertEqual((rc, code), (0, 401))
            rc, code, _, _ = curl("--cacert", ca, "-u", "prometheus:wrong", url + "/metrics")
            self.assertEqual(code, 401)
            rc, code, _, _ = curl("--cacert", ca, "-u", "nobody:s3cret", url + "/")
            self.assertEqual(code, 401)
            # The kubelet's httpGet probes carry no credentials: /healthz answers them, and says
            # nothing else; / and /metrics stay behind auth.
            rc, code, body, _ = curl("--cacert", ca, url + "/healthz")
            self.assertEqual((rc, code, body), (0, 200, "ok\n"))
            rc, code, _, _ = curl("--cacert", ca, url + "/")
            self.assertEqual(code, 401)
            for _ in range(20):  # many TLS connections: the civetweb/OpenSSL 3 crash would end the process
                rc, code, body, err = curl("--cacert", ca, "-u", "prometheus:s3cret", url + "/metrics")
                self.assertEqual((rc, code), (0, 200), err)
            samples = parse_text(body)[0]
            self.assertEqual(value(samples, "rdma_exporter_http_requests_rejected_total", reason="unauthorized"), "4")
            rc, code, _, _ = curl("--cacert", ca, "-u", "prometheus:s3cret", "--compressed", url + "/metrics")
            self.assertEqual(code, 200)
            rc, code, _, err = curl("--tlsv1.3", "--cacert", ca, "-u", "prometheus:s3cret", url + "/healthz")
            self.assertEqual((rc, code), (0, 200), err)
            # Verification really happens: no CA -> curl refuses (60); wrong CA -> refuses.
            rc, _, _, _ = curl(url + "/healthz")
            self.assertEqual(rc, 60)
            rc, _, _, _ = curl("--cacert", os.path.join(self.d, "otherca.crt"), url + "/healthz")
            self.assertEqual(rc, 60)
            # Plain HTTP on the TLS port gets no answer; TLS 1.1 is refused (minimum TLS 1.2).
            rc, code, _, _ = curl(f"http://127.0.0.1:{d.port}/metrics")
            self.assertNotEqual(code, 200)
            rc, _, _, _ = curl("--cacert", ca, "--tls-max", "1.1", url + "/healthz")
            self.assertNotEqual(rc, 0)
            self.assertIsNone(d.proc.poll(), "exporter died: " + d.log())

    def test_basic_auth_on_every_path(self):
        """Every path but /healthz asks for credentials: the collectors' paths (/probe, /pma,
        /pma/targets) as well as /metrics and the landing page; with them, each answers its own way."""
        secret = os.path.join(self.d, "prober.secret")
        with open(secret, "w") as f:
            f.write("right\n")
        cfg = os.path.join(self.d, "paths.yml")
        with open(cfg, "w") as f:
            f.write(f"collectors:\n  prober:\n    enabled: true\n    listen_address: \"127.0.0.1:{free_port()}\"\n"
                    f"    secret_file: {secret}\n    probe_modules:\n"
                    "      write_lat: {kind: write_lat, size: 2, iterations: 10}\n"
                    "  pma:\n    fabric: true\n    fabric_snapshot: false\n")
        web = self.web(f"basic_auth_users:\n  prometheus: '{self.hash}'\n", "auth-only.yml")
        with Daemon(EXE, f"--web.config.file={web}", f"--config.file={cfg}", f"--path.sysfs={self.sys}",
                    auth=("prometheus", "s3cret")) as d:
            paths = ["/metrics", "/", "/probe?target=127.0.0.1:1&module=write_lat", "/pma?target=0x1", "/pma/targets"]
            for path in paths:
                self.assertEqual(d.request(path, auth=())[0], 401, path)  # no Authorization header
                self.assertEqual(d.request(path, auth=("prometheus", "wrong"))[0], 401, path)
            self.assertEqual(d.request("/healthz", auth=())[0], 200)
            # With credentials every path gets past the door: its own answer, never 401 or 404.
            st, body = d.request("/pma/targets")
            self.assertEqual(st, 200, body)
            self.assertEqual(json.loads(body), [])  # no fabric here: no targets
            st, body = d.request("/pma?target=0x1")
            self.assertIn(st, (404, 503), body)  # not a node of a discovery
            self.assertIn("target", body)
            st, body = d.request("/probe?target=127.0.0.1:1&module=write_lat")
            self.assertNotIn(st, (401, 404), body)
            self.assertEqual(d.request("/metrics")[0], 200)

    def test_shim_is_what_civetweb_loads(self):
        """LD_DEBUG shows civetweb's dlopen("libssl.so") resolving to the build's shim via DT_RPATH."""
        cfg = self.tls_auth_config()
        trace = os.path.join(self.d, "ld")
        with Daemon(EXE, f"--web.config.file={cfg}", f"--path.sysfs={self.sys}", cafile=os.path.join(self.d, "ca.crt"),
                    auth=("prometheus", "s3cret"), env={"LD_DEBUG": "libs", "LD_DEBUG_OUTPUT": trace}) as d:
            self.assertEqual(d.request("/healthz")[0], 200)
            pid = d.proc.pid
        with open(f"{trace}.{pid}") as f:
            text = f.read()
        loaded = [l for l in text.splitlines() if "calling init:" in l and "/lib/rdma_exporter/" in l]
        self.assertTrue(any(l.rstrip().endswith("/lib/rdma_exporter/libssl.so") for l in loaded), loaded)
        self.assertTrue(any(l.rstrip().endswith("/lib/rdma_exporter/libcrypto.so") for l in loaded), loaded)

    def test_client_certificates(self):
        cfg = self.web("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                       "  client_ca_file: ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n", "mtls.yml")
        ca = os.path.join(self.d, "ca.crt")
        cc = (os.path.join(self.d, "client.crt"), os.path.join(self.d, "client.key"))
        with Daemon(EXE, f"--web.config.file={cfg}", f"--path.sysfs={self.sys}", cafile=ca, client_cert=cc) as d:
            url = f"https://localhost:{d.port}/metrics"
            rc, code, _, err = curl("--cacert", ca, "--cert", cc[0], "--key", cc[1], url)
            self.assertEqual((rc, code), (0, 200), err)
            rc, code, _, _ = curl("--cacert", ca, url)
            self.assertNotEqual(code, 200)
            rc, code, _, _ = curl("--cacert", ca, "--cert", f"{self.d}/intruder.crt", "--key", f"{self.d}/intruder.key",
                                  url)
            self.assertNotEqual(code, 200)
            self.assertIsNone(d.proc.poll())

    def test_sighup_rotates_certificate_and_users(self):
        """SIGHUP re-reads the web config: new certificate and users for new connections; a bad
        one (broken key, or TLS switched off) keeps the running one and counts a failed reload."""
        for ext in ("crt", "key"):
            shutil.copy(os.path.join(self.d, f"server.{ext}"), os.path.join(self.d, f"live.{ext}"))
        live = lambda users_hash, tls=True: self.web(  # noqa: E731
            ("tls_server_config:\n  cert_file: live.crt\n  key_file: live.key\n" if tls else "")
            + f"basic_auth_users:\n  prometheus: '{users_hash}'\n", "live.yml")
        cfg = live(self.hash)
        ca, other = os.path.join(self.d, "ca.crt"), os.path.join(self.d, "otherca.crt")
        with Daemon(EXE, f"--web.config.file={cfg}", f"--path.sysfs={self.sys}", cafile=ca,
                    auth=("prometheus", "s3cret")) as d:
            url = f"https://localhost:{d.port}/metrics"
            self.assertEqual(curl("--cacert", ca, "-u", "prometheus:s3cret", url)[:2], (0, 200))
            self.assertEqual(curl("--cacert", other, "-u", "prometheus:s3cret", url)[0], 60)

            def reload_and_wait(cacert, user, want_result):
                d.proc.send_signal(signal.SIGHUP)
                deadline = time.monotonic() + 20
                while True:
                    rc, code, body, err = curl("--cacert", cacert, "-u", user, url)
                    if rc == 0 and code == 200:
                        got = value(parse_text(body)[0], "rdma_exporter_config_reloads_total", result=want_result)
                        if got is not None and int(got) >= 1:
                            return parse_text(body)[0]
                    self.assertLess(time.monotonic(), deadline, f"no reload ({want_result}): {rc} {code} {err}")
                    time.sleep(0.1)

            # Rotate: another CA's certificate, another password.
            for ext in ("crt", "key"):
                shutil.copy(os.path.join(self.d, f"rotated.{ext}"), os.path.join(self.d, f"live.{ext}"))
            live(bcrypt("n3w"))
            reload_and_wait(other, "prometheus:n3w", "success")
            self.assertEqual(curl("--cacert", ca, "-u", "prometheus:n3w", url)[0], 60, "old certificate still served")
            self.assertEqual(curl("--cacert", other, "-u", "prometheus:s3cret", url)[1], 401, "old password accepted")
            # A broken key, then TLS switched off: both refused, the rotated setup keeps serving.
            with open(os.path.join(self.d, "live.key"), "w") as f:
                f.write("not a key\n")
            samples = reload_and_wait(other, "prometheus:n3w", "failure")
            self.assertEqual(value(samples, "rdma_exporter_config_last_reload_successful"), "0")
            live(bcrypt("n3w"), tls=False)
            d.proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 20
            while int(value(parse_text(curl("--cacert", other, "-u", "prometheus:n3w", url)[2])[0],
                            "rdma_exporter_config_reloads_total", result="failure")) < 2:
                self.assertLess(time.monotonic(), deadline, "TLS switch-off not refused")
                time.sleep(0.1)
            self.assertIn("switching TLS on or off needs a restart", d.log())
            self.assertIsNone(d.proc.poll(), "exporter died: " + d.log())

    def test_bad_web_configs_exit_non_zero_with_a_clear_error(self):
        cases = {
            "missing.yml": (None, "cannot open web config file"),
            "yaml.yml": ("tls_server_config: [\n", "invalid YAML"),
            "plain.yml": ("basic_auth_users:\n  prometheus: s3cret\n", "not a bcrypt hash"),
            "nokey.yml": ("tls_server_config:\n  cert_file: server.crt\n", "key_file is required"),
            "nofile.yml": ("tls_server_config:\n  cert_file: server.crt\n  key_file: gone.key\n",
                           "key_file: cannot read"),
            "unknown.yml": ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  ciphers: x\n",
                            "unknown key tls_server_config.ciphers"),
            # Parses, but the key does not belong to the certificate: refused when TLS is set up.
            "mismatch.yml": ("tls_server_config:\n  cert_file: server.crt\n  key_file: client.key\n",
                             "key_file"),
            "notpem.yml": ("tls_server_config:\n  cert_file: web.yml\n  key_file: server.key\n",
                           "cert_file"),
        }
        for name, (text, want) in cases.items():
            with self.subTest(name):
                path = os.path.join(self.d, name)
                if text is not None:
                    self.web(text, name)
                rc, out = run_to_exit(EXE, f"--web.config.file={path}", f"--path.sysfs={self.sys}")
                self.assertNotEqual(rc, 0, out)
                self.assertIn(want, out)
                self.assertIn(name, out)

    def test_installed_layout_serves_tls(self):
        """cmake --install into a temporary prefix: the installed exe finds the installed shim."""
        self.assertTrue(A.build_dir, "--build-dir is required")
        prefix = os.path.join(self.d, "prefix")
        p = subprocess.run(["cmake", "--install", A.build_dir, "--prefix", prefix], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        exe = os.path.join(prefix, "bin", "rdma_exporter")
        dyn = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True).stdout
        self.assertIn("(RPATH)", dyn)
        self.assertIn("[$ORIGIN/../lib/rdma_exporter]", dyn)
        self.assertNotIn(A.build_dir, dyn)
        for lib in ("libssl.so", "libcrypto.so", "librdma_exporter_openssl.so"):
            self.assertTrue(os.path.isfile(os.path.join(prefix, "lib", "rdma_exporter", lib)), lib)
        cfg = self.tls_auth_config()
        ca = os.path.join(self.d, "ca.crt")
        with Daemon(exe, f"--web.config.file={cfg}", f"--path.sysfs={self.sys}", cafile=ca,
                    auth=("prometheus", "s3cret")) as d:
            rc, code, _, err = curl("--cacert", ca, "-u", "prometheus:s3cret", f"https://localhost:{d.port}/metrics")
            self.assertEqual((rc, code), (0, 200), err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
