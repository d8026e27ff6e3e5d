#!/usr/bin/env python3
"""Forges ICMP answers to the path tracer's packets, for netns_tracer.sh (run as root in the
destination's namespace, whose kernel is kept silent on UDP 4791 as a RoCE NIC is).

Every trace packet (UDP to 4791) seen on NETDEV (AF_PACKET: before netfilter) is answered, to its
source, with:
  * a time exceeded from ROUTER_ADDR quoting the bare IP + UDP headers (RFC 792's minimum), as if
    an extra router sat there;
  * a port unreachable from the destination's address, quoting the bare IP + UDP headers, as a
    host without a RoCE listener would, but naming no QP nor TTL;
  * a port unreachable from the destination's address quoting the whole packet with another
    destination QP (another flow's);
  * a time exceeded from ROUTER_ADDR quoting the whole packet with a PSN (TTL) the trace never sent.
None of them may become a hop or a distance. Prints "ready" once listening, "forged N" per packet.
Usage: icmp_forger.py NETDEV ROUTER_ADDR DEST_ADDR
"""
import socket
import struct
import sys


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def icmp(kind: int, code: int, quote: bytes) -> bytes:
    head = struct.pack("!BBHI", kind, code, 0, 0)
    return struct.pack("!BBHI", kind, code, checksum(head + quote), 0) + quote


def sender(addr: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.bind((addr, 0))
    return s


def main() -> None:
    dev, router, dest = sys.argv[1:4]
    cap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
    cap.bind((dev, 0))
    from_router, from_dest = sender(router), sender(dest)
    print("ready", flush=True)
    n = 0
    while True:
        frame = cap.recv(2048)
        ip = frame[14:]
        if len(ip) < 28 or ip[9] != socket.IPPROTO_UDP:
            continue
        ihl = (ip[0] & 0x0F) * 4
        udp = ip[ihl:]
        if len(udp) < 8 + 12 or struct.unpack("!H", udp[2:4])[0] != 4791:
            continue
        total = struct.unpack("!H", ip[2:4])[0]
        packet = ip[:total]
        source = socket.inet_ntoa(ip[12:16])
        bare = packet[: ihl + 8]
        bth = bytearray(packet[ihl + 8 :])
        other_qp = bytearray(bth)
        other_qp[7] ^= 0x01
        unsent_psn = bytearray(bth)
        unsent_psn[9:12] = (60).to_bytes(3, "big")
        from_router.sendto(icmp(11, 0, bare), (source, 0))
        from_dest.sendto(icmp(3, 3, bare), (source, 0))
        from_dest.sendto(icmp(3, 3, packet[: ihl + 8] + bytes(other_qp)), (source, 0))
        from_router.sendto(icmp(11, 0, packet[: ihl + 8] + bytes(unsent_psn)), (source, 0))
        n += 1
        print(f"forged {n}", flush=True)


if __name__ == "__main__":
    main()
