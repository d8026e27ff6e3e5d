#!/usr/bin/python3
"""Reads an exporter's /prober/traces (docs/prober.md, "Path tracing") for the vm tests.

prober_traces.py URL USER:PASSWORD MIN_TRACED: polls (bounded: 300 tries, 0.2 s apart) until at
least MIN_TRACED flows have a path, then prints one line per flow:
"RAIL DEVICE FLOW UDP_SPORT PATH FRESH" with PATH and FRESH the hop lists joined by commas ("-":
none). Exits 1 when they never have."""
import base64
import json
import sys
import time
import urllib.request


def fetch(url, auth):
    req = urllib.request.Request(url, headers={"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.load(r)


def main():
    url, auth, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
    flows = []
    for _ in range(300):
        try:
            flows = fetch(url, auth)["flows"]
        except (OSError, ValueError, KeyError):
            flows = []
        if sum(1 for f in flows if f.get("path")) >= want:
            break
        time.sleep(0.2)
    else:
        print("prober_traces: %d of %d flows traced" % (sum(1 for f in flows if f.get("path")), want), file=sys.stderr)
    for f in flows:
        print(f["rail"], f["device"], int(f["flow"]), int(f["udp_sport"]),
              ",".join(f.get("path") or ["-"]), ",".join(f.get("fresh") or ["-"]))
    return 0 if sum(1 for f in flows if f.get("path")) >= want else 1


if __name__ == "__main__":
    sys.exit(main())
