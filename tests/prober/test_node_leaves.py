#!/usr/bin/env python3
"""The topology plan's membership from Kubernetes node labels (collectors/prober/node_leaves.h):
the real API client (exporter/kube, libcurl module) against the protocol double
(tests/workload/kube_api_double.py), through node_leaves_driver, which draws this node's plan
from the list as the prober's resolver does:
- 1,234 labelled nodes (and 300 without the label, which the label selector leaves out) come in 3
  pages of 500, each asked with the token, labelSelector=<key>, limit=500, the previous page's
  continue token and the metadata-only Accept; a node whose label value is not one the API
  admits is counted unlabelled; the plan is active, holds every labelled node under its leaf and
  gives this node its whole leaf plus one peer per leaf pair it draws;
- a server that only speaks NodeList (ignores the metadata Accept) reads the same;
- a node the list does not hold: node_not_found, no peers;
- a refused token (401), a service account without list nodes (403), an expired continue token
  (410), a body that is not a node list, a pager that never ends: each a failure by reason, no
  membership; no server listening: unreachable, not an error."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "workload"))
from workload_doubles import KubeApiDouble  # noqa: E402
import kube_api_double as api  # noqa: E402

DRIVER = sys.argv.pop(2) if len(sys.argv) > 2 and sys.argv[1] == "--driver" else ""
if DRIVER:
    sys.argv.pop(1)
LABEL = "network.topology.nvidia.com/leaf"
ME = "gpu-0042"
LEAVES = 40


def fleet():
    """1,234 labelled GPU nodes on 40 leaves, one of them with a value no API server admits, and
    300 CPU nodes without the label."""
    nodes = [api.node("gpu-%04d" % i, {LABEL: "leaf-%02d" % (i % LEAVES), "kubernetes.io/os": "linux"})
             for i in range(1234)]
    nodes[7]["metadata"]["labels"][LABEL] = "-bad-"
    nodes += [api.node("cpu-%03d" % i, {"kubernetes.io/os": "linux"}) for i in range(300)]
    return nodes


class NodeLeaves(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="node-leaves-")
        cls.api = KubeApiDouble(cls.tmp, api.pod_list(), "sa-token", ME, nodes=fleet())
        cls.token = os.path.join(cls.tmp, "token")
        with open(cls.token, "w") as f:
            f.write("sa-token\n")

    @classmethod
    def tearDownClass(cls):
        cls.api.stop()

    def run_driver(self, url=None, token=None, node=ME):
        start = len(self.api.requests())
        out = subprocess.run([DRIVER, url or self.api.url, token or self.token, self.api.ca, LABEL, node],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout), self.api.requests()[start:]

    def test_pages_of_labelled_nodes_make_the_plan(self):
        r, reqs = self.run_driver()
        self.assertEqual(r["outcome"], "ok", r["message"])
        self.assertEqual(r["pages"], 3)
        self.assertEqual(r["unlabelled"], 1)
        self.assertEqual(r["dropped"], 1)  # the bad value, read as absent
        self.assertEqual(len(r["members"]), 1233)
        self.assertNotIn("gpu-0007", [m[0] for m in r["members"]])
        self.assertFalse([m for m in r["members"] if m[0].startswith("cpu-")])
        self.assertEqual(len(reqs), 3)
        for i, q in enumerate(reqs):
            self.assertTrue(q["token_ok"])
            self.assertEqual(q["status"], 200)
            self.assertEqual(q["path"], "/api/v1/nodes")
            self.assertEqual(q["query"]["labelSelector"], [LABEL])
            self.assertEqual(q["query"]["limit"], ["500"])
            self.assertNotIn("resourceVersion", q["query"])
            self.assertIn("as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", q["accept"])
            self.assertEqual(q["query"].get("continue"), None if i == 0 else ["page:%d" % (500 * i)])
        plan = r["plan"]
        self.assertEqual((plan["state"], plan["leaves"], plan["nodes"]), ("active", LEAVES, 1233))
        mine = sorted(m[0] for m in r["members"] if m[1] == "leaf-02" and m[0] != ME)
        peers = plan["peers"]
        self.assertEqual(sorted(p[0] for p in peers[:plan["local"]]), mine)
        self.assertEqual(plan["local"] + plan["remote"], len(peers))
        # Its share of the 39 pairs of leaf-02 (31 nodes a leaf): at most ceil(39 / 31) = 2.
        self.assertLessEqual(plan["remote"], 2)
        leaf_of = dict(map(tuple, r["members"]))
        for name, group in peers:
            self.assertEqual(leaf_of[name], group)

    def test_a_server_that_answers_nodelist_reads_the_same(self):
        r1, _ = self.run_driver()
        try:
            self.api.set_nodes({"mode": "nodelist", "nodes": fleet()})
            r2, _ = self.run_driver()
        finally:
            self.api.set_nodes(fleet())
        self.assertEqual(r2["outcome"], "ok", r2["message"])
        self.assertEqual(r1["members"], r2["members"])
        self.assertEqual(r1["plan"], r2["plan"])

    def test_node_not_in_the_list(self):
        r, _ = self.run_driver(node="cpu-001")
        self.assertEqual(r["outcome"], "ok")
        self.assertEqual(r["plan"]["state"], "node_not_found")
        self.assertNotIn("peers", r["plan"])

    def mode(self, mode):
        self.api.set_nodes({"mode": mode, "nodes": fleet()})
        try:
            return self.run_driver()
        finally:
            self.api.set_nodes(fleet())

    def test_failures_by_reason(self):
        wrong = os.path.join(self.tmp, "wrong-token")
        with open(wrong, "w") as f:
            f.write("not-it\n")
        r, reqs = self.run_driver(token=wrong)
        self.assertEqual((r["outcome"], r["reason"], r["cause"]), ("failed", "kubernetes_auth", "401"))
        self.assertIn("token is not accepted", r["message"])
        self.assertEqual(r["members"], [])
        self.assertEqual([q["status"] for q in reqs], [401])
        r, reqs = self.run_driver(token=os.path.join(self.tmp, "missing"))
        self.assertEqual((r["outcome"], r["reason"]), ("failed", "kubernetes_token"))
        self.assertEqual(reqs, [])  # nothing asked without a token
        r, _ = self.mode("forbid")
        self.assertEqual((r["outcome"], r["reason"], r["cause"]), ("failed", "kubernetes_auth", "403"))
        self.assertIn("get/list nodes", r["message"])
        r, reqs = self.mode("expire")
        self.assertEqual((r["outcome"], r["reason"], r["cause"]), ("failed", "kubernetes_http", "410"))
        self.assertEqual([q["status"] for q in reqs], [200, 410])
        self.assertEqual(r["members"], [])  # a half-read list is no membership
        r, _ = self.mode("garbage")
        self.assertEqual((r["outcome"], r["reason"], r["cause"]), ("failed", "kubernetes_decode", "json"))
        r, reqs = self.mode("loop")
        self.assertEqual((r["outcome"], r["reason"], r["cause"]), ("failed", "kubernetes_decode", "pages"))
        self.assertEqual(len(reqs), 401)  # 200,000 nodes / 500 + 1 pages: the bound, then no more
        self.assertEqual(r["members"], [])

    def test_no_server_is_unreachable(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        r, _ = self.run_driver(url="https://127.0.0.1:%d" % port)
        self.assertEqual(r["outcome"], "unreachable")
        self.assertIn("127.0.0.1:%d" % port, r["message"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
