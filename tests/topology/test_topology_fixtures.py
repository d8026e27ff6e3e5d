#!/usr/bin/env python3
"""fixtures: the topology collector on DGX H100-shaped sysfs trees (pci_gen.py) and variants.

The expected relations are written down independently of the exporter, as `nvidia-smi topo -m`
prints them for this layout: NVIDIA's DGX H100 User Guide (section 1.2.3, Table 6) pairs each GPU
with one ConnectX-7 behind the same PCIe switch (PIX), the NICs of the other switches of its CPU
are on other host bridges of the same NUMA node (NODE), those of the other CPU across the UPI
(SYS); the levels are NVML's nvmlGpuTopologyLevel_t (SINGLE = one switch, MULTIPLE = several
switches below one host bridge, HOSTBRIDGE, NODE, SYSTEM)."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from exporter_harness import Exporter, series, take_exporter_arg, value, write_file_atomically, write_tree  # noqa: E402
from ibsim_harness import wait_for  # noqa: E402

EXPORTER = take_exporter_arg()
NICS = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
GPU_PCI = ["0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0", "0000:9d:00.0", "0000:c3:00.0",
           "0000:d1:00.0", "0000:df:00.0"]
LEVEL = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}

# nvidia-smi topo -m, GPU rows against NIC0..NIC7 (NIC legend: NIC0 mlx5_0, NIC1 mlx5_3, NIC2
# mlx5_4, NIC3 mlx5_5, NIC4 mlx5_6, NIC5 mlx5_9, NIC6 mlx5_10, NIC7 mlx5_11).
DGX_H100 = """
GPU0  PIX  NODE NODE NODE SYS  SYS  SYS  SYS
GPU1  NODE PIX  NODE NODE SYS  SYS  SYS  SYS
GPU2  NODE NODE PIX  NODE SYS  SYS  SYS  SYS
GPU3  NODE NODE NODE PIX  SYS  SYS  SYS  SYS
GPU4  SYS  SYS  SYS  SYS  PIX  NODE NODE NODE
GPU5  SYS  SYS  SYS  SYS  NODE PIX  NODE NODE
GPU6  SYS  SYS  SYS  SYS  NODE NODE PIX  NODE
GPU7  SYS  SYS  SYS  SYS  NODE NODE NODE PIX
"""
# NIC0 (mlx5_0) moved to a root port of the other CPU: SYS to GPUs 0-3, NODE to GPUs 4-7.
WRONG_SLOT = """
GPU0  SYS  NODE NODE NODE SYS  SYS  SYS  SYS
GPU1  SYS  PIX  NODE NODE SYS  SYS  SYS  SYS
GPU2  SYS  NODE PIX  NODE SYS  SYS  SYS  SYS
GPU3  SYS  NODE NODE PIX  SYS  SYS  SYS  SYS
GPU4  NODE SYS  SYS  SYS  PIX  NODE NODE NODE
GPU5  NODE SYS  SYS  SYS  NODE PIX  NODE NODE
GPU6  NODE SYS  SYS  SYS  NODE NODE PIX  NODE
GPU7  NODE SYS  SYS  SYS  NODE NODE NODE PIX
"""

EXPECT = """collectors:
  topology:
    expect:
      devices: "^mlx5_"
      gpus: 8
      ports: [{link_layer: InfiniBand, count: 8, min_rate_gbps: 400}]
      pcie: {speed_gts: 32, width: 16}
      gpu_nic_relation: PXB
      acs_off: true
      peer_memory: true
      firmware: {MT4129: ["28.39.2048", "28.41.1000"]}
"""


def matrix(text):
    rows = [line.split() for line in text.strip().splitlines()]
    return {(NICS[i], int(r[0][3:])): rel for r in rows for i, rel in enumerate(r[1:])}


def run(variant, scrapes=1, expect=EXPECT, mutate=None, args=()):
    """Generates the variant's tree, scrapes the topology collector alone; -> list of samples.
    mutate(root) runs after the first scrape; each scrape after it is one whose reading of the
    link, AER, port and peer-memory files began after the change (see reading_after)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "sys")
        subprocess.run([sys.executable, os.path.join(HERE, "pci_gen.py"), root, "--variant", variant], check=True)
        proc = os.path.join(tmp, "proc")
        os.makedirs(os.path.join(proc, "sys/kernel"))
        with open(os.path.join(proc, "sys/kernel/osrelease"), "w") as f:
            f.write("6.1.0-18-amd64\n")
        cfg = os.path.join(tmp, "config.yml")
        with open(cfg, "w") as f:
            f.write(expect)
        out = []
        with Exporter(EXPORTER, f"--path.sysfs={root}", f"--path.procfs={proc}", f"--config.file={cfg}",
                      "--collector.disable-defaults", "--collector.topology", *args) as e:
            for i in range(scrapes):
                out.append(reading_after(e) if mutate and i > 0 else e.scrape()[0])
                if mutate and i == 0:
                    mutate(root)
        return out


def reading_after(e):
    """The first scrape that serves a reading begun after this call. The refresher counts its
    readings (rdma_topology_refreshes_total): the one after the count a scrape sees now may have
    begun before (it was in flight), the one after that began once it was published, after this
    scrape. Needs a short --collector.topology.health-interval; the deadline is a guard only."""
    def refreshes(s):
        return int(value(s, "rdma_topology_refreshes_total"))

    now = refreshes(e.scrape()[0])

    def later():
        s = e.scrape()[0]
        return s if refreshes(s) >= now + 2 else None
    return wait_for(later, step=0.01, what="a reading begun after the change")


FAST = ("--collector.topology.health-interval=20ms",)


def checks(samples):
    return {(dict(l)["check"], dict(l)["subject"]): (v, dict(l)["observed"]) for l, v in
            series(samples, "rdma_topology_check").items()}


def errors(samples):
    return {dict(l)["reason"]: v for l, v in series(samples, "rdma_exporter_collector_errors_total").items()
            if dict(l).get("collector") == "topology" and v != "0"}


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        def retrain(root):
            # mlx5_6's link drops to x4 after the first scrape: the refresher reads it again.
            d = os.path.realpath(os.path.join(root, "class/infiniband/mlx5_6/device"))
            for f in (d, os.path.dirname(d)):
                write_file_atomically(os.path.join(f, "current_link_width"), "4\n")
        cls.s, cls.s2 = run("base", scrapes=2, mutate=retrain, args=FAST)

    def test_matrix_is_nvidia_smis(self):
        want = matrix(DGX_H100)
        got = {(dict(l)["device"], int(dict(l)["gpu"])): (dict(l)["relation"], v)
               for l, v in series(self.s, "rdma_topology_relation").items()}
        self.assertEqual(len(got), 64)
        for key, rel in want.items():
            self.assertEqual(got[key], (rel, str(LEVEL[rel])), key)
        for l in series(self.s, "rdma_topology_relation"):
            self.assertEqual(dict(l)["gpu_pci"], GPU_PCI[int(dict(l)["gpu"])])

    def test_closest_both_ways(self):
        nic = {dict(l)["device"]: (dict(l)["gpu"], dict(l)["relation"]) for l in series(self.s, "rdma_topology_nic_closest_gpu")}
        gpu = {dict(l)["gpu"]: (dict(l)["device"], dict(l)["relation"]) for l in series(self.s, "rdma_topology_gpu_closest_nic")}
        self.assertEqual(nic, {n: (str(i), "PIX") for i, n in enumerate(NICS)})
        self.assertEqual(gpu, {str(i): (n, "PIX") for i, n in enumerate(NICS)})

    def test_gpus_by_class_not_the_bmc_vga(self):
        self.assertEqual(value(self.s, "rdma_topology_gpus"), "8")
        info = [dict(l) for l in series(self.s, "rdma_topology_gpu_info")]
        self.assertEqual(sorted(i["gpu_pci"] for i in info), GPU_PCI)
        self.assertTrue(all(i["pci_id"] == "10de:2330" and i["class"] == "0x030200" for i in info))
        self.assertEqual({i["gpu"]: i["numa_node"] for i in info}, {str(k): "0" if k < 4 else "1" for k in range(8)})

    def test_chain_to_root_port(self):
        # mlx5_0 at 18:00.0 behind downstream port 17:00.0, upstream port 16:00.0, root port 15:01.0.
        for hop, bdf in enumerate(["0000:18:00.0", "0000:17:00.0", "0000:16:00.0", "0000:15:01.0"]):
            lab = dict(device="mlx5_0", pci_function=bdf, hop=str(hop))
            self.assertEqual(value(self.s, "rdma_pci_link_current_speed_transfers_per_second", **lab), "3.2e+10")
            self.assertEqual(value(self.s, "rdma_pci_link_max_speed_transfers_per_second", **lab), "3.2e+10")
            self.assertEqual(value(self.s, "rdma_pci_link_current_width_lanes", **lab), "16")
            self.assertEqual(value(self.s, "rdma_pci_link_max_width_lanes", **lab), "16")
            self.assertEqual(value(self.s, "rdma_pci_link_degraded", **lab), "0")
            # On a tie the link nearest the device is named, by its port above (the slot).
            self.assertEqual(value(self.s, "rdma_pci_link_bottleneck", **lab), "1" if hop == 1 else "0")
        self.assertEqual(value(self.s, "rdma_pci_path_hops", device="mlx5_0"), "4")
        self.assertEqual(value(self.s, "rdma_pci_numa_node", device="mlx5_6"), "1")
        self.assertEqual(value(self.s, "rdma_pci_function_info", device="mlx5_0", pci_function="0000:18:00.0",
                               pci_id="15b3:1021", **{"class": "0x020700"}, host_bridge="pci0000:15", numa_node="0"), "1")
        # 32 GT/s x16 after 128b/130b: 63.015 GB/s.
        self.assertAlmostEqual(float(value(self.s, "rdma_pci_path_bandwidth_bytes_per_second", device="mlx5_0")),
                               32e9 * 16 * 128 / 130 / 8, delta=1)

    def test_aer_exact_per_type(self):
        lab = dict(device="mlx5_9", pci_function="0000:c0:00.0", hop="0")
        cor = {dict(l)["type"]: v for l, v in series(self.s, "rdma_pci_aer_errors_total").items()
               if dict(l)["device"] == "mlx5_9" and dict(l)["aer_severity"] == "correctable"}
        self.assertEqual(cor, {"RxErr": "0", "BadTLP": "7", "BadDLLP": "0", "Rollover": "0", "Timeout": "2",
                               "NonFatalErr": "0", "CorrIntErr": "0", "HeaderOF": "0"})
        self.assertEqual(value(self.s, "rdma_pci_aer_errors_total", aer_severity="nonfatal", type="CmpltTO", **lab), "1")
        self.assertEqual(value(self.s, "rdma_pci_aer_errors_total", aer_severity="fatal", type="MalfTLP", **lab), "0")
        self.assertEqual(value(self.s, "rdma_pci_aer_reports_total", aer_severity="correctable", **lab), "8")
        self.assertEqual(value(self.s, "rdma_pci_aer_reports_total", aer_severity="nonfatal", **lab), "1")
        types = {dict(l)["type"] for l in series(self.s, "rdma_pci_aer_errors_total") if dict(l)["aer_severity"] == "fatal"}
        self.assertEqual(len(types), 18)

    def test_every_check_passes_and_no_error(self):
        c = checks(self.s)
        self.assertTrue(all(v == "1" for v, _ in c.values()), {k: v for k, v in c.items() if v[0] != "1"})
        self.assertEqual(c[("gpu_nic_relation", "gpu3 0000:61:00.0")], ("1", "PIX mlx5_5"))
        self.assertEqual(c[("firmware", "mlx5_10")], ("1", "MT4129 28.39.2048"))
        self.assertEqual(c[("ports", "InfiniBand")], ("1", "8"))
        self.assertEqual(c[("peer_memory", "host")], ("1", "nvidia_peermem,dma_buf"))
        self.assertEqual(len(c), 1 + 8 + 1 + 3 * 8 + 2 * 8 + 1)
        self.assertEqual(errors(self.s), {})
        self.assertEqual(errors(self.s2), {})
        # ACS off on every bridge between a GPU and its NIC (downstream, upstream, downstream port).
        acs = series(self.s, "rdma_topology_path_acs_redirect")
        self.assertEqual(len(acs), 8 * 3)
        self.assertTrue(all(v == "0" for v in acs.values()))

    def test_link_read_at_every_refresh(self):
        lab = dict(device="mlx5_6", pci_function="0000:9a:00.0", hop="0")
        self.assertEqual(value(self.s2, "rdma_pci_link_current_width_lanes", **lab), "4")
        self.assertEqual(value(self.s2, "rdma_pci_link_degraded", **lab), "1")
        self.assertEqual(checks(self.s2)[("pcie_width", "mlx5_6")], ("0", "x4"))
        # The topology itself is cached: the same relations.
        self.assertEqual(series(self.s, "rdma_topology_relation"), series(self.s2, "rdma_topology_relation"))

    def test_refresher_series(self):
        # The first scrape reads (no reading yet; the refresher, every 20 ms here, may publish its
        # own before the scrape takes one); the one after the change serves a later reading.
        self.assertGreaterEqual(int(value(self.s, "rdma_topology_refreshes_total")), 1)
        self.assertGreaterEqual(int(value(self.s2, "rdma_topology_refreshes_total")),
                                int(value(self.s, "rdma_topology_refreshes_total")) + 2)
        for s in (self.s, self.s2):
            self.assertGreaterEqual(float(value(s, "rdma_topology_snapshot_age_seconds")), 0)
            self.assertGreater(float(value(s, "rdma_topology_refresh_duration_seconds")), 0)


class Refresher(unittest.TestCase):
    def test_scrape_serves_the_last_reading(self):
        """A scrape reads no link file: with an interval that never comes in the test, a change
        made after the first scrape is not seen, and every scrape serves reading 1."""
        def retrain(root):
            d = os.path.realpath(os.path.join(root, "class/infiniband/mlx5_6/device"))
            write_file_atomically(os.path.join(d, "current_link_width"), "4\n")
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "sys")
            subprocess.run([sys.executable, os.path.join(HERE, "pci_gen.py"), root], check=True)
            with Exporter(EXPORTER, f"--path.sysfs={root}", "--collector.disable-defaults", "--collector.topology",
                          "--collector.topology.health-interval=1h") as e:
                s1, _ = e.scrape()
                retrain(root)
                s2, _ = e.scrape()
        lab = dict(device="mlx5_6", pci_function="0000:9a:00.0", hop="0")
        self.assertEqual(value(s2, "rdma_pci_link_current_width_lanes", **lab), "16")
        self.assertEqual(value(s2, "rdma_topology_refreshes_total"), "1")
        self.assertLessEqual(float(value(s1, "rdma_topology_snapshot_age_seconds")),
                             float(value(s2, "rdma_topology_snapshot_age_seconds")))

    def test_device_vanishing_between_refreshes(self):
        """mlx5_11 is unregistered and its function removed (hot-unplug) while the refresher reads
        every 20 ms: every scrape succeeds without an error, and the first one after the removal
        has walked the new device set (the scrape that sees it walks): no series of mlx5_11."""
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "sys")
            subprocess.run([sys.executable, os.path.join(HERE, "pci_gen.py"), root], check=True)
            with Exporter(EXPORTER, f"--path.sysfs={root}", "--collector.disable-defaults", "--collector.topology",
                          *FAST) as e:
                before, _ = e.scrape()
                fn = os.path.realpath(os.path.join(root, "class/infiniband/mlx5_11/device"))
                os.unlink(os.path.join(root, "class/infiniband/mlx5_11"))
                os.unlink(os.path.join(root, "bus/pci/devices", os.path.basename(fn)))
                shutil.rmtree(fn)
                after = [e.scrape()[0] for _ in range(3)] + [reading_after(e)]
        self.assertEqual(value(before, "rdma_pci_path_hops", device="mlx5_11"), "4")
        for s in after:
            self.assertEqual(value(s, "rdma_exporter_collector_success", collector="topology"), "1")
            self.assertEqual(errors(s), {})
            self.assertEqual([l for (n, l) in s if dict(l).get("device") == "mlx5_11"], [])
            self.assertEqual(len(series(s, "rdma_pci_path_hops")), 7)


class Variants(unittest.TestCase):
    def test_wrong_slot(self):
        (s,) = run("wrong_slot")
        want = matrix(WRONG_SLOT)
        got = {(dict(l)["device"], int(dict(l)["gpu"])): dict(l)["relation"] for l in series(s, "rdma_topology_relation")}
        self.assertEqual(got, want)
        gpu0 = {dict(l)["device"]: dict(l)["relation"] for l in series(s, "rdma_topology_gpu_closest_nic") if dict(l)["gpu"] == "0"}
        self.assertEqual(gpu0, {"mlx5_3": "NODE", "mlx5_4": "NODE", "mlx5_5": "NODE"})
        nic0 = {dict(l)["gpu"] for l in series(s, "rdma_topology_nic_closest_gpu") if dict(l)["device"] == "mlx5_0"}
        self.assertEqual(nic0, {"4", "5", "6", "7"})
        c = checks(s)
        self.assertEqual(c[("gpu_nic_relation", "gpu0 0000:1b:00.0")], ("0", "NODE mlx5_3,mlx5_4,mlx5_5"))
        self.assertEqual([k for k, v in c.items() if v[0] == "0"], [("gpu_nic_relation", "gpu0 0000:1b:00.0")])
        self.assertEqual(value(s, "rdma_pci_path_hops", device="mlx5_0"), "2")
        self.assertEqual(errors(s), {})

    def test_acs_on_one_switch_port(self):
        (s,) = run("acs")
        # GPU 2 (52:00.0) and mlx5_4 (4f:00.0): downstream port 4e:00.0, upstream 4d:00.0, downstream 4e:01.0.
        acs = {dict(l)["pci_function"]: v for l, v in series(s, "rdma_topology_path_acs_redirect").items()
               if dict(l)["device"] == "mlx5_4"}
        self.assertEqual(acs, {"0000:4e:00.0": "0", "0000:4d:00.0": "0", "0000:4e:01.0": "1"})
        c = checks(s)
        self.assertEqual(c[("acs_off", "gpu2 0000:52:00.0")], ("0", "redirect at 0000:4e:01.0"))
        self.assertEqual([k for k, v in c.items() if v[0] == "0"], [("acs_off", "gpu2 0000:52:00.0")])

    def test_aer_in_every_kernel_format(self):
        # aer_dev_* as 4.19 printed them (long names: "Receiver Error 37810"), as 6.1 does (short
        # names) and as torvalds/linux master does (uncorrectable bits 27-31 named too), each with
        # an unnamed bit ("dev_cor_errs_bit[9] 5"): the same series, every count on its device.
        got = {}
        for kernel in ("4.19", "6.1", "master"):
            (s,) = run(f"aer_{kernel}")
            self.assertEqual(errors(s), {}, kernel)
            aer = {(dict(l)["device"], dict(l)["aer_severity"], dict(l)["type"]): v
                   for l, v in series(s, "rdma_pci_aer_errors_total").items()}
            nonzero = {k: v for k, v in aer.items() if v != "0"}
            self.assertEqual(nonzero, {
                ("mlx5_6", "correctable", "RxErr"): "37810", ("mlx5_6", "correctable", "BadTLP"): "29968",
                ("mlx5_6", "correctable", "BadDLLP"): "46933", ("mlx5_6", "correctable", "bit9"): "5",
                ("mlx5_6", "fatal", "SDES"): "1", ("mlx5_6", "fatal", "MalfTLP"): "3",
                ("mlx5_6", "fatal", "TLPBlockedErr"): "4",
                ("mlx5_9", "correctable", "BadTLP"): "7", ("mlx5_9", "correctable", "Timeout"): "2",
                ("mlx5_9", "nonfatal", "CmpltTO"): "1"}, kernel)
            # Every function of every NIC has its three files read: 8 correctable names on each.
            for nic in NICS:
                cor = {t for (d, sev, t) in aer if d == nic and sev == "correctable"}
                self.assertTrue({"RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr",
                                 "HeaderOF"} <= cor, (kernel, nic))
            reports = {(dict(l)["device"], dict(l)["hop"], dict(l)["aer_severity"]): v
                       for l, v in series(s, "rdma_pci_aer_reports_total").items() if v != "0"}
            self.assertEqual(reports, {("mlx5_6", "0", "correctable"): "114711", ("mlx5_6", "0", "fatal"): "8",
                                       ("mlx5_6", "1", "correctable"): "12",
                                       ("mlx5_9", "0", "correctable"): "8", ("mlx5_9", "0", "nonfatal"): "1"}, kernel)
            fatal_types = {t for (d, sev, t) in aer if d == "mlx5_6" and sev == "fatal"}
            got[kernel] = fatal_types
        # The uncorrectable names each kernel has: 17 in 4.19, 18 in 6.1, 23 today.
        self.assertEqual(len(got["4.19"]), 17)
        self.assertEqual(len(got["6.1"]), 18)
        self.assertEqual(len(got["master"]), 23)
        self.assertTrue(got["4.19"] < got["6.1"] < got["master"])

    def test_config_space_unprivileged(self):
        (s,) = run("config64")
        self.assertEqual(series(s, "rdma_topology_path_acs_redirect"), {})
        self.assertEqual({v for v in series(s, "rdma_topology_path_acs_unreadable").values()}, {"3"})
        c = checks(s)
        self.assertEqual(c[("acs_off", "gpu0 0000:1b:00.0")], ("0", "unknown at 0000:17:00.0,0000:16:00.0,0000:17:01.0"))
        self.assertEqual(errors(s), {})  # a non-root reader's 64 bytes are state

    def test_peermem_missing(self):
        (s,) = run("no_peermem")
        self.assertEqual(value(s, "rdma_topology_peer_memory", path="nvidia_peermem"), "0")
        self.assertEqual(value(s, "rdma_topology_peer_memory", path="dma_buf"), "1")
        c = checks(s)
        self.assertEqual(c[("peer_memory", "host")], ("0", "dma_buf"))
        self.assertEqual([k for k, v in c.items() if v[0] == "0"], [("peer_memory", "host")])
        (s,) = run("no_peermem", expect=EXPECT.replace("peer_memory: true", "peer_memory: dma_buf"))
        self.assertEqual(checks(s)[("peer_memory", "host")], ("1", "dma_buf"))

    def test_nic_trained_at_x8(self):
        (s,) = run("x8")
        # mlx5_5 (5e:00.0) below downstream port 5d:00.0: both ends of the link at x8 of x16.
        for hop, bdf, deg in [(0, "0000:5e:00.0", "1"), (1, "0000:5d:00.0", "1"), (2, "0000:5c:00.0", "0"),
                              (3, "0000:5b:01.0", "0")]:
            lab = dict(device="mlx5_5", pci_function=bdf, hop=str(hop))
            self.assertEqual(value(s, "rdma_pci_link_degraded", **lab), deg)
            self.assertEqual(value(s, "rdma_pci_link_current_width_lanes", **lab), "8" if hop < 2 else "16")
            self.assertEqual(value(s, "rdma_pci_link_bottleneck", **lab), "1" if hop == 1 else "0")
        self.assertAlmostEqual(float(value(s, "rdma_pci_path_bandwidth_bytes_per_second", device="mlx5_5")),
                               32e9 * 8 * 128 / 130 / 8, delta=1)
        c = checks(s)
        self.assertEqual(c[("pcie_width", "mlx5_5")], ("0", "x8"))
        self.assertEqual([k for k, v in c.items() if v[0] == "0"], [("pcie_width", "mlx5_5")])


class BadExpect(unittest.TestCase):
    def test_errors_name_the_file_and_the_expect_section(self):
        # The position is the expect: section's (the options keep the section's origin).
        cases = [("      gpu: 8\n", "config.yml:4:7: unknown key `gpu` in expect"),
                 ("      gpu_nic_relation: NV18\n", "config.yml:4:7: expect.gpu_nic_relation must be PIX, PXB, PHB, NODE or SYS"),
                 ("      pcie: {width: 64}\n", "config.yml:4:7: expect.pcie.width must be 1 to 32"),
                 ("      devices: \"(\"\n", "config.yml:4:7: expect.devices: bad regular expression"),
                 ("      firmware: {MT4129: []}\n", "config.yml:4:7: expect.firmware.MT4129 must be a list of 1 to 64 versions"),
                 ("      peer_memory: maybe\n", "config.yml:4:7: expect.peer_memory must be true")]
        with tempfile.TemporaryDirectory() as tmp:
            cfg = os.path.join(tmp, "config.yml")
            for item, message in cases:
                with open(cfg, "w") as f:
                    f.write("collectors:\n  topology:\n    expect:\n" + item)
                p = subprocess.run([EXPORTER, f"--config.file={cfg}", "--web.listen-address=127.0.0.1:0",
                                    f"--path.sysfs={tmp}"], capture_output=True, text=True, timeout=30)
                self.assertEqual(p.returncode, 2, item)
                self.assertIn(message, p.stderr, item)


class ExistingTrees(unittest.TestCase):
    def test_fixture_and_demo_trees_scrape_clean(self):
        for profile in ("fixtures", "demo"):
            with tempfile.TemporaryDirectory() as tmp:
                write_tree(tmp, profile)
                with Exporter(EXPORTER, f"--path.sysfs={tmp}", "--collector.disable-defaults", "--collector.topology") as e:
                    s, _ = e.scrape()
                    s, _ = e.scrape()
            self.assertEqual(errors(s), {}, profile)
            self.assertEqual(value(s, "rdma_exporter_collector_success", collector="topology"), "1")
            if profile == "fixtures":
                self.assertEqual(series(s, "rdma_topology_relation"), {})
                self.assertEqual(value(s, "rdma_topology_gpus"), "0")
                continue
            # the demo: ionic_0 and bnxt_re1 each share a PCIe switch with one GPU, as on a GPU node
            self.assertEqual(value(s, "rdma_topology_gpus"), "2")
            closest = {dict(k)["device"]: dict(k)["relation"] for k in series(s, "rdma_topology_gpu_closest_nic")}
            self.assertEqual(closest, {"ionic_0": "PIX", "bnxt_re1": "PIX"})
            self.assertEqual(value(s, "rdma_pci_aer_errors_total", device="ionic_0", pci_function="0000:c1:00.0",
                                   hop="0", aer_severity="correctable", type="BadTLP"), "4")


class SoftwareRdmaDevice(unittest.TestCase):
    def test_rxe_takes_its_pci_netdevs_path(self):
        """rxe has no device link of its own (the guest of vm.topology.pcie shows it on a real
        kernel): an rxe bound to a PCI NIC's netdev gets that function's path and relations; one
        on a virtual netdev (veth) has none, and neither is an error."""
        import pci_gen
        from sysfs_gen import Device, netdev
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "sys")
            node = pci_gen.Node(root, "base")
            t = node.build()
            rp = node.bridge("devices/pci0000:f0/0000:f0:01.0", 1, speed="2.5 GT/s PCIe", width=1,
                             max_speed="8.0 GT/s PCIe", max_width=4)
            fn = node.function(f"{rp}/0000:f1:00.0", "0x020000", "0x8086", "0x10d3", 1, speed="2.5 GT/s PCIe", width=1)
            nd = netdev(t, f"{fn}/net/ens9")
            t.link(f"{nd}/device", "../../../0000:f1:00.0")
            netdev(t, "devices/virtual/net/veth0")
            for name, parent in (("rxe0", "ens9"), ("rxe1", "veth0")):
                d = Device(t, name, "", "rdma_rxe", guid_n=0x505400fffe000001, parent_netdev=parent, pci=False)
                d.gid_ndevs(d.port(1, "Ethernet", rate="2.5 Gb/sec (1X SDR)"), [parent, parent])
            with Exporter(EXPORTER, f"--path.sysfs={root}", "--collector.disable-defaults", "--collector.topology") as e:
                e.scrape()
                s, _ = e.scrape()
        self.assertEqual(value(s, "rdma_pci_function_info", device="rxe0", pci_function="0000:f1:00.0",
                               pci_id="8086:10d3", **{"class": "0x020000"}, host_bridge="pci0000:f0", numa_node="1"), "1")
        self.assertEqual(value(s, "rdma_pci_path_hops", device="rxe0"), "2")
        self.assertEqual(value(s, "rdma_pci_link_bottleneck", device="rxe0", pci_function="0000:f0:01.0", hop="1"), "1")
        self.assertEqual(value(s, "rdma_pci_link_degraded", device="rxe0", pci_function="0000:f0:01.0", hop="1"), "0")
        # NUMA 1, its own host bridge: NODE to the GPUs of CPU 1, SYS to those of CPU 0
        def of(name, device):
            return {dict(l).get("gpu"): (dict(l).get("relation"), v) for l, v in series(s, name).items()
                    if dict(l)["device"] == device}
        self.assertEqual(of("rdma_topology_relation", "rxe0"),
                         {str(g): ("NODE", "4") if g >= 4 else ("SYS", "5") for g in range(8)})
        self.assertEqual(of("rdma_pci_path_hops", "rxe1"), {})
        self.assertEqual(of("rdma_topology_relation", "rxe1"), {})
        self.assertEqual(errors(s), {})


if __name__ == "__main__":
    unittest.main(verbosity=2)
