#!/usr/bin/env python3
"""The workload collector's real Kubernetes API client (libcurl module, PodList decoder) against
the protocol double (kube_api_double.py: HTTPS with its own CA, the API's PodList and Status JSON,
a bearer token and the node field selector), on the fixture sysfs tree:
- the pods of this node are listed in the background with the token and the field selector
  (spec.nodeName=<node>, resourceVersion=0), and counted in rdma_workload_kubernetes_pods; the API
  is up, nothing counted; no gRPC is mapped (the CRI is not used);
- a rotated token is read again: the double accepting only the new token answers 401 (counted,
  reason kubernetes_auth) until the exporter's token file has it, then lists succeed again;
- garbage, invalid UTF-8 and an oversized body are counted (kubernetes_decode), the last good
  names are kept and the scrape stays valid for promtool;
- a CA that did not sign the server is counted (kubernetes_tls); no API listening is state (the
  gauge at 0, the capability at 0, one log line), never an error;
- names=kubernetes without a node name does not start, and says why.
Pod series with names need queue pairs (RDMA netlink): vm.workload.cgroups checks them against
the same double."""
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from exporter_harness import Exporter, series, take_exporter_arg, value, write_tree  # noqa: E402
from workload_doubles import KubeApiDouble  # noqa: E402
import kube_api_double as api  # noqa: E402

EXPORTER = take_exporter_arg()
NODE = "gpu-node-07.example"
PODS = api.pod_list(
    api.pod("llm-0", "training", "0d5e4c2b-3f1a-4b6c-9d8e-7f6a5b4c3d2e", NODE, [("worker", "containerd://" + "a" * 64)]),
    api.pod("kube-proxy-x", "kube-system", "3c1f0c9e-1b2a-4c3d-8e9f-0a1b2c3d4e5f", NODE,
            [("kube-proxy", "containerd://" + "b" * 64)], mirror_uid="6ea4c30a5f3b0a3b9b8e6c7d"),
    api.pod("elsewhere", "training", "9e2f7a1c-0000-4000-8000-000000000001", "other-node",
            [("worker", "containerd://" + "c" * 64)]))


def errors(samples, reason):
    return sum(float(v) for l, v in series(samples, "rdma_exporter_collector_errors_total").items()
               if dict(l) == {"collector": "workload", "reason": reason})


def all_errors(samples):
    return sum(float(v) for l, v in series(samples, "rdma_exporter_collector_errors_total").items()
               if dict(l).get("collector") == "workload")


def promtool_ok(text):
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    return r.returncode == 0, r.stdout + r.stderr


class KubernetesNames(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.root = os.path.join(self.tmp, "sys")
        write_tree(self.root, "fixtures")
        self.token = os.path.join(self.tmp, "token")
        self.set_token("token-one")
        self.api = KubeApiDouble(self.tmp, PODS, "token-one", NODE)
        self.addCleanup(self.api.stop)

    def set_token(self, t):
        with open(self.token + ".new", "w") as f:
            f.write(t + "\n")
        os.replace(self.token + ".new", self.token)

    def exporter(self, url=None, ca=None, *extra):
        e = Exporter(EXPORTER, f"--path.sysfs={self.root}", "--collector.workload",
                     f"--collector.workload.kubernetes-api={url or self.api.url}",
                     f"--collector.workload.kubernetes-ca-file={ca or self.api.ca}",
                     f"--collector.workload.kubernetes-token-file={self.token}",
                     f"--collector.workload.node-name={NODE}", "--collector.workload.refresh-interval=1s", *extra)
        self.addCleanup(e.stop)
        return e

    def wait_for(self, e, what, cond, tries=150):
        """Scrapes until cond(samples) holds (at most tries x 0.2 s: a few list periods)."""
        for _ in range(tries):
            samples, _ = e.scrape()
            try:
                if cond(samples):
                    return samples
            except AssertionError:  # value(): the series is not there yet (the first list still runs)
                pass
            time.sleep(0.2)
        self.fail("%s: not seen; last scrape %s; log %s" % (what, e.get()[2][-3000:], e.read_log()[-2000:]))

    def pods(self, s):
        v = value(s, "rdma_workload_kubernetes_pods")
        return None if v is None else float(v)

    def test_lists_this_nodes_pods_with_the_token(self):
        e = self.exporter()
        s = self.wait_for(e, "2 pods listed", lambda s: self.pods(s) == 2)
        self.assertEqual(float(value(s, "rdma_workload_kubernetes_api_up")), 1)
        self.assertEqual(all_errors(s), 0)
        reqs = self.api.requests()
        self.assertTrue(reqs)
        for r in reqs:
            self.assertEqual(r["path"], "/api/v1/pods")
            self.assertEqual(r["query"], {"fieldSelector": ["spec.nodeName=" + NODE], "resourceVersion": ["0"]})
            self.assertTrue(r["token_ok"])
            self.assertEqual(r["status"], 200)
        with open("/proc/%d/maps" % e.proc.pid) as f:
            maps = f.read()
        self.assertIn("librdma_exporter_kube.so", maps)
        self.assertNotIn("libgrpc", maps, "the CRI's gRPC module is not loaded for API names")

    def test_rotated_token_is_read_again(self):
        e = self.exporter()
        self.wait_for(e, "first list", lambda s: self.pods(s) == 2)
        self.api.set_token("token-two")  # the API now accepts only the rotated token
        s = self.wait_for(e, "401 counted", lambda s: errors(s, "kubernetes_auth") >= 1)
        self.assertEqual(float(value(s, "rdma_workload_kubernetes_api_up")), 1, "a 401 is an answer: reachable")
        self.assertEqual(self.pods(s), 2, "the last good list's names are kept")
        self.assertIn("HTTP 401", e.read_log())
        self.set_token("token-two")  # the kubelet rotates the projected token file
        n = len(self.api.requests())
        self.wait_for(e, "a list with the new token",
                      lambda s: any(r["token_ok"] and r["status"] == 200 for r in self.api.requests()[n:]))
        self.assertTrue(all(r["token_ok"] for r in self.api.requests()[n:][-1:]))

    def test_bad_bodies_are_counted_and_the_scrape_stays_valid(self):
        # Re-serialised by the double as a PodList, so it stays 33 MiB (the client's bound: 32 MiB).
        big = b'{"kind": "PodList", "items": [], "padding": "' + b"x" * (33 << 20) + b'"}'
        bodies = {"garbage": b"\x00\x01<html>not json", "invalid_utf8": b'{"kind": "PodList", "items": [{"metadata": '
                  b'{"name": "\xff\xfe", "namespace": "x", "uid": "u1"}}]}', "oversized": big,
                  "status_object": b'{"kind": "Status", "code": 500, "message": "etcdserver: request timed out"}'}
        for name, body in bodies.items():
            with self.subTest(body=name):
                self.api.set_body(PODS)
                e = self.exporter()
                self.wait_for(e, "first list", lambda s: self.pods(s) == 2)
                self.api.set_body(body)
                s = self.wait_for(e, name + " counted", lambda s: errors(s, "kubernetes_decode") >= 1)
                self.assertEqual(self.pods(s), 2, "the last good names are kept")
                ok, out = promtool_ok(e.get()[2])
                self.assertTrue(ok, out)
                if name == "oversized":
                    self.assertIn("larger than", e.read_log())
                if name == "status_object":
                    self.assertIn("etcdserver: request timed out", e.read_log())
                e.stop()

    def test_wrong_ca_is_counted(self):
        other = os.path.join(self.tmp, "other-ca.crt")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", os.path.join(self.tmp, "other.key"), "-out", other, "-days", "1",
                        "-subj", "/CN=another-ca"], check=True, capture_output=True)
        e = self.exporter(ca=other)
        s = self.wait_for(e, "TLS failure counted", lambda s: errors(s, "kubernetes_tls") >= 1)
        self.assertEqual(self.pods(s), 0)
        self.assertFalse(self.api.requests(), "no request reached the server")

    def test_no_api_is_state_not_an_error(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        self.addCleanup(s.close)
        e = self.exporter(url="https://127.0.0.1:%d" % port)
        samples = self.wait_for(e, "api down", lambda s: value(s, "rdma_workload_kubernetes_api_up") is not None)
        for _ in range(3):
            samples, _ = e.scrape()
        self.assertEqual(float(value(samples, "rdma_workload_kubernetes_api_up")), 0)
        self.assertEqual(float(value(samples, "rdma_exporter_collector_capability", collector="workload",
                                     capability="kubernetes_api")), 0)
        self.assertEqual(all_errors(samples), 0)
        self.assertEqual(e.read_log().count("Kubernetes API https://127.0.0.1:%d" % port), 1, e.read_log())

    def test_kubernetes_names_need_the_node(self):
        r = subprocess.run([EXPORTER, "--web.listen-address=127.0.0.1:0", f"--path.sysfs={self.root}",
                            "--collector.workload", "--collector.workload.names=kubernetes",
                            f"--collector.workload.kubernetes-api={self.api.url}"],
                           capture_output=True, text=True, timeout=30, env={k: v for k, v in os.environ.items()
                                                                            if k != "NODE_NAME"})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("node-name", r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
