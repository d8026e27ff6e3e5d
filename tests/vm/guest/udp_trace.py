#!/usr/bin/python3
"""The lab's own tracer (independent of the exporter's): which address each router of the ECMP
fabric (tests/vm/lib/ecmp-fabric.sh) answers a TTL-limited RoCE v2-shaped UDP packet from, read
from the socket's error queue (IP_RECVERR, MSG_ERRQUEUE: no raw socket).

udp_trace.py SRC DST DEV MAX_TTL GAP_S SPORT...: per SPORT one line "SPORT HOP1 ... HOPn", the
address that answered TTL 1..MAX_TTL ("*": none within 1 s). The packets go to DST port 4791 from
SRC:SPORT out of DEV, so ECMP hashes them as a RoCE v2 flow with that source port; the payload is
a BTH with transport version 0xF (rxe drops it before any QP lookup should it reach the
destination) and the TTL as its PSN, which the quoted packet in the answer gives back. One SPORT's
TTLs go out at once, then GAP_S seconds pass before the next (routers limit their ICMP per
destination: Linux allows a burst of 6, then one per icmp_ratelimit)."""
import errno
import select
import socket
import struct
import sys
import time

IP_RECVERR = 11
SO_EE_ORIGIN_ICMP = 2
ICMP_TIME_EXCEEDED = 11
# opcode 0x1F (reserved RC), flags: transport version 0xF, P_Key 0, dest QP 0, PSN = the TTL; ICRC 0
BTH = struct.Struct("!BBHII")


def trace(src, sport, dst, dev, max_ttl):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, dev.encode())
    s.setsockopt(socket.SOL_IP, IP_RECVERR, 1)
    s.bind((src, sport))
    for ttl in range(1, max_ttl + 1):
        s.setsockopt(socket.SOL_IP, socket.IP_TTL, ttl)
        # IP_RECVERR also reports a queued ICMP error (the previous TTL's answer) on the next send,
        # which then sends nothing: once reported it is cleared, so send again
        for _ in range(max_ttl + 1):
            try:
                s.sendto(BTH.pack(0x1F, 0x0F, 0, 0, ttl) + bytes(4), (dst, 4791))
                break
            except OSError as e:
                if e.errno not in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ECONNREFUSED):
                    raise
    hops = {}
    deadline = time.monotonic() + 1.0
    p = select.poll()
    p.register(s, select.POLLERR)
    while len(hops) < max_ttl:
        left = deadline - time.monotonic()
        if left <= 0 or not p.poll(left * 1000):
            break
        try:
            data, anc, _, _ = s.recvmsg(64, 512, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
        except BlockingIOError:
            continue
        for level, kind, cdata in anc:
            if level != socket.SOL_IP or kind != IP_RECVERR or len(cdata) < 16 + 8 or len(data) < 12:
                continue
            _, origin, icmp_type, _, _, _, _ = struct.unpack("=IBBBBII", cdata[:16])
            ttl = struct.unpack("!I", data[8:12])[0]
            if origin == SO_EE_ORIGIN_ICMP and icmp_type == ICMP_TIME_EXCEEDED and 1 <= ttl <= max_ttl:
                hops[ttl] = socket.inet_ntoa(cdata[20:24])  # the offender: a sockaddr_in after the struct
    s.close()
    return [hops.get(t, "*") for t in range(1, max_ttl + 1)]


def main():
    src, dst, dev, max_ttl, gap = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    for i, sport in enumerate(sys.argv[6:]):
        if i:
            time.sleep(gap)
        print(sport, " ".join(trace(src, int(sport), dst, dev, max_ttl)), flush=True)


if __name__ == "__main__":
    main()
