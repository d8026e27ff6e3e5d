#!/usr/bin/env python3
"""fixtures: the hw_counters collector in the real exporter on tests/lib/sysfs_gen.py's tree.

Every port- and device-level hw_counters file the generator wrote is exported with its exact
value (u64, incl. 2^63 and 2^64-1), lifespan as seconds, gauges as gauges; the normalised
metrics of each driver equal the vendor counters they come from. The expectations here are
written from the kernel drivers independently of collectors/hw_counters/driver_tables.cpp.
"""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from exporter_harness import Exporter, series, take_exporter_arg, value, write_tree  # noqa: E402

EXPORTER = take_exporter_arg()

DRIVER = {"mlx5_0": "mlx5", "mlx5_1": "mlx5", "mlx5_bond_0": "mlx5", "rxe0": "rxe", "bnxt_re0": "bnxt_re",
          "mlx4_0": "mlx4", "hfi1_0": "hfi1", "i40iw0": "i40iw", "efa_0": "efa", "irdma0": "irdma",
          "mana_0": "mana", "erdma_0": "erdma", "erdma_1": "erdma", "broken0": "mlx5", "vanished0": "mlx5",
          "ionic_0": "ionic", "bnxt_re1": "bnxt_re", "hns_0": "hns"}


def is_gauge(driver, name):
    if driver == "bnxt_re":
        return name.startswith("active_") or name.startswith("watermark_") or name == "db_fifo_register"
    if driver == "mana":
        return name in ("current_rate", "num_qps_congested")
    if driver == "hfi1":
        return name == "DRIVER_CtxtsOpen"
    return False


# driver -> normalised metric -> alternatives (each a list of counters summed; "dev:" = device level).
# A metric "name/kind" is the series of `name` with that kind label.
TRANSPORT, RNR = "rdma_qp_retries_exceeded_total/transport", "rdma_qp_retries_exceeded_total/rnr"
NORM = {
    "mlx5": {
        "rdma_roce_cnp_sent_total": [["np_cnp_sent"]],
        "rdma_roce_cnp_handled_total": [["rp_cnp_handled"]],
        "rdma_roce_cnp_ignored_total": [["rp_cnp_ignored"]],
        "rdma_roce_ecn_marked_packets_total": [["np_ecn_marked_roce_packets"]],
        "rdma_out_of_sequence_packets_total": [["out_of_sequence"]],
        "rdma_packet_sequence_error_naks_total": [["packet_seq_err"]],
        "rdma_local_ack_timeouts_total": [["local_ack_timeout_err"]],
        "rdma_rnr_nak_retries_total": [["rnr_nak_retry_err"]],
        "rdma_duplicate_requests_total": [["duplicate_request"]],
        "rdma_icrc_errors_total": [["rx_icrc_encapsulated"]],
        "rdma_out_of_buffer_drops_total": [["out_of_buffer"]],
        TRANSPORT: [["req_transport_retries_exceeded"]],
        RNR: [["req_rnr_retries_exceeded"]],
    },
    "bnxt_re": {
        "rdma_roce_cnp_sent_total": [["tx_cnp_pkts"], ["np_cnp_pkts"]],
        "rdma_roce_cnp_handled_total": [["rx_cnp_pkts"], ["rp_cnp_handled"]],
        "rdma_roce_ecn_marked_packets_total": [["rx_ecn_marked_pkts"], ["np_ecn_marked_roce_packets"]],
        "rdma_out_of_sequence_packets_total": [["oos_drop_count"], ["out_of_sequence"]],
        "rdma_packet_sequence_error_naks_total": [["seq_err_naks_rcvd"], ["packet_seq_err"]],
        "rdma_local_ack_timeouts_total": [["to_retransmits"], ["local_ack_timeout_err"]],
        "rdma_rnr_nak_retries_total": [["rnr_naks_rcvd"], ["rnr_nak_retry_err"]],
        "rdma_duplicate_requests_total": [["dup_req"], ["duplicate_request"]],
        "rdma_receive_discards_total": [["rx_roce_discards"]],
        "rdma_transmit_discards_total": [["tx_roce_discards"]],
        "rdma_out_of_buffer_drops_total": [["rx_out_of_buffer"], ["out_of_buffer"]],
        "rdma_transport_transmit_packets_total": [["tx_pkts"]],
        "rdma_transport_receive_packets_total": [["rx_pkts"]],
        "rdma_transport_transmit_bytes_total": [["tx_bytes"]],
        "rdma_transport_receive_bytes_total": [["rx_bytes"]],
        TRANSPORT: [["max_retry_exceeded"]],
    },
    "irdma": {
        "rdma_roce_cnp_sent_total": [["cnpSent"]],
        "rdma_roce_cnp_handled_total": [["cnpHandled"]],
        "rdma_roce_cnp_ignored_total": [["cnpIgnored"]],
        "rdma_roce_ecn_marked_packets_total": [["RxECNMrkd"]],
        "rdma_retransmissions_total": [["tcpRetransSegs"], ["RetransSegs"]],
        "rdma_receive_discards_total": [["ip4InDiscards", "ip6InDiscards"], ["ip4InDiscards"]],
        "rdma_transport_transmit_packets_total": [["ip4OutPkts", "ip6OutPkts"], ["ip4OutPkts"]],
        "rdma_transport_receive_packets_total": [["ip4InPkts", "ip6InPkts"], ["ip4InPkts"]],
        "rdma_transport_transmit_bytes_total": [["ip4OutOctets", "ip6OutOctets"], ["ip4OutOctets"]],
        "rdma_transport_receive_bytes_total": [["ip4InOctets", "ip6InOctets"], ["ip4InOctets"]],
    },
    "rxe": {
        "rdma_out_of_sequence_packets_total": [["out_of_seq_request"]],
        "rdma_packet_sequence_error_naks_total": [["rcvd_seq_err"]],
        "rdma_retransmissions_total": [["completer_retry_err"]],
        "rdma_rnr_nak_retries_total": [["rcvd_rnr_err"]],
        "rdma_duplicate_requests_total": [["duplicate_request"]],
        "rdma_transport_transmit_packets_total": [["sent_pkts"]],
        "rdma_transport_receive_packets_total": [["rcvd_pkts"]],
        TRANSPORT: [["retry_exceeded_err"]],
        RNR: [["retry_rnr_exceeded_err"]],
    },
    "efa": {
        "rdma_local_ack_timeouts_total": [["retrans_timeout_events"]],
        "rdma_retransmissions_total": [["retrans_pkts"]],
        "rdma_receive_discards_total": [["rx_drops"]],
        "rdma_transport_transmit_packets_total": [["tx_pkts"]],
        "rdma_transport_receive_packets_total": [["rx_pkts"]],
        "rdma_transport_transmit_bytes_total": [["tx_bytes"]],
        "rdma_transport_receive_bytes_total": [["rx_bytes"]],
    },
    "mana": {
        "rdma_roce_cnp_sent_total": [["dev:sent_cnps"]],
        "rdma_roce_cnp_handled_total": [["received_cnps"], ["dev:received_cnp_count"]],
        "rdma_roce_ecn_marked_packets_total": [["dev:received_ecns"]],
        "rdma_out_of_sequence_packets_total": [["responder_oos"]],
        "rdma_packet_sequence_error_naks_total": [["requester_oos_nak"]],
        "rdma_local_ack_timeouts_total": [["requester_timeout"]],
        "rdma_rnr_nak_retries_total": [["requester_rnr_nak"]],
        "rdma_duplicate_requests_total": [["responder_dup_request"], ["dup_rx_requests"]],
        "rdma_transport_transmit_packets_total": [["tx_packets"]],
        "rdma_transport_receive_packets_total": [["rx_packets"]],
        "rdma_transport_transmit_bytes_total": [["tx_bytes"]],
        "rdma_transport_receive_bytes_total": [["rx_bytes"]],
        TRANSPORT: [["requester_retries_exceeded"]],
        RNR: [["requester_rnr_nak_retries_exceeded"]],
    },
    "erdma": {
        "rdma_receive_discards_total": [["rx_disable_drop_cnt", "rx_bps_limit_drop_cnt", "rx_pps_limit_drop_cnt"],
                                        ["rx_disable_drop_cnt"]],
        "rdma_transmit_discards_total": [["tx_disable_drop_cnt", "tx_bps_limit_drop_cnt", "tx_pps_limit_drop_cnt"],
                                         ["tx_disable_drop_cnt"]],
        "rdma_transport_transmit_packets_total": [["tx_packets_cnt"], ["hw_tx_packets_cnt"]],
        "rdma_transport_receive_packets_total": [["rx_packets_cnt"], ["hw_rx_packets_cnt"]],
        "rdma_transport_transmit_bytes_total": [["tx_bytes_cnt"], ["hw_tx_bytes_cnt"]],
        "rdma_transport_receive_bytes_total": [["rx_bytes_cnt"], ["hw_rx_bytes_cnt"]],
    },
    "hns": {
        "rdma_roce_cnp_sent_total": [["tx_cnp_pkt"]],
        "rdma_roce_cnp_handled_total": [["rx_cnp_pkt"]],
        "rdma_transport_transmit_packets_total": [["tx_pkt"]],
        "rdma_transport_receive_packets_total": [["rx_pkt"]],
    },
    "ionic": {
        "rdma_roce_cnp_sent_total": [["tx_rdma_cnp_pkts"]],
        "rdma_roce_cnp_handled_total": [["rx_rdma_cnp_pkts"]],
        "rdma_roce_ecn_marked_packets_total": [["rx_rdma_ecn_pkts"]],
        "rdma_out_of_sequence_packets_total": [["resp_rx_outouf_seq"]],
        "rdma_packet_sequence_error_naks_total": [["req_rx_pkt_seq_err"]],
        "rdma_duplicate_requests_total": [["resp_rx_dup_request"]],
        "rdma_out_of_buffer_drops_total": [["resp_rx_outof_buf"]],
        "rdma_transport_transmit_packets_total": [["tx_rdma_ucast_pkts", "tx_rdma_mcast_pkts"]],
        "rdma_transport_receive_packets_total": [["rx_rdma_ucast_pkts", "rx_rdma_mcast_pkts"]],
        "rdma_transport_transmit_bytes_total": [["tx_rdma_ucast_bytes", "tx_rdma_mcast_bytes"]],
        "rdma_transport_receive_bytes_total": [["rx_rdma_ucast_bytes", "rx_rdma_mcast_bytes"]],
        TRANSPORT: [["req_tx_retry_excd_err"]],
    },
}
# erdma's upstream drop sums and the out-of-tree driver's (transmit drops without "tx_")
NORM["erdma"]["rdma_receive_discards_total"].append(
    ["hw_rx_disable_drop_cnt", "hw_rx_bps_limit_drop_cnt", "hw_rx_pps_limit_drop_cnt"])
NORM["erdma"]["rdma_transmit_discards_total"].append(
    ["hw_disable_drop_cnt", "hw_bps_limit_drop_cnt", "hw_pps_limit_drop_cnt"])
NORM_METRICS = sorted({m for d in NORM.values() for m in d})


class HwCountersFixtures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="rdma-hw-fixtures-")
        root = os.path.join(cls.tmp.name, "sys")
        cls.m = write_tree(root, with_manifest=True)
        with Exporter(EXPORTER, f"--path.sysfs={root}", "--collector.disable-defaults", "--collector.hw_counters") as e:
            cls.text = e.get()[2]
            cls.samples, cls.types = e.scrape()
            cls.samples2, _ = e.scrape()
        # (device, port or None) -> {counter: int}
        cls.files = {}
        for rel, content in cls.m["files"].items():
            parts = rel.split("/")
            if len(parts) < 2 or parts[-2] != "hw_counters" or rel in cls.m["special"]:
                continue
            if "ports" in parts:
                i = parts.index("ports")
                key = (parts[i - 1], parts[i + 1])
            else:
                key = (parts[-3], None)
            cls.files.setdefault(key, {})[parts[-1]] = int(content)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_every_hw_counters_file_exact(self):
        n = big = 0
        for (dev, port), files in self.files.items():
            drv = DRIVER[dev]
            lv = {"device": dev} if port is None else {"device": dev, "port": port}
            prefix = "rdma_hw_device_counters" if port is None else "rdma_hw_counters"
            for name, v in files.items():
                with self.subTest(dev=dev, port=port, counter=name):
                    if name == "lifespan":
                        self.assertAlmostEqual(float(value(self.samples, f"{prefix}_lifespan_seconds", **lv)), v / 1000)
                    elif is_gauge(drv, name):
                        self.assertEqual(int(value(self.samples, f"{prefix}_level", **lv, counter=name)), v)
                    else:
                        self.assertEqual(value(self.samples, f"{prefix}_total", **lv, counter=name), str(v))
                        big += v >= 2**63
                    n += 1
        self.assertGreater(n, 200)
        self.assertGreaterEqual(big, 2)  # hfi1 TxWait 2^64-1, Cce LATriggered 2^63

    def test_nothing_but_the_files(self):
        exported = 0
        for fam in ("rdma_hw_counters_total", "rdma_hw_counters_level", "rdma_hw_device_counters_total", "rdma_hw_device_counters_level",
                    "rdma_hw_counters_lifespan_seconds", "rdma_hw_device_counters_lifespan_seconds"):
            exported += len(series(self.samples, fam))
        self.assertEqual(exported, sum(len(f) for f in self.files.values()))
        self.assertEqual(self.types["rdma_hw_counters_total"], "counter")
        self.assertEqual(self.types["rdma_hw_counters_level"], "gauge")
        self.assertEqual(self.types["rdma_hw_counters_lifespan_seconds"], "gauge")
        self.assertEqual(series(self.samples, "rdma_exporter_collector_errors_total").get(
            frozenset({("collector", "hw_counters")}), None), None)
        # the only errors: ionic's undecodable value (test_ionic_all_ones_is_no_sample_and_an_error)
        self.assertEqual({dict(k)["reason"] for k in series(self.samples, "rdma_exporter_collector_errors_total")
                          if dict(k).get("collector") == "hw_counters"}, {"invalid_value"})

    def test_normalised_metrics_per_driver(self):
        checked = set()
        for (dev, port), files in self.files.items():
            if port is None:
                continue
            drv = DRIVER[dev]
            devfiles = self.files.get((dev, None), {})
            want = {}
            for metric, alternatives in NORM.get(drv, {}).items():
                for alt in alternatives:
                    vals = [devfiles.get(c[4:]) if c.startswith("dev:") else files.get(c) for c in alt]
                    if all(v is not None for v in vals):
                        want[metric] = sum(vals)
                        break
            got = {}
            for metric in NORM_METRICS:
                name, _, kind = metric.partition("/")
                labels = {("device", dev), ("port", port)} | ({("kind", kind)} if kind else set())
                s = series(self.samples, name).get(frozenset(labels))
                if s is not None:
                    got[metric] = int(s)
            with self.subTest(dev=dev, port=port):
                self.assertEqual(got, want)
            if want:
                checked.add(drv)
        self.assertEqual(checked, {"mlx5", "bnxt_re", "irdma", "rxe", "efa", "mana", "erdma", "hns", "ionic"})
        # every series of the retries family is one of the expected ones (no stray kind)
        self.assertTrue(all(dict(k)["kind"] in ("transport", "rnr")
                            for k in series(self.samples, "rdma_qp_retries_exceeded_total")))
        self.assertGreaterEqual(len(series(self.samples, "rdma_qp_retries_exceeded_total")), 8)

    def test_ionic_all_ones_is_no_sample_and_an_error(self):
        invalid = [rel for rel, kind in self.m["special"].items() if kind == "invalid_all_ones"]
        self.assertEqual(len(invalid), 1)
        self.assertEqual(self.m["files"][invalid[0]], "%d\n" % (2**64 - 1))
        name = invalid[0].rsplit("/", 1)[1]
        self.assertIsNone(series(self.samples, "rdma_hw_counters_total").get(
            frozenset({("device", "ionic_0"), ("port", "1"), ("counter", name)})))
        self.assertEqual(value(self.samples, "rdma_exporter_collector_errors_total", collector="hw_counters",
                               reason="invalid_value"), "2")  # second scrape: one per scrape

    def test_ionic_narrow_counter_wraps(self):
        # resp_rx_outof_buf reads 250: an 8-bit counter near its top; the firmware's next value 4
        # is one wrap (256 + 4), in the raw series, its normalised metric and the wraps series.
        rel = next(r for r in self.m["files"] if r.endswith("ionic_0/ports/1/hw_counters/resp_rx_outof_buf"))
        path = os.path.join(self.m["root"], rel)
        lv = {"device": "ionic_0", "port": "1"}
        try:
            with Exporter(EXPORTER, f"--path.sysfs={self.m['root']}", "--collector.disable-defaults",
                          "--collector.hw_counters") as e:
                first, _ = e.scrape()
                self.assertEqual(value(first, "rdma_hw_counters_total", **lv, counter="resp_rx_outof_buf"), "250")
                with open(path, "w") as f:
                    f.write("4\n")
                second, _ = e.scrape()
        finally:
            with open(path, "w") as f:
                f.write(self.m["files"][rel])
        self.assertEqual(value(second, "rdma_hw_counters_total", **lv, counter="resp_rx_outof_buf"), "260")
        self.assertEqual(value(second, "rdma_out_of_buffer_drops_total", **lv), "260")
        self.assertEqual(value(second, "rdma_hw_counters_wraps_total", **lv, counter="resp_rx_outof_buf"), "1")

    def test_stable_across_scrapes(self):
        for fam in ("rdma_hw_counters_total", "rdma_roce_cnp_sent_total", "rdma_hw_counters_wraps_total"):
            self.assertEqual(series(self.samples, fam), series(self.samples2, fam))
        # No counter of the tree wrapped between the scrapes: no wraps series (one appears with a
        # counter's first wrap; hardening.exporter.lifecycle shows one).
        self.assertEqual(series(self.samples, "rdma_hw_counters_wraps_total"), {})

    def test_reads_counted(self):
        # samples is the second scrape (the first one is the text for promtool), samples2 the third
        n_files = sum(len(f) for f in self.files.values())
        n_files += sum(kind == "invalid_all_ones" for kind in self.m["special"].values())  # read, not exported
        self.assertEqual(value(self.samples, "rdma_hw_counters_reads_total", method="sysfs"), str(2 * n_files))
        self.assertEqual(value(self.samples2, "rdma_hw_counters_reads_total", method="sysfs"), str(3 * n_files))
        self.assertEqual(value(self.samples, "rdma_hw_counters_reads_total", method="netlink"), "0")

    def test_promtool_check_metrics(self):
        r = subprocess.run(["promtool", "check", "metrics"], input=self.text, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
