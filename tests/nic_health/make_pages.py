#!/usr/bin/env python3
"""Builds the module EEPROM page sets in data/*.pages from field values, byte by byte at the
addresses of SFF-8636 rev 2.10a, CMIS 5.0 and SFF-8472 rev 12.4 (the layout ethtool's qsfp.h,
cmis.h and sfpdiag.c implement), the SFF-8472 sets' expected `ethtool -m` lines (sfpdiag_output())
and the fuzz seeds of tests/fuzz/corpus/fuzz_module_eeprom.
No dump of a real module's EEPROM could be found in public sources (ethtool has no such test
data); the values are those of the datasheets of the modules named (typical readings and the
thresholds the modules' datasheets give). Run it to regenerate: python3 make_pages.py.

Format of a .pages file: '# comment' lines; 'page <bank> <page> <offset>' starts a block (offset
0: the lower page; 128: an upper page; 'page 0 0 0 0x51': the SFF-8472 A2h page at I2C address
0x51), followed by lines 'XX: b0 b1 ... b15' (address in hex).
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


def sff8472_a0(vendor, oui, pn, rev, sn, date, wavelength, diag_type, options, bitrate_100m):
    """SFF-8472 rev 12.4 A0h bytes 0-127 (Table 4-1)."""
    a0 = bytearray(128)
    a0[0] = 0x03          # SFP/SFP+/SFP28
    a0[1] = 0x04          # module definition by two-wire ID
    a0[2] = 0x07          # LC
    a0[12] = min(bitrate_100m, 0xFF)
    ascii_field(a0, 20, vendor, 16)
    a0[37:40] = bytes(oui)
    ascii_field(a0, 40, pn, 16)
    ascii_field(a0, 56, rev, 4)
    u16(a0, 60, wavelength)
    ascii_field(a0, 68, sn, 16)
    ascii_field(a0, 84, date, 8)
    a0[92] = diag_type
    a0[93] = options
    a0[94] = 0x08         # SFF-8472 rev 12.3 compliance
    return a0


def sfp28_sr_rx_los():
    """SFP28 25GBASE-SR (Finisar FTLF8536P4BCL class), internally calibrated, fiber dark: Rx LOS,
    Rx power low alarm and low warning."""
    a0 = sff8472_a0("FINISAR CORP", [0x00, 0x90, 0x65], "FTLF8536P4BCL", "A", "X9CD5678", "210520  ", 850,
                    0x40 | 0x20 | 0x08,        # DDM, internally calibrated, Rx power average
                    0x80 | 0x40 | 0x20 | 0x10,  # alarm/warning flags, soft TX_DISABLE, TX_FAULT, RX_LOS
                    255)
    a2 = bytearray(128)
    thresholds(a2, 0, [75, -5, 70, 0], temp, signed=True)
    thresholds(a2, 8, [3.63, 2.97, 3.465, 3.135], volt)
    thresholds(a2, 16, [0.012, 0.002, 0.0115, 0.003], bias)
    thresholds(a2, 24, [0.0017783, 0.0001259, 0.0014125, 0.0001585], power)
    thresholds(a2, 32, [0.0017783, 0.0000158, 0.0014125, 0.0000251], power)
    s16(a2, 96, temp(41.5))
    u16(a2, 98, volt(3.31))
    u16(a2, 100, bias(0.0072))
    u16(a2, 102, power(0.00062))
    u16(a2, 104, power(0.0000050))
    a2[110] = 0x02        # RX_LOS (real-time state)
    a2[113] = 0x40        # Rx power low alarm
    a2[117] = 0x40        # Rx power low warning
    return "SFP28 25GBASE-SR, SFF-8472 internally calibrated: Rx LOS, Rx power low alarm and low warning", [
        (0, 0, 0, a0)], a2


def be_float(page, addr, v):
    page[addr:addr + 4] = struct.pack(">f", v)


def sfpp_lr_extcal():
    """SFP+ 10GBASE-LR, externally calibrated (SFF-8472 section 9.3): the A/D values and thresholds
    are raw and the module gives slope/offset (and the Rx power polynomial) to convert them. No
    alarm. The constants are chosen so that every product is an integer: ethtool's sfpdiag.c
    keeps the calibrated values in 16-bit integers, and then its output and the exact formula
    agree; Rx_PWR(2..4) are 0, where sfpdiag.c multiplies by the reading instead of its powers."""
    a0 = sff8472_a0("JDSU", [0x00, 0x01, 0x9C], "PLRXPL-SC-S43-22", "1", "C123ABC45", "190302  ", 1310,
                    0x40 | 0x10 | 0x08,  # DDM, externally calibrated, Rx power average
                    0x80, 103)
    a2 = bytearray(128)
    # Raw thresholds (calibrated below with the same constants as the readings).
    for i, raw in enumerate([18944, -1536, 17664, -256]):     # temp: slope 1, offset +256
        s16(a2, 0 + 2 * i, raw)
    for i, raw in enumerate([36350, 29750, 34700, 31400]):    # Vcc: slope 1, offset -50
        u16(a2, 8 + 2 * i, raw)
    for i, raw in enumerate([4000, 400, 3600, 600]):          # bias: slope 1.5, offset -100
        u16(a2, 16 + 2 * i, raw)
    for i, raw in enumerate([5000, 500, 4000, 700]):          # Tx power: slope 2, offset 50
        u16(a2, 24 + 2 * i, raw)
    for i, raw in enumerate([8000, 200, 6400, 400]):          # Rx power: 10 + 1.25 x raw
        u16(a2, 32 + 2 * i, raw)
    for addr, v in ((56, 0.0), (60, 0.0), (64, 0.0), (68, 1.25), (72, 10.0)):  # Rx_PWR(4) .. Rx_PWR(0)
        be_float(a2, addr, v)
    u16(a2, 76, 0x0180)   # Tx_I slope 1.5
    s16(a2, 78, -100)
    u16(a2, 80, 0x0200)   # Tx_PWR slope 2
    s16(a2, 82, 50)
    u16(a2, 84, 0x0100)   # T slope 1
    s16(a2, 86, 256)      # +1 degC
    u16(a2, 88, 0x0100)   # V slope 1
    s16(a2, 90, -50)      # -5 mV
    s16(a2, 96, 8448)     # 33 degC raw -> 34.00
    u16(a2, 98, 33050)    # -> 3.3000 V
    u16(a2, 100, 2000)    # -> 2900 x 2 uA = 5.800 mA
    u16(a2, 102, 2500)    # -> 5050 x 0.1 uW = 0.5050 mW
    u16(a2, 104, 3200)    # -> 4010 x 0.1 uW = 0.4010 mW
    return "SFP+ 10GBASE-LR, SFF-8472 externally calibrated (slope/offset and Rx power polynomial), no alarm", [
        (0, 0, 0, a0)], a2


def cmis_osfp_16_lanes():
    """OSFP with 16 media lanes (CMIS 5.2: banks 0 and 1, page 01h byte 142 = 01b; 8 lanes per bank
    in application 1), lane 11 (bank 1, its lane 3) dark: Rx LOS and Rx power low alarm."""
    lo, p0, p1, p2, b0, b1 = (bytearray(256) for _ in range(6))
    lo[0] = 0x19          # OSFP
    lo[1] = 0x52          # CMIS 5.2
    lo[3] = 0x03 << 1     # ModuleReady
    s16(lo, 14, temp(52.0))
    u16(lo, 16, volt(3.30))
    lo[85] = 0x02
    lo[86:90] = bytes([0x11, 0x1C, 0x88, 0x01])  # 8 host lanes, 8 media lanes per bank
    p0[128] = 0x19
    ascii_field(p0, 129, "EXAMPLE OPTICS", 16)
    ascii_field(p0, 148, "OSFP-16X100-DR", 16)
    ascii_field(p0, 164, "01", 2)
    ascii_field(p0, 166, "EX16L0000001", 16)
    p1[142] = 0x01        # banks 0 and 1
    p1[159] = 0x03
    p1[160] = 0x07        # Tx bias, Tx power, Rx power monitored; bias x1
    thresholds(p2, 128, [75, -5, 72, 0], temp, signed=True)
    thresholds(p2, 136, [3.465, 3.135, 3.45, 3.15], volt)
    thresholds(p2, 176, [0.0044668, 0.0002512, 0.0035481, 0.0003981], power)
    thresholds(p2, 184, [0.110, 0.020, 0.100, 0.030], bias)
    thresholds(p2, 192, [0.0044668, 0.0000813, 0.0035481, 0.0001288], power)
    for bank, page in ((0, b0), (1, b1)):
        for i in range(8):
            lane = 8 * bank + i + 1
            u16(page, 154 + 2 * i, power(0.0010 + lane * 0.00001))   # Tx power
            u16(page, 170 + 2 * i, bias(0.050 + lane * 0.0001))      # Tx bias
            u16(page, 186 + 2 * i, power(0.0008 + lane * 0.00001))   # Rx power
    u16(b1, 186 + 2 * 2, power(0.0000010))  # lane 11 dark
    b1[147] = 0x04        # Rx LOS, bank 1 lane 3
    b1[150] = 0x04        # Rx power low alarm (0x96 = 0x95 + 1), bank 1 lane 3
    return "OSFP 16 lanes, CMIS 5.2, banks 0-1: lane 11 Rx LOS and Rx power low alarm", [
        (0, 0, 0, lo[:128]), (0, 0, 128, p0[128:]), (0, 1, 128, p1[128:]), (0, 2, 128, p2[128:]),
        (0, 0x11, 128, b0[128:]), (1, 0x11, 128, b1[128:])]


# --- What ethtool's sfpdiag.c (ethtool 6.2, sff8472_show_all) prints for an A0h/A2h pair: its
# arithmetic (values held in 16-bit integers after calibration, Rx power as it computes it) and
# its print formats (sff-common.h PRINT_BIAS, PRINT_xX_PWR, PRINT_TEMP, PRINT_VCC and
# sff_show_thresholds), re-done here because the installed ethtool only reads a live netdev.
def sfpdiag_output(a0, a2):
    import math

    def u16v(a): return a2[a] << 8 | a2[a + 1]
    def s16v(a): return struct.unpack(">h", bytes(a2[a:a + 2]))[0]
    def slp(a): return a2[a] + a2[a + 1] / 256.0
    def off(a): return s16v(a)
    def flt(a): return struct.unpack(">f", bytes(a2[a:a + 4]))[0]
    def u16c(x): return int(x) & 0xFFFF       # C's conversion to __u16 (truncation, wrap)
    def s16c(x): return struct.unpack(">h", struct.pack(">H", int(x) & 0xFFFF))[0]
    names = ["MCURR", "HALRM", "LALRM", "HWARN", "LWARN"]
    addr = {"bias": [100, 16, 18, 20, 22], "tx": [102, 24, 26, 28, 30], "rx": [104, 32, 34, 36, 38],
            "temp": [96, 0, 2, 4, 6], "vcc": [98, 8, 10, 12, 14]}
    v = {k: [(s16v(a) if k == "temp" else u16v(a)) for a in addr[k]] for k in addr}
    if a0[92] & 0x10:
        for i in range(5):
            v["bias"][i] = u16c(u16c(v["bias"][i] * slp(76)) + off(78))
            v["tx"][i] = u16c(u16c(v["tx"][i] * slp(80)) + off(82))
            v["vcc"][i] = u16c(u16c(v["vcc"][i] * slp(88)) + off(90))
            v["temp"][i] = s16c(s16c(v["temp"][i] * slp(84)) + off(86))
            r = v["rx"][i]
            x = u16c(flt(72))
            for c in (68, 64, 60):
                x = u16c(x + r * flt(c))
            v["rx"][i] = x

    def dbm(mw): return 10 * math.log10(mw) if mw > 0 else -math.inf

    def line(k, val): return "\t%-41s : %s\n" % (k, val)

    def bias_s(x): return "%.3f mA" % (x / 500.0)
    def pwr_s(x): return "%.4f mW / %.2f dBm" % (x / 10000.0, dbm(x / 10000.0))
    def temp_s(x): return "%.2f degrees C / %.2f degrees F" % (x / 256.0, x / 256.0 * 1.8 + 32)
    def vcc_s(x): return "%.4f V" % (x / 10000.0)
    out = line("Identifier", "0x%02x (SFP)" % a0[0])
    out += line("Vendor name", a0[20:36].decode().rstrip())
    out += line("Vendor PN", a0[40:56].decode().rstrip())
    out += line("Vendor rev", a0[56:60].decode().rstrip())
    out += line("Vendor SN", a0[68:84].decode().rstrip())
    out += line("Optical diagnostics support", "Yes")
    out += line("Laser bias current", bias_s(v["bias"][0]))
    out += line("Laser output power", pwr_s(v["tx"][0]))
    out += line("Receiver signal average optical power" if a0[92] & 0x08 else "Receiver signal OMA", pwr_s(v["rx"][0]))
    out += line("Module temperature", temp_s(v["temp"][0]))
    out += line("Module voltage", vcc_s(v["vcc"][0]))
    aw = bool(a0[93] & 0x80)
    out += line("Alarm/warning flags implemented", "Yes" if aw else "No")
    if aw:
        flags = [("Laser bias current", 112, 3), ("Laser output power", 112, 1), ("Module temperature", 112, 7),
                 ("Module voltage", 112, 5), ("Laser rx power", 113, 7)]
        for name, a, hb in flags:
            for kind, byte, bit in (("high alarm", a, hb), ("low alarm", a, hb - 1),
                                    ("high warning", a + 4, hb), ("low warning", a + 4, hb - 1)):
                out += line("%s %s" % (name, kind), "On" if a2[byte] >> bit & 1 else "Off")
        for name, k, fmt in (("Laser bias current", "bias", bias_s), ("Laser output power", "tx", pwr_s),
                             ("Module temperature", "temp", temp_s), ("Module voltage", "vcc", vcc_s),
                             ("Laser rx power", "rx", pwr_s)):
            for i, kind in ((1, "high alarm"), (2, "low alarm"), (3, "high warning"), (4, "low warning")):
                out += line("%s %s threshold" % (name, kind), fmt(v[k][i]))
    return out


def write_sfp(name, make):
    comment, pages, a2 = make()
    write(name, lambda: (comment, pages + [(0, 0, 0x51, a2)]))
    with open(os.path.join(HERE, "data", name + ".ethtool-m.txt"), "w") as f:
        f.write(sfpdiag_output(pages[0][3], a2))


# libFuzzer seeds (tests/fuzz/fuzz_module_eeprom.cpp's layout): selector 0, the lower page, the
# A2h page, then the upper pages in its slot order; a slot before the last page present is zeros.
FUZZ_SLOTS = [(0, 0x00), (0, 0x01), (0, 0x02), (0, 0x03), (0, 0x11), (1, 0x11), (2, 0x11), (3, 0x11)]


def write_seed(name):
    lower, a2, upper = b"", bytes(128), {}
    with open(os.path.join(HERE, "data", name + ".pages")) as f:
        cur = None
        for line in f:
            if line.startswith("#"):
                continue
            if line.startswith("page "):
                bank, page, offset, *i2c = line.split()[1:]
                cur = "a2" if i2c else ("lower" if offset == "0" else (int(bank), int(page)))
                if cur == "a2":
                    a2 = b""
                elif cur != "lower":
                    upper[cur] = b""
                continue
            data = bytes(int(x, 16) for x in line.split(":")[1].split())
            if cur == "lower":
                lower += data
            elif cur == "a2":
                a2 += data
            else:
                upper[cur] += data
    last = max([i for i, s in enumerate(FUZZ_SLOTS) if s in upper], default=-1)
    blob = bytes([0]) + lower + a2 + b"".join(upper.get(s, bytes(128)) for s in FUZZ_SLOTS[:last + 1])
    with open(os.path.join(HERE, "..", "fuzz", "corpus", "fuzz_module_eeprom", name), "wb") as f:
        f.write(blob)


def write(name, make):
    comment, pages = make()
    with open(os.path.join(HERE, "data", name + ".pages"), "w") as f:
        f.write(f"# {comment}\n# Built by tests/nic_health/make_pages.py from the SFF-8636/CMIS layout (see there).\n")
        for bank, page, offset, data in pages:
            # offset 0x51: the SFF-8472 A2h page (I2C address 0x51), bytes 0-127
            f.write(f"page {bank} {page} 0 0x51\n" if offset == 0x51 else f"page {bank} {page} {offset}\n")
            base = 0 if offset == 0x51 else offset
            for row in range(0, 128, 16):
                f.write(f"{base + row:02x}: " + " ".join(f"{b:02x}" for b in data[row:row + 16]) + "\n")


if __name__ == "__main__":
    write("qsfp28_sr4_rx_los", sff8636_sr4)
    write("qsfpdd_dr4_hot", cmis_dr4)
    write("osfp_dac_flat", cmis_osfp_dac)
    write("osfp_16_lanes_rx_los", cmis_osfp_16_lanes)
    write_sfp("sfp28_sr_rx_los", sfp28_sr_rx_los)
    write_sfp("sfpp_lr_extcal", sfpp_lr_extcal)
    for n in ("qsfp28_sr4_rx_los", "qsfpdd_dr4_hot", "osfp_dac_flat", "osfp_16_lanes_rx_los", "sfp28_sr_rx_los",
              "sfpp_lr_extcal"):
        write_seed(n)
