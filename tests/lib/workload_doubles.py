"""The kubelet's PodResources and the container runtime's CRI protocol doubles
(tests/workload/grpc_doubles.py, built from the pinned .proto files) as a process serving on unix
sockets, for the tests that run the workload collector's real gRPC clients."""
import json
import os
import subprocess

from exporter_harness import stop_process

DOUBLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workload", "grpc_doubles.py")
# python3-grpcio is a Debian package: only Debian's python3 sees it (ctest passes the path).
PYTHON = os.environ.get("RDMA_SYSTEM_PYTHON3", "/usr/bin/python3")


class Doubles:
    """Serves `data` ({"pod_resources": [...], ...}, see grpc_doubles.py) on the given sockets
    (keyword = the double's flag: podresources=PATH, cri=PATH)."""

    def __init__(self, tmp, data, **sockets):
        path = os.path.join(tmp, "data.json")
        with open(path, "w") as f:
            json.dump(data, f)
        self.calls = os.path.join(tmp, "calls")
        args = [PYTHON, DOUBLES, "--data", path, "--calls", self.calls]
        for k, v in sockets.items():
            args += ["--" + k, v]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            stop_process(self.proc)
            raise AssertionError("protocol doubles did not start: " + line)

    def count(self, name):
        if not os.path.exists(self.calls):
            return 0
        with open(self.calls) as f:
            return f.read().split().count(name)

    def stop(self):
        stop_process(self.proc)


KUBE_DOUBLE = os.path.join(os.path.dirname(DOUBLES), "kube_api_double.py")


class KubeApiDouble:
    """The Kubernetes API server's pod list over HTTPS on 127.0.0.1 (tests/workload/kube_api_double.py),
    accepting `token` for `node`. Its CA is `self.ca`, its URL `self.url`; set_body() and
    set_token() change what it serves and accepts from the next request on; requests() is what it
    was asked (one dict per request: path, query, token_ok, status)."""

    def __init__(self, tmp, body, token, node, nodes=None):
        self.dir = os.path.join(tmp, "kube-api")
        os.makedirs(self.dir, exist_ok=True)
        self.body, self.token, self.log = (os.path.join(self.dir, n) for n in ("body", "token", "requests"))
        self.set_body(body)
        self.set_token(token)
        self.ca = os.path.join(self.dir, "ca.crt")
        self.nodes = os.path.join(self.dir, "nodes")
        extra = []
        if nodes is not None:
            self.set_nodes(nodes)
            extra = ["--nodes", self.nodes]
        self.proc = subprocess.Popen([PYTHON, KUBE_DOUBLE, "--dir", self.dir, "--body", self.body, "--token-file",
                                      self.token, "--node", node, "--log", self.log] + extra,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "ready":
            stop_process(self.proc)
            raise AssertionError("Kubernetes API double did not start: %s" % line)
        self.url = "https://127.0.0.1:" + line[1]

    def set_body(self, body):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        with open(self.body + ".new", "wb") as f:
            f.write(data)
        os.replace(self.body + ".new", self.body)

    def set_nodes(self, nodes):
        """The nodes /api/v1/nodes serves: a list of Node objects, or {"mode": M, "nodes": [...]}
        (kube_api_double.py: nodelist, loop, expire, forbid, garbage)."""
        with open(self.nodes + ".new", "w") as f:
            json.dump(nodes, f)
        os.replace(self.nodes + ".new", self.nodes)

    def set_token(self, token):
        with open(self.token + ".new", "w") as f:
            f.write(token + "\n")
        os.replace(self.token + ".new", self.token)

    def requests(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(line) for line in f if line.strip()]

    def stop(self):
        stop_process(self.proc)
