#!/usr/bin/env python3
"""/probe access (docs/probe.md, "Access"), with the real exporter on loopback and no RDMA device:
refused (403) without credentials, and no connection reaches a TCP listener standing in for the
target; with basic auth or a verified client certificate, an unknown target or another port of a
peer refused; with probe_allow_unauthenticated, allowed targets run (no local port here) and others
are refused; a duration module under a short scrape timeout fails without touching the target;
rdma_probe_requests_total survives a SIGHUP reload that rebuilds the prober; /prober/traces follows
the same access rule; a target name is refused unless the config names it, and never resolved then.

usage: test_probe_access.py --exporter PATH [unittest args]"""
import json
import os
import shutil
import signal
import socket
import ssl
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hardening"))
from hlib import Daemon, args, bcrypt, empty_sysfs, free_port, make_certs, parse_text, value  # noqa: E402

A = args()
EXE = A.exporter


class Listener:
    """A TCP listener on 127.0.0.1 that accepts, counts and never answers: the target a probe must
    not reach (or, when it may, one that holds the handshake)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.held = []
        self.stopping = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.accepted += 1
            self.held.append(conn)

    def close(self):
        self.stopping = True
        self.thread.join(5)
        for c in self.held:
            c.close()
        self.sock.close()


def probe(d, query, auth=None, headers=None):
    """GET /probe?query -> (status, body); HTTP errors are answers too."""
    h = dict(d.headers(auth))
    h.update(headers or {})
    req = urllib.request.Request(d.url + "/probe?" + query, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=60, context=d.ctx) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def failure_reason(body):
    for (name, labels), _ in parse_text(body)[0].items():
        if name == "rdma_probe_failure_info":
            return dict(labels)["reason"]
    return None


class ProbeAccess(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = tempfile.mkdtemp(prefix="probe-access-")
        make_certs(cls.d)
        cls.sys = empty_sysfs(os.path.join(cls.d, "sys"))
        cls.secret = os.path.join(cls.d, "secret")
        with open(cls.secret, "w") as f:
            f.write("s3cret-mesh\n")
        cls.hash = bcrypt("s3cret")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.d, ignore_errors=True)

    def setUp(self):
        self.peer = Listener()   # a known peer's "responder"
        self.other = Listener()  # another service: not a peer
        self.addCleanup(self.peer.close)
        self.addCleanup(self.other.close)

    def write(self, name, text):
        p = os.path.join(self.d, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    def config(self, extra="", modules=""):
        return self.write("cfg.yml", f"""collectors:
  prober:
    enabled: true
    secret_file: {self.secret}
    listen_address: "127.0.0.1:{free_port()}"
    peers:
      - {{address: 127.0.0.1, tcp_port: {self.peer.port}, name: peer-one}}
{extra}    probe_modules:
      lat: {{kind: write_lat, size: 2, iterations: 10, timeout: 5s}}
      long: {{kind: write_bw, size: 4096, qps: 1, duration: 3s, tx_depth: 1}}
{modules}""")

    def daemon(self, cfg, *extra, **kw):
        return Daemon(EXE, f"--config.file={cfg}", f"--path.sysfs={self.sys}", "--log.level=debug", *extra, **kw)

    def assert_untouched(self):
        time.sleep(0.2)  # a connection the exporter opened would have been accepted by now
        self.assertEqual((self.peer.accepted, self.other.accepted), (0, 0), "a refused probe connected to a target")

    def test_anonymous_refused_without_a_connection(self):
        with self.daemon(self.config()) as d:
            for target in (f"127.0.0.1:{self.peer.port}", f"127.0.0.1:{self.other.port}", "no-such-host.invalid"):
                st, body = probe(d, f"module=lat&target={target}")
                self.assertEqual(st, 403, body)
                self.assertIn("basic auth or a verified client certificate", body)
            st, _ = probe(d, "module=nope&target=x")
            self.assertEqual(st, 403)
            self.assert_untouched()
            s = d.scrape()
            self.assertEqual(value(s, "rdma_probe_requests_total", module="lat", result="unauthenticated"), "3")
            self.assertEqual(value(s, "rdma_probe_requests_total", module="", result="unauthenticated"), "1")

    def test_basic_auth_limits_targets(self):
        web = self.write("web.yml", f"basic_auth_users:\n  prometheus: '{self.hash}'\n")
        with self.daemon(self.config(), f"--web.config.file={web}", auth=("prometheus", "s3cret")) as d:
            st, _ = probe(d, f"module=lat&target=127.0.0.1:{self.peer.port}", auth=("", ""))
            self.assertEqual(st, 401)  # the server's basic auth comes first
            for target in (f"127.0.0.1:{self.other.port}",  # another port of a peer's address
                           f"127.0.0.2:{self.peer.port}",   # another address at the peer's port
                           "127.0.0.1"):                    # the default responder port: not this peer's
                st, body = probe(d, f"module=lat&target={target}")
                self.assertEqual(st, 403, target)
                self.assertIn("target is neither a known peer", body)
            self.assert_untouched()
            # The peer itself: the probe runs and fails here for want of a local RDMA port.
            st, body = probe(d, f"module=lat&target=127.0.0.1:{self.peer.port}")
            self.assertEqual(st, 200, body)
            self.assertEqual(failure_reason(body), "no_local_port")
            # A duration module that the scraper's timeout cannot fit fails before any connection.
            st, body = probe(d, f"module=long&target=127.0.0.1:{self.peer.port}",
                             headers={"X-Prometheus-Scrape-Timeout-Seconds": "2"})
            self.assertEqual((st, failure_reason(body)), (200, "scrape_timeout_too_short"), body)
            # A request that cannot run is 400 with one line of reason (exporter/query.h, as
            # blackbox_exporter); before this convention it was 200 with probe_success 0.
            for query, reason in (("module=nope&target=127.0.0.1", "unknown module `nope`"),
                                  (f"module=lat&target=127.0.0.1:{self.peer.port}&debug=1", "unknown parameter `debug`"),
                                  ("module=lat&module=lat&target=127.0.0.1", "parameter `module` given twice"),
                                  ("module=lat&target=%5B::1", "is not host, host:port")):
                st, body = probe(d, query)
                self.assertEqual(st, 400, query)
                self.assertIn(reason, body)
                self.assertEqual(body.count("\n"), 1, body)
            self.assert_untouched()
            s = d.scrape()
            self.assertEqual(value(s, "rdma_probe_requests_total", module="", result="unknown_module"), "1")
            self.assertEqual(value(s, "rdma_probe_requests_total", module="", result="bad_request"), "3")
            self.assertEqual(value(s, "rdma_probe_requests_total", module="lat", result="target_not_allowed"), "3")
            self.assertEqual(value(s, "rdma_probe_requests_total", module="lat", result="failure"), "1")
            self.assertEqual(value(s, "rdma_probe_requests_total", module="long", result="failure"), "1")

    def test_traces_endpoint_needs_credentials(self):
        """/prober/traces (docs/prober.md, Path tracing): the same rule as /probe; JSON; trace: false says so."""
        def traces(d, auth=None):
            req = urllib.request.Request(d.url + "/prober/traces", headers=dict(d.headers(auth)))
            try:
                with urllib.request.urlopen(req, timeout=30, context=d.ctx) as r:
                    return r.status, r.headers.get("Content-Type"), r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, e.headers.get("Content-Type"), e.read().decode()
        with self.daemon(self.config()) as d:
            st, _, body = traces(d)
            self.assertEqual(st, 403, body)
            self.assertIn("basic auth or a verified client certificate", body)
        web = self.write("web.yml", f"basic_auth_users:\n  prometheus: '{self.hash}'\n")
        with self.daemon(self.config(), f"--web.config.file={web}", auth=("prometheus", "s3cret")) as d:
            st, ctype, body = traces(d)
            self.assertEqual((st, ctype), (200, "application/json"), body)
            doc = json.loads(body)
            self.assertEqual(doc, {"tracing": True, "flows": [], "truncated": False})  # no RDMA device here
        with self.daemon(self.config("    trace: false\n"), f"--web.config.file={web}", auth=("prometheus", "s3cret")) as d:
            self.assertFalse(json.loads(traces(d)[2])["tracing"])

    def test_verified_client_certificate_authenticates(self):
        ca = os.path.join(self.d, "ca.crt")
        cc = (os.path.join(self.d, "client.crt"), os.path.join(self.d, "client.key"))
        tls = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: ca.crt\n"
        verified = self.write("mtls.yml", tls + "  client_auth_type: RequireAndVerifyClientCert\n")
        with self.daemon(self.config(), f"--web.config.file={verified}", cafile=ca, client_cert=cc) as d:
            st, body = probe(d, f"module=lat&target=127.0.0.1:{self.peer.port}")
            self.assertEqual((st, failure_reason(body)), (200, "no_local_port"), body)
            st, _ = probe(d, f"module=lat&target=127.0.0.1:{self.other.port}")
            self.assertEqual(st, 403)
        # A certificate that is only requested proves nothing: anonymous.
        requested = self.write("req.yml", tls + "  client_auth_type: RequestClientCert\n")
        intruder = (os.path.join(self.d, "intruder.crt"), os.path.join(self.d, "intruder.key"))
        with self.daemon(self.config(), f"--web.config.file={requested}", cafile=ca, client_cert=intruder) as d:
            st, body = probe(d, f"module=lat&target=127.0.0.1:{self.peer.port}")
            self.assertEqual(st, 403, body)
        self.assert_untouched()

    def test_allow_unauthenticated_keeps_the_target_limits(self):
        extra = (f"    probe_allow_unauthenticated: true\n    probe_target_cidrs: [127.0.0.0/8]\n"
                 f"    probe_target_ports: [{self.peer.port}]\n")
        with self.daemon(self.config(extra)) as d:
            for target in (f"127.0.0.1:{self.peer.port}", f"127.0.0.9:{self.peer.port}"):  # a peer, a CIDR address
                st, body = probe(d, f"module=lat&target={target}")
                self.assertEqual((st, failure_reason(body)), (200, "no_local_port"), body)
            for target in (f"127.0.0.9:{self.other.port}", f"10.255.255.1:{self.peer.port}"):
                st, body = probe(d, f"module=lat&target={target}")
                self.assertEqual(st, 403, target)
            self.assert_untouched()

    def test_target_names_only_from_the_config_and_never_resolved_otherwise(self):
        """A name the prober's config does not give is refused before any lookup (no DNS oracle, no
        log line above debug per request); a static peer's name maps to its configured address
        without a lookup. Every name here would fail or go elsewhere in the machine's resolver."""
        web = self.write("web.yml", f"basic_auth_users:\n  prometheus: '{self.hash}'\n")
        allow = "    probe_allow_unauthenticated: true\n    probe_target_cidrs: [127.0.0.0/8]\n"
        for extra, auth, args in (("", ("prometheus", "s3cret"), [f"--web.config.file={web}"]), (allow, None, [])):
            with self.daemon(self.config(extra), *args, auth=auth) as d:
                for name in ("no-such-host.invalid", "localhost", "PEER-TWO", "127.0.0.1.nip.io"):
                    st, body = probe(d, f"module=lat&target={name}:{self.peer.port}")
                    self.assertEqual(st, 403, name)
                    self.assertIn("target name is not a peer's name or address", body)
                # The peer's name (any case): its address, no lookup; the probe runs (and fails here
                # for want of a local RDMA port).
                for name in ("peer-one", "Peer-One"):
                    st, body = probe(d, f"module=lat&target={name}:{self.peer.port}")
                    self.assertEqual((st, failure_reason(body)), (200, "no_local_port"), body)
                self.assertEqual(value(d.scrape(), "rdma_probe_requests_total", module="lat", result="target_not_allowed"), "4")
                log = d.log()
                self.assertNotIn("cannot resolve", log)
                for line in log.splitlines():
                    if "no-such-host" in line or "nip.io" in line:
                        self.assertIn(" level=debug ", line, line)
            self.assertEqual((self.other.accepted), 0)

    def test_reload_keeps_the_request_counts(self):
        cfg = self.config()
        with self.daemon(cfg) as d:
            for _ in range(2):
                self.assertEqual(probe(d, f"module=lat&target=127.0.0.1:{self.peer.port}")[0], 403)
            before = d.scrape()
            self.assertEqual(value(before, "rdma_probe_requests_total", module="lat", result="unauthenticated"), "2")
            # Another module: the prober's settings change, so the reload builds a new collector.
            self.config(modules="      lat2: {kind: write_lat, size: 2, iterations: 5}\n")
            d.proc.send_signal(signal.SIGHUP)
            for _ in range(600):
                s = d.scrape()
                if value(s, "rdma_exporter_config_reloads_total", result="success") == "1":
                    break
                time.sleep(0.05)
            else:
                self.fail("reload never counted: " + d.log())
            s = d.scrape()
            self.assertEqual(value(s, "rdma_probe_requests_total", module="lat2", result="success"), "0")  # new config
            self.assertEqual(value(s, "rdma_probe_requests_total", module="lat", result="unauthenticated"), "2")
            self.assertEqual(probe(d, f"module=lat&target=127.0.0.1:{self.peer.port}")[0], 403)
            self.assertEqual(value(d.scrape(), "rdma_probe_requests_total", module="lat", result="unauthenticated"), "3")


if __name__ == "__main__":
    unittest.main(verbosity=2)
