#!/usr/bin/env python3
"""The server's own response times, as the loopback wire saw them.

Reads a pcap that tcpdump wrote (`-i lo`, nanosecond timestamps, any
snap length >= 74) and the server's port; for each client connection
pairs its request's first data segment with the server's first data
segment after it. Prints the times' count, p50, p99 and p99.9 in µs, as
JSON. A generator's latency minus these is what the generator added: its
lateness against the schedule, its send path, and the delay between a
response reaching its socket and the generator reading it.

    wire_times.py capture.pcap 8080
"""
import json
import struct
import sys

PCAP_NS = 0xA1B23C4D
PCAP_US = 0xA1B2C3D4
LINKTYPE_ETHERNET = 1
LINKTYPE_NULL = 0


def packets(path):
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            return
        magic = struct.unpack("<I", head[:4])[0]
        endian = "<"
        if magic not in (PCAP_NS, PCAP_US):
            endian = ">"
            magic = struct.unpack(">I", head[:4])[0]
        if magic not in (PCAP_NS, PCAP_US):
            raise SystemExit(f"{path}: not a pcap file")
        scale = 1 if magic == PCAP_NS else 1000
        link = struct.unpack(endian + "I", head[20:24])[0]
        skip = {LINKTYPE_ETHERNET: 14, LINKTYPE_NULL: 4}.get(link)
        if skip is None:
            raise SystemExit(f"{path}: link type {link} is not loopback's")
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            sec, frac, caplen, _ = struct.unpack(endian + "IIII", rec)
            data = f.read(caplen)
            ip = data[skip:]
            if len(ip) < 20 or ip[0] >> 4 != 4:
                continue
            ihl = (ip[0] & 15) * 4
            total = struct.unpack(">H", ip[2:4])[0]
            tcp = ip[ihl:]
            if len(tcp) < 20:
                continue
            sport, dport = struct.unpack(">HH", tcp[:4])
            payload = total - ihl - (tcp[12] >> 4) * 4
            if payload > 0:
                yield sec * 1_000_000_000 + frac * scale, sport, dport


def percentile(sorted_v, q):
    if not sorted_v:
        return None
    return sorted_v[min(len(sorted_v) - 1, int(q * len(sorted_v)))]


def main():
    path, port = sys.argv[1], int(sys.argv[2])
    asked = {}
    times = []
    for t, sport, dport in packets(path):
        if dport == port:
            asked.setdefault(sport, t)
        elif sport == port and dport in asked:
            times.append((t - asked.pop(dport)) / 1000)
    times.sort()
    print(json.dumps({
        "count": len(times),
        "p50_us": percentile(times, 0.50),
        "p99_us": percentile(times, 0.99),
        "p999_us": percentile(times, 0.999),
    }))


if __name__ == "__main__":
    main()
