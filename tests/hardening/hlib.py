"""Helpers for the hardening tests: run the real daemon (HTTP or HTTPS, basic auth), stop it by
PID with a chosen signal, test certificates (openssl CLI), bcrypt hashes (libxcrypt through
Python's crypt module), RSS. Stdlib only; loopback only."""
import argparse
import base64
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from exporter_harness import (Exporter, free_port, parse_text, rss_kib, series, stop_process, take_exporter_arg,  # noqa: E402,F401
                              value)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt  # noqa: E402  (libxcrypt; deprecated in 3.11, removed in 3.13)


def args():
    """`--exporter PATH` (first, as every test script takes it) and `--build-dir DIR`."""
    exporter = take_exporter_arg()
    p = argparse.ArgumentParser()
    p.add_argument("--build-dir", default="")
    a, rest = p.parse_known_args()
    sys.argv = [sys.argv[0], *rest]
    a.exporter = exporter
    return a


def bcrypt(password, cost=4):
    return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << cost))


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def make_certs(d):
    """CA, server cert (localhost, 127.0.0.1) and client cert signed by it, plus a foreign CA/client."""
    def ca(name):
        sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", f"{d}/{name}.key", "-out", f"{d}/{name}.crt", "-days", "2", "-subj", f"/CN={name}")

    def leaf(name, ca_name, cn, ext):
        sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", f"{d}/{name}.key", "-out", f"{d}/{name}.csr", "-subj", f"/CN={cn}")
        with open(f"{d}/{name}.ext", "w") as f:
            f.write(ext)
        sh("openssl", "x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/{ca_name}.crt", "-CAkey",
           f"{d}/{ca_name}.key", "-CAcreateserial", "-out", f"{d}/{name}.crt", "-days", "2", "-extfile",
           f"{d}/{name}.ext")
    ca("ca")
    ca("otherca")
    leaf("server", "ca", "localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    leaf("client", "ca", "prometheus", "extendedKeyUsage=clientAuth\n")
    leaf("intruder", "otherca", "intruder", "extendedKeyUsage=clientAuth\n")
    # The certificate a rotation replaces server.crt with (another CA, so that curl tells them apart).
    leaf("rotated", "otherca", "localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")


class Daemon(Exporter):
    """The shared launcher (tests/lib/exporter_harness.py) plus https when cafile is given (with an
    optional client certificate), basic auth, request() that returns error statuses, signals."""

    def __init__(self, binary, *extra, cafile=None, auth=None, env=None, wait=True, client_cert=None, user=None):
        self.ctx = None
        if cafile:
            self.ctx = ssl.create_default_context(cafile=cafile)
            if client_cert:
                self.ctx.load_cert_chain(*client_cert)
        self.auth = auth
        super().__init__(binary, *extra, env=env, wait=wait, scheme="https" if cafile else "http",
                         host="localhost" if cafile else "127.0.0.1", user=user)

    def healthy(self):
        return self.request("/healthz", timeout=2)[0] == 200

    def headers(self, auth=None):
        auth = auth if auth is not None else self.auth
        if not auth:
            return {}
        return {"Authorization": "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()}

    def request(self, path="/metrics", auth=None, timeout=60):
        req = urllib.request.Request(self.url + path, headers=self.headers(auth))
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.ctx) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def scrape(self):
        st, body = self.request()
        if st != 200:
            raise AssertionError(f"scrape answered {st}: {body[:200]}")
        return parse_text(body)[0]

    def log(self):
        return self.read_log()

    def rss_kib(self):
        return rss_kib(self.proc.pid)

    def signal_and_wait(self, sig=signal.SIGTERM, bound=30):
        """Sends sig to our PID; returns (exit code, seconds until exit). Kills after a generous bound."""
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=bound)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"exporter did not exit within {bound} s of signal {sig}")
        return rc, time.monotonic() - t0


def run_to_exit(binary, *extra, bound=30):
    """Runs the exporter expecting it to refuse to start: (exit code, stderr+stdout)."""
    p = subprocess.run([binary, f"--web.listen-address=127.0.0.1:{free_port()}", *extra], capture_output=True,
                       text=True, timeout=bound)
    return p.returncode, p.stdout + p.stderr


def empty_sysfs(d):
    os.makedirs(os.path.join(d, "class", "infiniband"), exist_ok=True)
    return d


def gen_sysfs(d, profile="fixtures"):
    sh(sys.executable, os.path.join(ROOT, "tests", "lib", "sysfs_gen.py"), d, "--profile", profile,
       "--manifest", os.path.join(d, "..", "manifest.json"))
    return d
