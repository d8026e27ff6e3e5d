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
