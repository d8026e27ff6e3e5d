#!/usr/bin/python3
"""Reads an exporter's /prober/traces (docs/prober.md, "Path tracing") for the vm tests.

prober_traces.py URL USER:PASSWORD MIN_TRACED [SUSPECTS_FILE]: polls (bounded: 300 tries, 0.2 s
apart) until at least MIN_TRACED flows have a path, then prints one line per flow:
"RAIL DEVICE FLOW UDP_SPORT PATH FRESH STATE" with PATH and FRESH the hop lists joined by commas
("-": none) and STATE how the answer's window judged the flow (lossy, clean, unjudged; "-": not in
it). SUSPECTS_FILE gets the same answer's suspects, "RAIL FROM>TO" a line, and its window number
on the first line as "window N": one answer, so the flows' states and the suspects named from them
are one window's. Exits 1 when the flows never have paths."""
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
    flows, answer = [], {}
    for _ in range(300):
        try:
            answer = fetch(url, auth)
            flows = answer["flows"]
        except (OSError, ValueError, KeyError):
            flows, answer = [], {}
        if sum(1 for f in flows if f.get("path")) >= want:
            break
        time.sleep(0.2)
    else:
        print("prober_traces: %d of %d flows traced" % (sum(1 for f in flows if f.get("path")), want), file=sys.stderr)
    for f in flows:
        print(f["rail"], f["device"], int(f["flow"]), int(f["udp_sport"]),
              ",".join(f.get("path") or ["-"]), ",".join(f.get("fresh") or ["-"]), f.get("state") or "-")
    if len(sys.argv) > 4:
        with open(sys.argv[4], "w") as out:
            print("window", int(answer.get("window", 0)), file=out)
            for s in answer.get("suspects", []):
                print(s["rail"], "%s>%s" % (s["from"], s["to"]), file=out)
    return 0 if sum(1 for f in flows if f.get("path")) >= want else 1


if __name__ == "__main__":
    sys.exit(main())
