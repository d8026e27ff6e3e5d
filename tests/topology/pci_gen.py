#!/usr/bin/env python3
"""Writes fake /sys trees of an 8-GPU / 8-NIC node shaped like an NVIDIA DGX/HGX H100 in the
kernel's exact formats (drivers/pci/pci-sysfs.c, drivers/pci/pcie/aer.c), plus its variants.

Layout (each GPU k = 0..7 and its NIC under one PCIe switch, each switch under its own host
bridge; GPUs 0-3 on NUMA node 0, 4-7 on node 1):

  devices/pci0000:HB/0000:HB:01.0                      root port        (HB = NIC bus - 3)
      0000:HB+1:00.0                                   PCIe switch upstream port
          0000:HB+2:00.0 / 0000:<NIC bus>:00.0         downstream port / ConnectX-7
          0000:HB+2:01.0 / 0000:<NIC bus + 3>:00.0     downstream port / H100 SXM

NIC names, buses, GPUs and CPUs are those of the DGX H100 User Guide, section 1.2.3 "Network
Modules", Table 6 (compute ports: mlx5_0 ibp24s0 -> GPU 0 on CPU 0, mlx5_3 ibp64s0 -> GPU 1, mlx5_4
ibp79s0 -> GPU 2, mlx5_5 ibp94s0 -> GPU 3, mlx5_6 ibp154s0 -> GPU 4 on CPU 1, mlx5_9 ibp192s0 ->
GPU 5, mlx5_10 ibp206s0 -> GPU 6, mlx5_11 ibp220s0 -> GPU 7); each GPU at its NIC's bus + 3
(1b, 43, 52, 61, 9d, c3, d1, df), as a DGX H100 enumerates them. Every PCIe
function has current/max link speed and width, the three aer_dev_* files, numa_node, class,
vendor, device; the bridges have a 4096-byte `config` whose extended capability list holds AER
(0x100) and ACS (0x148), ACS control 0 (off) unless a variant sets it.

  pci_gen.py OUT [--variant base|wrong_slot|acs|no_peermem|x8|config64|aer_4.19|aer_6.1|aer_master]

The aer_dev_* files are in 6.1's format (short names) unless an aer_<kernel> variant names
another; those variants add the same extra counts on mlx5_6 and its downstream port in each
kernel's format, so that the exported series must be the same for all three.
"""
import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sysfs_gen import Device, Tree  # noqa: E402

# (RDMA device, NIC bus) of GPU 0..7, DGX H100 User Guide Table 6.
PAIRS = [("mlx5_0", 24), ("mlx5_3", 64), ("mlx5_4", 79), ("mlx5_5", 94), ("mlx5_6", 154), ("mlx5_9", 192),
         ("mlx5_10", 206), ("mlx5_11", 220)]
# aer_correctable_error_string / aer_uncorrectable_error_string (drivers/pci/pcie/aer.c): the
# named bit positions, in bit order, as each kernel generation printed them in aer_dev_*:
#   "4.19"   the long names the files came with (RHEL 8's 4.18 has them by backport): correctable
#            bits 0-15, uncorrectable 0-25;
#   "6.1"    the short names lspci uses, uncorrectable up to bit 26 "PoisonTLPBlocked" (5.5);
#   "master" torvalds/linux today: uncorrectable bits 27-31 named too (PCIe r6.0, 2025).
AER_COR_SHORT = [(0, "RxErr"), (6, "BadTLP"), (7, "BadDLLP"), (8, "Rollover"), (12, "Timeout"), (13, "NonFatalErr"),
                 (14, "CorrIntErr"), (15, "HeaderOF")]
AER_COR_LONG = [(0, "Receiver Error"), (6, "Bad TLP"), (7, "Bad DLLP"), (8, "RELAY_NUM Rollover"),
                (12, "Replay Timer Timeout"), (13, "Advisory Non-Fatal"), (14, "Corrected Internal Error"),
                (15, "Header Log Overflow")]
AER_UNCOR_SHORT = [(0, "Undefined"), (4, "DLP"), (5, "SDES"), (12, "TLP"), (13, "FCP"), (14, "CmpltTO"),
                   (15, "CmpltAbrt"), (16, "UnxCmplt"), (17, "RxOF"), (18, "MalfTLP"), (19, "ECRC"), (20, "UnsupReq"),
                   (21, "ACSViol"), (22, "UncorrIntErr"), (23, "BlockedTLP"), (24, "AtomicOpBlocked"),
                   (25, "TLPBlockedErr"), (26, "PoisonTLPBlocked")]
AER_UNCOR_LONG = [(0, "Undefined"), (4, "Data Link Protocol"), (5, "Surprise Down Error"), (12, "Poisoned TLP"),
                  (13, "Flow Control Protocol"), (14, "Completion Timeout"), (15, "Completer Abort"),
                  (16, "Unexpected Completion"), (17, "Receiver Overflow"), (18, "Malformed TLP"), (19, "ECRC"),
                  (20, "Unsupported Request"), (21, "ACS Violation"), (22, "Uncorrectable Internal Error"),
                  (23, "MC Blocked TLP"), (24, "AtomicOp Egress Blocked"), (25, "TLP Prefix Blocked Error")]
AER_UNCOR_R6 = [(27, "DMWrReqBlocked"), (28, "IDECheck"), (29, "MisIDETLP"), (30, "PCRC_CHECK"), (31, "TLPXlatBlocked")]
# kernel -> (correctable names, size of its array), (uncorrectable names, size)
AER_FORMATS = {
    "4.19": ((AER_COR_LONG, 16), (AER_UNCOR_LONG, 26)),
    "6.1": ((AER_COR_SHORT, 16), (AER_UNCOR_SHORT, 27)),
    "master": ((AER_COR_SHORT, 32), (AER_UNCOR_SHORT + AER_UNCOR_R6, 32)),
}
# Short names: what the exporter names every bit by (its `type` label), whatever the kernel printed.
SHORT_OF = {n: sn for (b, n), (_, sn) in zip(AER_COR_LONG + AER_UNCOR_LONG, AER_COR_SHORT + AER_UNCOR_SHORT)}
AER_COR = [n for _, n in AER_COR_SHORT]
AER_UNCOR = [n for _, n in AER_UNCOR_SHORT]
ACS_SV, ACS_RR, ACS_CR, ACS_UF = 0x01, 0x04, 0x08, 0x10
ACS_LINUX_DEFAULT = ACS_SV | ACS_RR | ACS_CR | ACS_UF  # what pci_std_enable_acs() sets on a switch port


def aer_text(table, values, total_name, array, total=True):
    """aer_stats_dev_attr(): one "%s %llu" line per named bit of the kernel's array (size), in bit
    order, "<array>_bit[%d] %llu" for an unnamed bit whose count is not 0, then TOTAL_<name>.
    values: short name or "bit<N>" -> count, "TOTAL" -> the total."""
    names, size = table
    by_bit = dict(names)
    lines = []
    for bit in range(size):
        if bit in by_bit:
            name = by_bit[bit]
            lines.append(f"{name} {values.get(SHORT_OF.get(name, name), 0)}\n")
        elif values.get(f"bit{bit}", 0):
            lines.append(f"{array}_bit[{bit}] {values[f'bit{bit}']}\n")
    if total:
        lines.append(f"TOTAL_{total_name} {values.get('TOTAL', 0)}\n")
    return "".join(lines)


def config_space(acs_control, size=4096):
    """Config space of a bridge: type 1 header, AER at 0x100 -> ACS at 0x148 (cap, control)."""
    b = bytearray(4096)
    struct.pack_into("<HH", b, 0, 0x1000, 0xc030)          # Broadcom PEX89xxx switch port
    struct.pack_into("<I", b, 0x100, 0x0001 | 2 << 16 | 0x148 << 20)  # AER v2, next 0x148
    struct.pack_into("<I", b, 0x148, 0x000d | 1 << 16 | 0 << 20)      # ACS v1, last
    struct.pack_into("<HH", b, 0x14c, 0x005f, acs_control)            # capability (SV TB RR CR UF DT), control
    return bytes(b[:size])


class Node:
    def __init__(self, root, variant):
        self.t = Tree(root)
        self.variant = variant
        # aer_<kernel>: every function's aer_dev_* files in that kernel's format, with more counts.
        self.kernel = variant[4:] if variant.startswith("aer_") else "6.1"
        os.makedirs(self.t.root, exist_ok=True)
        self.t.mkdir("bus/pci/devices")

    def function(self, rel_dir, cls, vendor, device, numa, speed="32.0 GT/s PCIe", width=16, max_speed=None,
                 max_width=None, aer=None, config=None, kernel=None):
        t = self.t
        for k, v in (("class", cls), ("vendor", vendor), ("device", device), ("numa_node", numa),
                     ("current_link_speed", speed), ("max_link_speed", max_speed or speed),
                     ("current_link_width", width), ("max_link_width", max_width or width)):
            t.attr(f"{rel_dir}/{k}", v)
        aer = aer or {}
        cor, uncor = AER_FORMATS[kernel or self.kernel]
        t.write(f"{rel_dir}/aer_dev_correctable", aer_text(cor, aer.get("correctable", {}), "ERR_COR", "dev_cor_errs"))
        t.write(f"{rel_dir}/aer_dev_nonfatal",
                aer_text(uncor, aer.get("nonfatal", {}), "ERR_NONFATAL", "dev_nonfatal_errs"))
        t.write(f"{rel_dir}/aer_dev_fatal", aer_text(uncor, aer.get("fatal", {}), "ERR_FATAL", "dev_fatal_errs"))
        if config is not None:
            p = t.path(f"{rel_dir}/config")
            with open(p, "wb") as f:
                f.write(config)
        bdf = os.path.basename(rel_dir)
        t.link(f"bus/pci/devices/{bdf}", os.path.relpath(t.path(rel_dir), t.path("bus/pci/devices")))
        return rel_dir

    def bridge(self, rel_dir, numa, acs=0, **kw):
        size = 64 if self.variant == "config64" else 4096
        return self.function(rel_dir, "0x060400", "0x1000", "0xc030", numa, config=config_space(acs, size), **kw)

    def nic(self, name, k, rel_dir, numa, **kw):
        self.function(rel_dir, "0x020700", "0x15b3", "0x1021", numa, **kw)
        d = Device(self.t, name, os.path.basename(rel_dir), "mlx5_core", fw="28.39.2048",
                   guid_n=0x946dae0300a0b000 + k, attrs={"hca_type": "MT4129", "board_id": "MT_0000000838"},
                   pci_dir=rel_dir)
        d.port(1, "InfiniBand", rate="400 Gb/sec (4X NDR)", lid=f"0x{k + 1:x}", sm_lid="0x1")

    def build(self):
        v = self.variant
        for k, (name, nbus) in enumerate(PAIRS):
            hb, gbus = nbus - 3, nbus + 3
            numa = 0 if k < 4 else 1
            host = f"devices/pci{0:04x}:{hb:02x}"
            rp = self.bridge(f"{host}/0000:{hb:02x}:01.0", numa)
            usp = self.bridge(f"{rp}/0000:{hb + 1:02x}:00.0", numa)
            nic_width = 8 if (v == "x8" and name == "mlx5_5") else 16
            dsp_aer = {"correctable": {"BadTLP": 12, "TOTAL": 12}} if v.startswith("aer_") and k == 4 else None
            dsp_nic = self.bridge(f"{usp}/0000:{hb + 2:02x}:00.0", numa, width=nic_width, max_width=16, aer=dsp_aer)
            dsp_gpu = self.bridge(f"{usp}/0000:{hb + 2:02x}:01.0", numa,
                                  acs=ACS_LINUX_DEFAULT if (v == "acs" and k == 2) else 0)
            gpu = f"{dsp_gpu}/0000:{gbus:02x}:00.0"
            self.function(gpu, "0x030200", "0x10de", "0x2330", numa,
                          aer={"correctable": {"RxErr": 3, "TOTAL": 3}} if k == 1 else None)
            if v == "wrong_slot" and name == "mlx5_0":
                # The NIC sits in a slot of the other socket: a root port of host bridge e8 (NUMA 1).
                rp2 = self.bridge("devices/pci0000:e8/0000:e8:01.0", 1)
                self.nic(name, k, f"{rp2}/0000:e9:00.0", 1)
            else:
                aer = {"correctable": {"BadTLP": 7, "Timeout": 2, "TOTAL": 8},
                       "nonfatal": {"CmpltTO": 1, "TOTAL": 1}} if k == 5 else None
                if v.startswith("aer_") and k == 4:
                    # The counts of a 4.19-era report: bit 9 has no name in any kernel.
                    aer = {"correctable": {"RxErr": 37810, "BadTLP": 29968, "BadDLLP": 46933, "bit9": 5,
                                           "TOTAL": 114711},
                           "fatal": {"SDES": 1, "MalfTLP": 3, "TLPBlockedErr": 4, "TOTAL": 8}}
                self.nic(name, k, f"{dsp_nic}/0000:{nbus:02x}:00.0", numa, width=nic_width, max_width=16, aer=aer)
        # A BMC's VGA (ASPEED): class 0x0300 but no accelerator.
        self.function("devices/pci0000:00/0000:00:1c.0/0000:02:00.0", "0x030000", "0x1a03", "0x2000", 0,
                      speed="5.0 GT/s PCIe", width=1)
        self.bridge("devices/pci0000:00/0000:00:1c.0", 0, speed="5.0 GT/s PCIe", width=1)
        if v != "no_peermem":
            self.t.mkdir("module/nvidia_peermem/parameters")
        return self.t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--variant", default="base", choices=["base", "wrong_slot", "acs", "no_peermem", "x8", "config64",
                                                     "aer_4.19", "aer_6.1", "aer_master"])
    a = ap.parse_args()
    Node(a.out, a.variant).build()
    return 0


if __name__ == "__main__":
    sys.exit(main())
