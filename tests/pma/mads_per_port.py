#!/usr/bin/env python3
"""Measures the PMA MADs one InfiniBand port costs per scrape with the default collectors (port,
counters-source auto, and pma, local mode) on ibsim: the port collector's own count
(rdma_port_pma_reads{source="mad"}) plus the pma collector's, which is PortCounters plus every
optional attribute it asks (rdma_pma_port_attribute_supported == 1; 1 + their sum), or, where the
exporter has it, rdma_pma_port_mads. Prints the fewest of 5 steady scrapes (a retry on a loaded
host adds one).

usage: mads_per_port.py --exporter PATH
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from exporter_harness import take_exporter_arg  # noqa: E402
from ibsim_harness import DEFAULT_NET, Exporter, Sim, get  # noqa: E402
from test_pma import port_tree  # noqa: E402


def get_or_none(m, name, **labels):
    try:
        return get(m, name, **labels)
    except KeyError:
        return None


def main():
    exe = take_exporter_arg()
    sim = Sim(DEFAULT_NET)
    try:
        lid = sim.lids()["Hca1"][1]
        root, _ = port_tree(sim, 0x100000, lid)
        e = Exporter(sim, exe, "--collector.pma", collector="port", sysfs=root)
        L = {"device": "ibsim0", "port": "1"}
        e.metrics()  # the first scrape asks ClassPortInfo
        rows = []
        for _ in range(5):
            m = e.metrics()
            port = get(m, "rdma_port_pma_reads", source="mad", **L)
            asked = 1 + sum(v for (n, l), v in m.items()
                            if n == "rdma_pma_port_attribute_supported" and dict(l).get("device") == "ibsim0")
            pma = get_or_none(m, "rdma_pma_port_mads", **L)
            rows.append((port + (pma if pma is not None else asked), port, pma if pma is not None else asked))
        e.stop()
        total, port, pma = min(rows)
        print("MADs per IB port per scrape (defaults, fewest of 5): %d = port collector %d + pma local %d%s"
              % (total, port, pma, "" if get_or_none(m, "rdma_pma_port_mads", **L) is not None else " (derived)"))
    finally:
        sim.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
