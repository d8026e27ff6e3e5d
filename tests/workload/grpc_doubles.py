#!/usr/bin/python3
"""Protocol doubles for the workload collector: a CRI runtime.v1 server (ListPodSandbox,
ListContainers) and a kubelet PodResources v1 server (List), generated at start from the pinned
.proto files in sources/cri/proto (Debian's protoc + grpc_python_plugin; python3-grpcio,
python3-protobuf), serving on unix sockets.

usage: grpc_doubles.py --data DATA.json [--cri SOCKET] [--podresources SOCKET] [--calls FILE]
DATA: {"pods": [{"id", "uid", "namespace", "name"}], "containers": [{"id", "pod_sandbox_id", "name"}],
       "pod_resources": [{"namespace", "name", "containers": [{"name", "devices":
                          [{"resource_name", "device_ids": [...]}]}]}]}
Prints "ready" when both listen; appends each call's name to FILE (the tests count them).
Runs until SIGTERM."""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "..", "..", "sources", "cri", "proto")


def generate(out):
    subprocess.run(["protoc", "-I", PROTO, "--python_out=" + out, "--grpc_python_out=" + out,
                    "--plugin=protoc-gen-grpc_python=" + "/usr/bin/grpc_python_plugin",
                    os.path.join(PROTO, "cri_runtime_v1.proto"), os.path.join(PROTO, "podresources_v1.proto")],
                   check=True)
    sys.path.insert(0, out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--cri")
    ap.add_argument("--podresources")
    ap.add_argument("--calls")
    a = ap.parse_args()
    data = json.load(open(a.data))
    gen = tempfile.mkdtemp(prefix="grpc-doubles-")
    generate(gen)
    import grpc
    import cri_runtime_v1_pb2 as cri
    import cri_runtime_v1_pb2_grpc as cri_grpc
    import podresources_v1_pb2 as pr
    import podresources_v1_pb2_grpc as pr_grpc

    def called(name):
        if a.calls:
            with open(a.calls, "a") as f:
                f.write(name + "\n")

    class Runtime(cri_grpc.RuntimeServiceServicer):
        def ListPodSandbox(self, request, context):
            called("ListPodSandbox")
            return cri.ListPodSandboxResponse(items=[
                cri.PodSandbox(id=p["id"], state=cri.SANDBOX_READY, metadata=cri.PodSandboxMetadata(
                    name=p["name"], uid=p["uid"], namespace=p["namespace"])) for p in data.get("pods", [])])

        def ListContainers(self, request, context):
            called("ListContainers")
            return cri.ListContainersResponse(containers=[
                cri.Container(id=c["id"], pod_sandbox_id=c["pod_sandbox_id"], state=cri.CONTAINER_RUNNING,
                              metadata=cri.ContainerMetadata(name=c["name"])) for c in data.get("containers", [])])

    class Lister(pr_grpc.PodResourcesListerServicer):
        def List(self, request, context):
            called("List")
            return pr.ListPodResourcesResponse(pod_resources=[
                pr.PodResources(name=p["name"], namespace=p["namespace"], containers=[
                    pr.ContainerResources(name=c["name"], devices=[
                        pr.ContainerDevices(resource_name=d["resource_name"], device_ids=d["device_ids"])
                        for d in c["devices"]]) for c in p["containers"]]) for p in data.get("pod_resources", [])])

    servers = []
    for path, add, servicer in ((a.cri, cri_grpc.add_RuntimeServiceServicer_to_server, Runtime()),
                                (a.podresources, pr_grpc.add_PodResourcesListerServicer_to_server, Lister())):
        if not path:
            continue
        s = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        add(servicer, s)
        s.add_insecure_port("unix:" + path)
        s.start()
        servers.append(s)
    print("ready", flush=True)
    signal.sigwait([signal.SIGTERM, signal.SIGINT])
    for s in servers:
        s.stop(0)


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT])
    main()
