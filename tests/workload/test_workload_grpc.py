#!/usr/bin/env python3
"""The workload collector's real PodResources client against the protocol double
(grpc_doubles.py, from the pinned .proto files) on a unix socket, on the fixture sysfs tree with
an SR-IOV VF's PCI address mapped to an RDMA device (bus/pci/devices/<bdf>/infiniband/<dev>):
- each container's devices become rdma_device_allocation_info series on the right RDMA device
  (VF by PCI address, a device named as such); IDs that name no RDMA device give none;
- the listing is cached for refresh-interval, not made per scrape;
- a dead or absent socket is a counted error (reason="podresources") and the rest of the scrape
  (the port collector's series) is intact.
The CRI names need queue pairs (RDMA netlink): vm.workload.cgroups checks them with the same double."""
import os
import socket
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from exporter_harness import Exporter, series, take_exporter_arg, value, write_tree  # noqa: E402
from workload_doubles import Doubles  # noqa: E402

EXPORTER = take_exporter_arg()
VF = "0000:3b:00.2"
DATA = {"pod_resources": [
    {"namespace": "training", "name": "llm-0", "containers": [
        {"name": "worker", "devices": [
            {"resource_name": "nvidia.com/sriov_rdma", "device_ids": [VF]},
            {"resource_name": "nvidia.com/gpu", "device_ids": ["GPU-8f1c"]}]}]},
    {"namespace": "infer", "name": "svc-1", "containers": [
        {"name": "server", "devices": [
            {"resource_name": "rdma/hca_shared_devices_a", "device_ids": ["mlx5_0", "f2a1c0de"]}]}]}]}


def errors(samples, reason):
    return sum(float(v) for l, v in series(samples, "rdma_exporter_collector_errors_total").items()
               if dict(l) == {"collector": "workload", "reason": reason})


class PodResources(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.root = os.path.join(self.tmp, "sys")
        write_tree(self.root, "fixtures")
        os.makedirs(os.path.join(self.root, "bus/pci/devices", VF, "infiniband", "mlx5_1"))

    def exporter(self, sock):
        return Exporter(EXPORTER, f"--path.sysfs={self.root}", "--collector.workload",
                        f"--collector.workload.podresources-socket={sock}",
                        "--collector.workload.refresh-interval=1h")

    def test_allocations_from_the_kubelet(self):
        sock = os.path.join(self.tmp, "kubelet.sock")
        d = Doubles(self.tmp, DATA, podresources=sock)
        try:
            with self.exporter(sock) as e:
                s, _ = e.scrape()
                s, _ = e.scrape()
        finally:
            d.stop()
        alloc = {tuple(sorted(dict(l).items())) for l in series(s, "rdma_device_allocation_info")}
        self.assertEqual(alloc, {
            (("container", "worker"), ("device", "mlx5_1"), ("namespace", "training"), ("pod", "llm-0"),
             ("resource", "nvidia.com/sriov_rdma")),
            (("container", "server"), ("device", "mlx5_0"), ("namespace", "infer"), ("pod", "svc-1"),
             ("resource", "rdma/hca_shared_devices_a"))})
        self.assertEqual(errors(s, "podresources"), 0)
        self.assertEqual(d.count("List"), 1, "two scrapes within refresh-interval list once")

    def test_dead_or_absent_socket_is_a_counted_error(self):
        dead = os.path.join(self.tmp, "dead.sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(dead)  # a socket file nobody listens on (a kubelet that went away)
        s.close()
        for sock in (dead, os.path.join(self.tmp, "absent.sock")):
            with self.subTest(sock=sock), self.exporter(sock) as e:
                samples, _ = e.scrape()
                self.assertGreaterEqual(errors(samples, "podresources"), 1)
                self.assertEqual(series(samples, "rdma_device_allocation_info"), {})
                self.assertEqual(float(value(samples, "rdma_exporter_collector_success", collector="workload")), 1)
                self.assertEqual(float(value(samples, "rdma_exporter_collector_success", collector="port")), 1)
                self.assertTrue(series(samples, "rdma_port_state"))
                self.assertIn("PodResources List on " + sock, e.read_log())


if __name__ == "__main__":
    unittest.main()
