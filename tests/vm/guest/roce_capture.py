#!/usr/bin/python3
"""Counts the RoCE v2 packets (IPv4, UDP port 4791) seen on one interface by source address, IP
TOS byte and UDP source port, with an AF_PACKET socket (no tcpdump, no netfilter module needed).

roce_capture.py IFACE SECONDS: prints "SOURCE TOS SPORT COUNT" lines after SECONDS."""
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003


def main():
    iface, seconds = sys.argv[1], float(sys.argv[2])
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    s.settimeout(0.2)
    counts = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            frame = s.recv(2048)
        except socket.timeout:
            continue
        if len(frame) < 14 + 20 + 8 or struct.unpack("!H", frame[12:14])[0] != 0x0800:
            continue
        ip = frame[14:]
        ihl = (ip[0] & 0x0F) * 4
        if ip[9] != socket.IPPROTO_UDP or len(ip) < ihl + 8:
            continue
        if struct.unpack("!H", ip[ihl + 2:ihl + 4])[0] != 4791:
            continue
        key = (socket.inet_ntoa(ip[12:16]), ip[1], struct.unpack("!H", ip[ihl:ihl + 2])[0])
        counts[key] = counts.get(key, 0) + 1
    for (src, tos, sport), n in sorted(counts.items()):
        print(src, tos, sport, n)


if __name__ == "__main__":
    main()
