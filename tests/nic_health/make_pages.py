#!/usr/bin/env python3
"""Builds the module EEPROM page sets in data/*.pages from field values, byte by byte at the
addresses of SFF-8636 rev 2.10a and CMIS 5.0 (the layout ethtool's qsfp.h and cmis.h implement).
No dump of a real module's EEPROM could be found in public sources (ethtool has no such test
data); the values are those of the datasheets of the modules named (typical readings and the
thresholds the modules' datasheets give). Run it to regenerate: python3 make_pages.py.

Format of a .pages file: '# comment' lines; 'page <bank> <page> <offset>' starts a block (offset
0: the lower page; 128: an upper page), followed by lines 'XX: b0 b1 ... b15' (address in hex).
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def ascii_field(page, addr, text, length):
    b = text.encode().ljust(length, b" ")
    page[addr:addr + length] = b


def u16(page, addr, v):
    page[addr:addr + 2] = struct.pack(">H", int(round(v)))


def s16(page, addr, v):
    page[addr:addr + 2] = struct.pack(">h", int(round(v)))


# Units (both specs): temperature 1/256 degC, supply 100 uV, bias 2 uA, power 0.1 uW.
def temp(c): return c * 256
def volt(v): return v / 100e-6
def bias(a, mult=1): return a / (2e-6 * mult)
def power(w): return w / 0.1e-6


def thresholds(page, addr, values, conv, signed=False):
    for i, v in enumerate(values):
        (s16 if signed else u16)(page, addr + 2 * i, conv(v))


def sff8636_sr4():
    """QSFP28 100GBASE-SR4 (Finisar FTLC9555REPM class), lane 3 dark: Rx LOS and Rx power low alarm."""
    lo, p0, p3 = bytearray(256), bytearray(256), bytearray(256)
    lo[0] = 0x11          # QSFP28
    lo[1] = 0x08          # SFF-8636 rev 2.10a
    lo[2] = 0x00          # paged (flat_mem 0), data ready
    lo[3] = 0x04          # Rx LOS lane 3 (bit 2)
    lo[9] = 0x00
    lo[10] = 0x40 | 0x10  # lane 3 Rx power low alarm (bit 6) and low warning (bit 4)
    s16(lo, 22, temp(35.5))
    u16(lo, 26, volt(3.3))
    for i, w in enumerate([0.000800, 0.000750, 0.0, 0.000900]):
        u16(lo, 34 + 2 * i, power(w))
    for i, a in enumerate([0.0065, 0.0066, 0.0064, 0.0067]):
        u16(lo, 42 + 2 * i, bias(a))
    for i, w in enumerate([0.000850, 0.000860, 0.000840, 0.000870]):
        u16(lo, 50 + 2 * i, power(w))
    p0[128] = 0x11
    p0[130] = 0x0C        # MPO 1x12
    ascii_field(p0, 148, "FINISAR CORP", 16)
    p0[165:168] = bytes([0x00, 0x90, 0x65])
    ascii_field(p0, 168, "FTLC9555REPM", 16)
    ascii_field(p0, 184, "A0", 2)
    ascii_field(p0, 196, "X7AB1234", 16)
    ascii_field(p0, 212, "210315  ", 8)
    p0[220] = 0x3C        # temperature, voltage monitored; Rx power average; Tx power supported
    thresholds(p3, 128, [75, -5, 70, 0], temp, signed=True)
    thresholds(p3, 144, [3.63, 2.97, 3.465, 3.135], volt)
    thresholds(p3, 176, [0.0034674, 0.0000407, 0.0017378, 0.0000813], power)
    thresholds(p3, 184, [0.010, 0.002, 0.0095, 0.003], bias)
    thresholds(p3, 192, [0.0034674, 0.0000813, 0.0017378, 0.0001622], power)
    return "QSFP28 100GBASE-SR4, SFF-8636: lane 3 Rx LOS with Rx power low alarm and low warning", [
        (0, 0, 0, lo[:128]), (0, 0, 128, p0[128:]), (0, 3, 128, p3[128:])]


def cmis_dr4():
    """QSFP-DD 400GBASE-DR4 (CMIS 5.0), running hot: module temperature high alarm and high
    warning; lane 2 Tx fault and Tx power low alarm (its laser dark at a high bias). Tx bias
    multiplier x1: ethtool 5.19 shifts the raw value right by the multiplier, where CMIS 5.0 says
    the LSB is 2 uA times it (the decoder follows the spec; its unit test covers x2 and x4)."""
    lo, p0, p1, p2, p11 = (bytearray(256) for _ in range(5))
    lo[0] = 0x18          # QSFP-DD
    lo[1] = 0x50          # CMIS 5.0
    lo[2] = 0x00          # paged
    lo[3] = 0x03 << 1     # ModuleReady
    lo[9] = 0x01 | 0x04   # temperature high alarm (bit 0) and high warning (bit 2)
    s16(lo, 14, temp(78.25))
    u16(lo, 16, volt(3.28))
    lo[85] = 0x02         # SMF
    lo[86:90] = bytes([0x11, 0x1C, 0x84, 0x01])  # 400GAUI-8 / 400GBASE-DR4: 8 host lanes, 4 media lanes
    p0[128] = 0x18
    ascii_field(p0, 129, "INNOLIGHT", 16)
    p0[145:148] = bytes([0x44, 0x7C, 0x7F])
    ascii_field(p0, 148, "T-DP4CNT-NMI", 16)
    ascii_field(p0, 164, "1A", 2)
    ascii_field(p0, 166, "INJBH0412345", 16)
    ascii_field(p0, 182, "220718  ", 8)
    p0[200] = 0x05 << 5   # power class 6
    p0[201] = 48          # 12 W
    p0[203] = 0x0C        # MPO 1x12
    p0[212] = 0x06        # 1310 nm EML
    p1[142] = 0x00        # bank 0 only
    p1[159] = 0x03        # temperature and supply voltage monitored
    p1[151] = 0x10        # Rx power measured as average power
    p1[160] = 0x07        # Tx bias, Tx power, Rx power monitored; bias multiplier x1
    thresholds(p2, 128, [75, -5, 72, 0], temp, signed=True)
    thresholds(p2, 136, [3.465, 3.135, 3.45, 3.15], volt)
    thresholds(p2, 176, [0.0044668, 0.0002512, 0.0035481, 0.0003981], power)
    thresholds(p2, 184, [0.110, 0.020, 0.100, 0.030], bias)
    thresholds(p2, 192, [0.0044668, 0.0000813, 0.0035481, 0.0001288], power)
    p11[128] = 0x44       # data path activated, lanes 1-2 (DataPathState; not decoded)
    p11[135] = 0x02       # Tx fault on lane 2
    p11[140] = 0x02       # Tx power low alarm on lane 2
    p11[143] = 0x02       # Tx bias high alarm on lane 2 (115 mA over its 110 mA)
    for i, w in enumerate([0.00201, 0.00005, 0.00198, 0.00205]):
        u16(p11, 154 + 2 * i, power(w))
    for i, a in enumerate([0.0652, 0.1150, 0.0648, 0.0660]):
        u16(p11, 170 + 2 * i, bias(a))
    for i, w in enumerate([0.00150, 0.00160, 0.00149, 0.00152]):
        u16(p11, 186 + 2 * i, power(w))
    return "QSFP-DD 400GBASE-DR4, CMIS 5.0: module temperature high alarm and high warning; lane 2 Tx fault", [
        (0, 0, 0, lo[:128]), (0, 0, 128, p0[128:]), (0, 1, 128, p1[128:]), (0, 2, 128, p2[128:]),
        (0, 0x11, 128, p11[128:])]


def cmis_osfp_dac():
    """OSFP passive copper cable (CMIS 4.0), flat memory: identity only."""
    lo, p0 = bytearray(256), bytearray(256)
    lo[0] = 0x19
    lo[1] = 0x40
    lo[2] = 0x80          # flat memory
    lo[85] = 0x03         # passive copper
    p0[128] = 0x19
    ascii_field(p0, 129, "Mellanox", 16)
    ascii_field(p0, 148, "MCP4Y10-N002", 16)
    ascii_field(p0, 164, "A2", 2)
    ascii_field(p0, 166, "MT2231VS01234", 16)
    ascii_field(p0, 182, "220801  ", 8)
    p0[202] = 0x02        # 2 m
    p0[203] = 0x23        # no separable connector
    p0[212] = 0x0A        # copper cable unequalized
    return "OSFP 2 m passive copper, CMIS 4.0, flat memory", [(0, 0, 0, lo[:128]), (0, 0, 128, p0[128:])]


def write(name, make):
    comment, pages = make()
    with open(os.path.join(HERE, "data", name + ".pages"), "w") as f:
        f.write(f"# {comment}\n# Built by tests/nic_health/make_pages.py from the SFF-8636/CMIS layout (see there).\n")
        for bank, page, offset, data in pages:
            f.write(f"page {bank} {page} {offset}\n")
            for row in range(0, 128, 16):
                f.write(f"{offset + row:02x}: " + " ".join(f"{b:02x}" for b in data[row:row + 16]) + "\n")


if __name__ == "__main__":
    write("qsfp28_sr4_rx_los", sff8636_sr4)
    write("qsfpdd_dr4_hot", cmis_dr4)
    write("osfp_dac_flat", cmis_osfp_dac)
