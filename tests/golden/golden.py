#!/usr/bin/env python3
"""Golden exposition: the whole /metrics of the real exporter, with its default collectors, on a
fixed fixture tree, diffed against a committed file (tests/golden/<case>.prom), as node_exporter's
end-to-end test does. Every collector asserts its own values elsewhere; this catches what none of
them asks about: a new, renamed, relabelled or vanished series, a changed HELP or TYPE.

  golden.py check  --exporter PATH CASE     fail with a unified diff when the output differs
  golden.py update --exporter PATH [CASE..] rewrite the committed files (tests/golden/update.sh)
(each scrape runs in private mount and network namespaces: root, or unshare --map-root-user)

Cases (the trees come from tests/lib/sysfs_gen.py, fixed seed, written once, never ticked):
  demo   the bundled demo fabric (scripts/run.sh, scripts/demo-fabric.sh --no-tick)
  sysfs  the bench profile with 4 devices: a multi-device mlx5 InfiniBand node

What varies between runs is masked by the rules in MASKS below, each stated with its reason; the
series stays in the file (its name, labels, HELP and TYPE are still compared), only the value or
label that varies becomes <masked>. A series that is not in a rule is compared exactly.
"""
import difflib
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from exporter_harness import LABEL_RE, SAMPLE_RE, Exporter, write_tree  # noqa: E402

CASES = {
    "demo": dict(profile="demo", args=()),
    "sysfs": dict(profile="bench", args=(), devices=4),
}

MASKED = "<masked>"
# (family regex, what is masked, why). "value": the sample's value; "label:NAME": that label's
# value. The families are matched whole (re.fullmatch on the family name).
MASKS = [
    (r"process_.*", "value", "the exporter process's own CPU, memory, file descriptors, start time"),
    (r"rdma_exporter_build_info", "label:version", "the build's version"),
    (r"rdma_exporter_build_info", "label:revision", "the build's commit"),
    (r"rdma_exporter_build_info", "label:compiler", "the compiler of the build (gcc, the sanitizers' clang)"),
    (r".*_duration_seconds", "value", "how long a scrape, a discovery or a collector took"),
    (r".*_timestamp_seconds", "value", "wall-clock times"),
    (r".*_start_time_seconds", "value", "wall-clock times"),
    (r".*_uptime_seconds", "value", "time since the start"),
    (r".*_snapshot_age_seconds", "value", "how old a background reading is when the scrape serves it"),
]

SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created", "_info")


def family_of(name, families):
    """The family a sample belongs to: its own name, or the name less a histogram/summary suffix."""
    if name in families:
        return name
    for s in SUFFIXES:
        if name.endswith(s) and name[: -len(s)] in families:
            return name[: -len(s)]
    return name


def masks_for(family):
    return [what for regex, what, _ in MASKS if re.fullmatch(regex, family)]


def normalize(text):
    """The exposition in a canonical form: families sorted by name, each its HELP, TYPE and its
    samples sorted, with the MASKS applied. Raises on a line that is not exposition text."""
    fams = {}  # family -> {"meta": [...], "samples": [...]}
    helps, types = {}, {}
    samples = []
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, fam = line.split(" ", 3)[1:3]
            (helps if kind == "HELP" else types)[fam] = line
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        if not m:
            raise ValueError("not exposition text: %r" % line)
        samples.append((m.group(1), m.group(3), m.group(4)))
    known = set(helps) | set(types)
    for name, labels, value in samples:
        fam = family_of(name, known)
        masks = masks_for(fam)
        pairs = LABEL_RE.findall(labels or "")
        pairs = [(k, MASKED if "label:" + k in masks else v) for k, v in pairs]
        if "value" in masks:
            value = MASKED
        body = ",".join('%s="%s"' % kv for kv in pairs)
        fams.setdefault(fam, []).append("%s{%s} %s" % (name, body, value) if pairs else "%s %s" % (name, value))
    for fam in known:
        fams.setdefault(fam, [])
    out = []
    for fam in sorted(fams):
        out += [l for l in (helps.get(fam), types.get(fam)) if l]
        out += sorted(fams[fam])
    return "\n".join(out) + "\n"


# What the default collectors could read from this host rather than from the tree: its RDMA
# devices (libibverbs and libibumad read the real /sys/class and /dev), its netdevs (ethtool,
# netlink). The scrape runs in private mount and network namespaces (unshare; a user namespace
# too when not root) where these show nothing, so the golden file is the tree's alone.
HIDDEN = ["/sys/class/infiniband", "/sys/class/infiniband_mad", "/sys/class/infiniband_verbs", "/dev/infiniband"]


def isolate():
    """In the new namespaces: hide the host's RDMA devices, bring up loopback (the scrape's)."""
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    for d in HIDDEN:
        if os.path.isdir(d):
            subprocess.run(["mount", "-t", "tmpfs", "rdma-golden", d], check=True)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def scrape_here(exporter, case):
    """The normalised first scrape of a fresh exporter on the case's tree. The first: the
    exporter's own counters (scrapes, reads) then count one scrape. The default collectors read on
    the scrape, and discovery is done before /healthz answers: the first scrape right after it and
    one 3 s later were measured equal. A default collector that publishes from the background
    later must make the harness wait for its first snapshot here, not mask it."""
    spec = CASES[case]
    with tempfile.TemporaryDirectory(prefix="rdma-golden-") as tmp:
        tree = os.path.join(tmp, "sys")
        write_tree(tree, spec["profile"], devices=spec.get("devices"))
        with Exporter(exporter, "--path.sysfs=" + tree, *spec["args"]) as e:
            return normalize(e.get()[2])


def scrape_case(exporter, case):
    """scrape_here in private namespaces (this script again, under unshare)."""
    ns = ["unshare", "--mount", "--net"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    r = subprocess.run(ns + [sys.executable, os.path.abspath(__file__), "_scrape", "--exporter", exporter, case],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError("scrape of %s failed (%d): %s" % (case, r.returncode, r.stderr[-3000:]))
    return r.stdout


def golden_path(case):
    return os.path.join(HERE, case + ".prom")


HEADER = ("# Golden exposition of tests/golden/golden.py case %s: regenerate with tests/golden/update.sh,\n"
          "# review the diff series by series (docs/developing.md, \"Golden exposition\").\n")


def check(exporter, case):
    got = HEADER % case + scrape_case(exporter, case)
    with open(golden_path(case)) as f:
        want = f.read()
    if got == want:
        print("golden %s: %d lines equal" % (case, got.count("\n")))
        return 0
    sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                               "tests/golden/%s.prom" % case, "scraped", n=1))
    print("golden %s differs: if the change is meant, run tests/golden/update.sh and review the diff" % case)
    return 1


def update(exporter, cases):
    for case in cases or sorted(CASES):
        text = HEADER % case + scrape_case(exporter, case)
        with open(golden_path(case), "w") as f:
            f.write(text)
        print("wrote %s (%d lines)" % (os.path.relpath(golden_path(case)), text.count("\n")))
    return 0


def main(argv):
    if len(argv) == 5 and argv[1] == "_scrape":  # inside the namespaces (scrape_case)
        isolate()
        sys.stdout.write(scrape_here(argv[3], argv[4]))
        return 0
    if len(argv) < 4 or argv[1] not in ("check", "update") or argv[2] != "--exporter":
        print(__doc__, file=sys.stderr)
        return 2
    cmd, exporter, cases = argv[1], argv[3], argv[4:]
    unknown = [c for c in cases if c not in CASES]
    if unknown or (cmd == "check" and len(cases) != 1):
        print("cases: %s (check takes one)" % ", ".join(sorted(CASES)), file=sys.stderr)
        return 2
    return check(exporter, cases[0]) if cmd == "check" else update(exporter, cases)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
