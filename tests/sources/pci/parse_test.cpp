// unit: the PCI sysfs parsers (kernel formats of drivers/pci/pci-sysfs.c and pcie/aer.c), the ACS
// walk of config space, the location of a function in the tree and the nvidia-smi relations.
#include <catch2/catch.hpp>

#include <vector>

#include "sources/pci/parse.h"
#include "sources/pci/topology.h"
#include "sources/pci/tree.h"

using namespace rdma::pci;

TEST_CASE("link speed in every kernel spelling", "[unit]") {
  CHECK(parse_link_speed("32.0 GT/s PCIe\n") == 320u);
  CHECK(parse_link_speed("2.5 GT/s PCIe\n") == 25u);
  CHECK(parse_link_speed("64.0 GT/s PCIe\n") == 640u);
  CHECK(parse_link_speed("8 GT/s\n") == 80u);  // before 5.5
  CHECK(parse_link_speed("5 GT/s\n") == 50u);
  CHECK_FALSE(parse_link_speed("Unknown\n"));
  CHECK(is_unknown_speed("Unknown\n"));
  CHECK(is_unknown_speed("Unknown speed\n"));
  CHECK_FALSE(is_unknown_speed("8 GT/s\n"));
  CHECK_FALSE(parse_link_speed("32.00 GT/s PCIe\n"));
  CHECK_FALSE(parse_link_speed("GT/s PCIe\n"));
  CHECK_FALSE(parse_link_speed("0 GT/s\n"));
  CHECK_FALSE(parse_link_speed("-8 GT/s\n"));
}

TEST_CASE("link width and numa node", "[unit]") {
  CHECK(parse_link_width("16\n") == 16u);
  CHECK(parse_link_width("0\n") == 0u);  // link down
  CHECK_FALSE(parse_link_width("x16\n"));
  CHECK_FALSE(parse_link_width("33\n"));
  CHECK(parse_numa_node("-1\n") == -1);
  CHECK(parse_numa_node("1\n") == 1);
  CHECK_FALSE(parse_numa_node("-2\n"));
  CHECK_FALSE(parse_numa_node("one\n"));
}

TEST_CASE("lane bandwidth after line encoding", "[unit]") {
  CHECK(lane_bytes_per_second(25) == Approx(2.5e9 * 0.8 / 8));
  CHECK(lane_bytes_per_second(320) == Approx(32e9 * 128.0 / 130.0 / 8));
}

TEST_CASE("aer_dev files: types in order and the total", "[unit]") {
  auto a = parse_aer("RxErr 0\nBadTLP 7\nBadDLLP 0\nRollover 0\nTimeout 2\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 8\n");
  REQUIRE(a);
  REQUIRE(a->types.size() == 8);
  CHECK(a->types[1].name == "BadTLP");
  CHECK(a->types[1].count == 7);
  CHECK(a->total == 8u);
  auto big = parse_aer("DLP 18446744073709551615\nTOTAL_ERR_FATAL 18446744073709551615\n");
  REQUIRE(big);
  CHECK(big->types[0].count == 18446744073709551615ull);
  CHECK_FALSE(parse_aer(""));
  CHECK_FALSE(parse_aer("RxErr\n"));
  CHECK_FALSE(parse_aer("RxErr -1\n"));
  CHECK_FALSE(parse_aer("RxErr 1\nRxErr 2\n"));                   // a type twice
  CHECK_FALSE(parse_aer("TOTAL_ERR_COR 1\nRxErr 1\n"));           // total not last
  CHECK_FALSE(parse_aer("Rx\"Err 1\n"));                          // not a kernel name
  CHECK_FALSE(parse_aer("TOTAL_ERR_COR 1\nTOTAL_ERR_COR 1\n"));
  CHECK(parse_aer_total("RxErr 0\nBadTLP 7\nTOTAL_ERR_COR 8\n") == 8u);
  CHECK_FALSE(parse_aer_total("RxErr 0\n"));
  CHECK_FALSE(parse_aer_total("TOTAL_ERR_COR x\n"));
}

TEST_CASE("aer_dev files in the 4.19 long-name format: named by the short name of the same bit", "[unit]") {
  // aer_dev_correctable of a 4.19-era kernel (aer_correctable_error_string[] with the long names).
  auto cor = parse_aer(
      "Receiver Error 37810\nBad TLP 29968\nBad DLLP 46933\nRELAY_NUM Rollover 0\nReplay Timer Timeout 0\n"
      "Advisory Non-Fatal 0\nCorrected Internal Error 0\nHeader Log Overflow 0\nTOTAL_ERR_COR 114711\n");
  REQUIRE(cor);
  REQUIRE(cor->types.size() == 8);
  CHECK(cor->types[0].name == "RxErr");
  CHECK(cor->types[0].bit == 0);
  CHECK(cor->types[0].count == 37810);
  CHECK(cor->types[1].name == "BadTLP");
  CHECK(cor->types[2].name == "BadDLLP");
  CHECK(cor->types[2].count == 46933);
  CHECK(cor->types[3].name == "Rollover");
  CHECK(cor->types[4].name == "Timeout");
  CHECK(cor->types[4].bit == 12);
  CHECK(cor->types[5].name == "NonFatalErr");
  CHECK(cor->types[7].name == "HeaderOF");
  CHECK(cor->total == 114711u);
  // aer_dev_fatal of the same era: 26 uncorrectable names, bit 5 and 21-25 long too.
  auto fatal = parse_aer(
      "Undefined 0\nData Link Protocol 0\nSurprise Down Error 1\nPoisoned TLP 0\nFlow Control Protocol 0\n"
      "Completion Timeout 2\nCompleter Abort 0\nUnexpected Completion 0\nReceiver Overflow 0\nMalformed TLP 3\n"
      "ECRC 0\nUnsupported Request 0\nACS Violation 0\nUncorrectable Internal Error 0\nMC Blocked TLP 0\n"
      "AtomicOp Egress Blocked 0\nTLP Prefix Blocked Error 4\nTOTAL_ERR_FATAL 10\n");
  REQUIRE(fatal);
  REQUIRE(fatal->types.size() == 17);
  CHECK(fatal->types[2].name == "SDES");
  CHECK(fatal->types[5].name == "CmpltTO");
  CHECK(fatal->types[9].name == "MalfTLP");
  CHECK(fatal->types[9].count == 3);
  CHECK(fatal->types[16].name == "TLPBlockedErr");
  CHECK(fatal->types[16].bit == 25);
  // The same bit in both spellings is not one file of the kernel's.
  CHECK_FALSE(parse_aer("RxErr 1\nReceiver Error 2\n"));
  CHECK_FALSE(parse_aer(" Receiver Error 2\n"));
  CHECK_FALSE(parse_aer("Receiver Error  2\n"));
}

TEST_CASE("aer_dev files: unnamed bits by their position, unknown names kept, no TOTAL line", "[unit]") {
  // A bit the kernel has no name for is printed only while its count is not 0.
  auto a = parse_aer("RxErr 0\nBadTLP 1\ndev_cor_errs_bit[9] 5\nBadDLLP 0\nTOTAL_ERR_COR 6\n");
  REQUIRE(a);
  REQUIRE(a->types.size() == 4);
  CHECK(a->types[2].name == "bit9");
  CHECK(a->types[2].bit == 9);
  CHECK(a->types[2].count == 5);
  auto u = parse_aer("DLP 0\ndev_fatal_errs_bit[27] 2\ndev_nonfatal_errs_bit[31] 1\nTOTAL_ERR_FATAL 3\n");
  REQUIRE(u);
  CHECK(u->types[1].name == "bit27");
  CHECK(u->types[2].bit == 31);
  CHECK_FALSE(parse_aer("dev_cor_errs_bit[32] 1\n"));
  CHECK_FALSE(parse_aer("dev_cor_errs_bit[9] 1\ndev_cor_errs_bit[9] 1\n"));
  // Uncorrectable bit 26 and later have a short name only; both read.
  auto newer = parse_aer("PoisonTLPBlocked 1\nDMWrReqBlocked 2\nTLPXlatBlocked 3\nTOTAL_ERR_NONFATAL 6\n");
  REQUIRE(newer);
  CHECK(newer->types[0].bit == 26);
  CHECK(newer->types[2].bit == 31);
  // A name in neither table (a later kernel's, a vendor's) keeps its printed name.
  auto unknown = parse_aer("RxErr 0\nFuture Error 7\nTOTAL_ERR_COR 7\n");
  REQUIRE(unknown);
  CHECK(unknown->types[1].name == "Future Error");
  CHECK(unknown->types[1].bit == -1);
  CHECK(unknown->types[1].count == 7);
  // Without the TOTAL_* line: the types alone, no total.
  auto bare = parse_aer("RxErr 3\nBadTLP 0\n");
  REQUIRE(bare);
  CHECK_FALSE(bare->total);
  CHECK(bare->types.size() == 2);
  CHECK(aer_bit_name("RELAY_NUM Rollover") == aer_bit_name("Rollover"));
  CHECK(aer_bit_name("Rollover")->bit == 8);
  CHECK(aer_bit_name("rxerr") == nullptr);
}

TEST_CASE("addresses of functions and host bridges", "[unit]") {
  CHECK(is_bdf("0000:18:00.0"));
  CHECK_FALSE(is_bdf("0000:18:00.8"));
  CHECK_FALSE(is_bdf("0000:18:00"));
  CHECK_FALSE(is_bdf("0000:1G:00.0"));
  CHECK(is_host_bridge("pci0000:15"));
  CHECK_FALSE(is_host_bridge("pci0000:1"));
}

namespace {
std::vector<std::uint8_t> config_with(std::vector<std::pair<std::uint16_t, std::uint32_t>> dwords, std::size_t size = 4096) {
  std::vector<std::uint8_t> b(size, 0);
  for (auto [off, v] : dwords)
    for (int i = 0; i < 4; ++i)
      if (off + i < size) b[off + i] = std::uint8_t(v >> (8 * i));
  return b;
}
}  // namespace

TEST_CASE("ACS found through the extended capability list", "[unit]") {
  // AER at 0x100 -> ACS at 0x148, control SV|RR|CR|UF (what Linux enables on switch ports).
  auto c = config_with({{0x100, 0x0001 | 2 << 16 | 0x148u << 20}, {0x148, 0x000d | 1 << 16}, {0x14c, 0x001d0000u | 0x5f}});
  auto acs = find_acs(c);
  CHECK(acs.state == Acs::State::kPresent);
  CHECK(acs.offset == 0x148);
  CHECK(acs.capability == 0x5f);
  CHECK(acs.control == 0x1d);
  CHECK(acs.redirects_p2p());
  // Source Validation alone does not re-route peer-to-peer.
  auto sv = config_with({{0x100, 0x000d | 1 << 16}, {0x104, 0x00010000u}});
  CHECK(find_acs(sv).state == Acs::State::kPresent);
  CHECK_FALSE(find_acs(sv).redirects_p2p());
  CHECK(find_acs(config_with({{0x100, 0x0001 | 2 << 16}})).state == Acs::State::kAbsent);
  CHECK(find_acs(config_with({})).state == Acs::State::kAbsent);
  CHECK(find_acs(config_with({}, 64)).state == Acs::State::kUnreadable);   // non-root reader
  CHECK(find_acs(config_with({}, 256)).state == Acs::State::kAbsent);      // conventional PCI
  // A list that points at itself ends; one that points below 0x100 ends.
  CHECK(find_acs(config_with({{0x100, 0x0001 | 0x100u << 20}})).state == Acs::State::kAbsent);
  CHECK(find_acs(config_with({{0x100, 0x0001 | 0x040u << 20}})).state == Acs::State::kAbsent);
  // ACS header in the last dword: its registers are cut off.
  CHECK(find_acs(config_with({{0x100, 0x0001 | 0xffcu << 20}, {0xffc, 0x000d}})).state == Acs::State::kAbsent);
}

TEST_CASE("a function located from its canonical path", "[unit]") {
  auto l = locate("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0");
  REQUIRE(l);
  CHECK(l->host_bridge == "pci0000:15");
  CHECK(l->chain == std::vector<std::string>{"0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0"});
  CHECK(l->dir_of(1) == "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0");
  auto v = locate("/sys/devices/pci0000:00/0000:00:03.0/virtio0");
  REQUIRE(v);
  CHECK(v->bdf() == "0000:00:03.0");
  CHECK(v->dir == "/sys/devices/pci0000:00/0000:00:03.0");
  CHECK_FALSE(locate("/sys/devices/virtual/net/veth0"));
  CHECK_FALSE(locate("/sys/devices/platform/0000:00:03.0"));
}

TEST_CASE("relations as nvidia-smi topo -m names them", "[unit]") {
  auto at = [](const char* p) { return *locate(p); };
  // One switch: downstream ports 17:00.0 (NIC) and 17:01.0 (GPU) below upstream port 16:00.0.
  auto nic = at("/s/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0");
  auto gpu = at("/s/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:1b:00.0");
  // A second switch below the first one's downstream port 17:02.0.
  auto deep = at("/s/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:19:00.0/0000:1a:00.0/0000:1c:00.0");
  auto other_rp = at("/s/devices/pci0000:15/0000:15:03.0/0000:20:00.0");
  auto other_hb = at("/s/devices/pci0000:3d/0000:3d:01.0/0000:3e:00.0");
  auto fn = at("/s/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.1");
  CHECK(relation({&nic, 0}, {&gpu, 0}) == Relation::kPix);
  CHECK(relation({&nic, 0}, {&fn, 0}) == Relation::kPix);  // two functions of one device
  CHECK(relation({&nic, 0}, {&deep, 0}) == Relation::kPxb);
  CHECK(relation({&nic, 0}, {&other_rp, 0}) == Relation::kPhb);
  CHECK(relation({&nic, 0}, {&other_hb, 0}) == Relation::kNode);
  CHECK(relation({&nic, 0}, {&other_hb, 1}) == Relation::kSys);
  CHECK(relation({&nic, -1}, {&other_hb, 1}) == Relation::kNode);  // no NUMA information
  CHECK(bridges_between(nic, gpu) == std::vector<std::string>{"0000:17:00.0", "0000:16:00.0", "0000:17:01.0"});
  CHECK(bridges_between(nic, deep) ==
        std::vector<std::string>{"0000:17:00.0", "0000:16:00.0", "0000:17:02.0", "0000:19:00.0", "0000:1a:00.0"});
  CHECK(bridges_between(nic, other_rp).empty());
  CHECK(bridges_between(nic, other_hb).empty());
  Relation r;
  CHECK(parse_relation("PXB", r));
  CHECK(r == Relation::kPxb);
  CHECK_FALSE(parse_relation("NV18", r));
  CHECK(relation_name(Relation::kNode) == "NODE");
}

TEST_CASE("accelerators by class and vendor, not a BMC's VGA", "[unit]") {
  CHECK(is_gpu({0x030200, 0x10de, 0x2330, 0}));
  CHECK(is_gpu({0x030000, 0x10de, 0x2236, 0}));
  CHECK(is_gpu({0x038000, 0x1002, 0x74a1, 0}));
  CHECK_FALSE(is_gpu({0x030000, 0x1a03, 0x2000, 0}));  // ASPEED
  CHECK_FALSE(is_gpu({0x068000, 0x10de, 0x22a3, 0}));  // NVSwitch
  CHECK_FALSE(is_gpu({0x020700, 0x15b3, 0x1021, 0}));
}
