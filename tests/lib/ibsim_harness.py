"""ibsim test bed for the pma collector (see ../../../shared/labs/ibsim/NOTES.md for the recipe).

Sim: installs the Debian packages if missing, writes a net file, starts ibsim with its console on a
pipe, runs `opensm --once` under the umad2sim shim, and offers console commands (`sim.cmd`),
shim-wrapped tools (`sim.run`, e.g. perfquery) and an exporter process (`Exporter`). Everything
started is stopped by PID in close(); every wait has a deadline, so a test never hangs.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import exporter_harness  # noqa: E402
from exporter_harness import stop_process  # noqa: E402

# opensm itself is unpacked, not installed (its postinst would start a subnet manager on any host
# with InfiniBand): scripts/test-tools.sh, which ctest puts on PATH. These are its libraries.
PACKAGES = ["ibsim-utils", "libumad2sim0", "infiniband-diags", "libopensm9", "libosmcomp5", "libosmvendor5",
            "libwrap0"]


class SetupError(Exception):
    """The test bed cannot be built: a failure of the test, never a skip."""


def ensure_packages():
    missing = [p for p in PACKAGES
               if subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True)
               .stdout.find("ok installed") < 0]
    if not missing:
        return
    if os.geteuid() != 0:
        raise SetupError("missing packages %s and not root to install them (scripts/install-deps.sh)" % missing)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], env=env, timeout=300, check=False)
    r = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + missing, env=env,
                       timeout=600, capture_output=True, text=True)
    if r.returncode != 0:
        raise SetupError("apt-get install %s failed: %s" % (missing, r.stderr[-500:]))


def shim_path():
    out = subprocess.run(["dpkg", "-L", "libumad2sim0"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.endswith("/libumad2sim.so"):
            return line
    raise SetupError("libumad2sim.so not found")


# Small default fabric: one 8-port switch, Hca1 (where clients attach), Hca2, dual-port Hca3.
DEFAULT_NET = """Switch\t8 "Switch1"
[1]\t"Hca1"[1]
[2]\t"Hca2"[1]
[3]\t"Hca3"[1]
[4]\t"Hca3"[2]

Hca\t1 "Hca1"
[1]\t"Switch1"[1]

Hca\t1 "Hca2"
[1]\t"Switch1"[2]

Hca\t2 "Hca3"
[1]\t"Switch1"[3]
[2]\t"Switch1"[4]
"""


def fat_tree(leaves, hosts, spines):
    """A two-level fat tree net file: each leaf has `hosts` single-port HCAs and one uplink to each
    of `spines` spines; nodes are spineS, leafL, hostL-H."""
    out = []
    for s in range(spines):
        out.append('Switch\t%d "spine%d"' % (max(leaves, 2), s))
        for l in range(leaves):
            out.append('[%d]\t"leaf%d"[%d]' % (l + 1, l, hosts + s + 1))
        out.append("")
    for l in range(leaves):
        out.append('Switch\t%d "leaf%d"' % (hosts + spines, l))
        for h in range(hosts):
            out.append('[%d]\t"host%d-%d"[1]' % (h + 1, l, h))
        for s in range(spines):
            out.append('[%d]\t"spine%d"[%d]' % (hosts + s + 1, s, l + 1))
        out.append("")
    for l in range(leaves):
        for h in range(hosts):
            out.append('Hca\t1 "host%d-%d"\n[1]\t"leaf%d"[%d]\n' % (l, h, l, h + 1))
    return "\n".join(out) + "\n"


class Sim:
    def __init__(self, net=DEFAULT_NET, host="Hca1", ibsim_args=()):
        """ibsim_args: e.g. ("-N", "4096", "-S", "512") for a fabric beyond ibsim's default node limits."""
        ensure_packages()
        self.dir = tempfile.mkdtemp(prefix="pma-ibsim-")
        self.procs = []
        self.exporters = []  # their logs are printed by close() when one died
        self.env = dict(os.environ, IBSIM_SOCKNAME="pma-ibsim-%d-%d" % (os.getpid(), id(self) % 100000),
                        SIM_HOST=host, OSM_CACHE_DIR=self.dir, OSM_TMP_DIR=self.dir)
        self.shim = shim_path()
        with open(os.path.join(self.dir, "net"), "wb" if isinstance(net, bytes) else "w") as f:
            f.write(net)  # bytes: a net file with names that are not UTF-8
        self.buf = ""
        self.buf_cv = threading.Condition()
        self.log = open(os.path.join(self.dir, "ibsim.log"), "w")
        self.ibsim = subprocess.Popen(["ibsim", "-s"] + list(ibsim_args) + ["net"], cwd=self.dir, env=self.env, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        threading.Thread(target=self._reader, daemon=True).start()
        self.seq = 0
        self.mark_pos = 0
        self.shim_env = dict(self.env, LD_PRELOAD=self.shim)
        try:
            self.cmd("# ready")  # the banner comes before the sockets are bound; an echo comes after
            r = self.run(["opensm", "--once", "-f", os.path.join(self.dir, "osm.log")], timeout=60)
            if r.returncode != 0:
                raise RuntimeError("opensm --once failed: %s" % r.stdout[-500:])
            deadline = time.monotonic() + 20
            while self.run(["perfquery"], timeout=10).returncode != 0:
                if time.monotonic() > deadline:
                    raise RuntimeError("fabric never answered perfquery")
                time.sleep(0.05)
        except BaseException:
            # No caller gets a Sim to close: ibsim (which spins a core) would outlive the test.
            self.close()
            raise

    def _reader(self):
        # ibsim echoes a "# comment" without a newline: read raw chunks, not lines.
        fd = self.ibsim.stdout.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            text = chunk.decode(errors="replace")
            self.log.write(text)
            self.log.flush()
            with self.buf_cv:
                self.buf += text
                self.buf_cv.notify_all()

    def cmd(self, *commands, timeout=20):
        """Sends console commands; returns the lines ibsim printed for them."""
        self.seq += 1
        mark = "# mark-%d" % self.seq
        for c in commands:
            self.ibsim.stdin.write(c + "\n")
        self.ibsim.stdin.write(mark + "\n")
        self.ibsim.stdin.flush()
        deadline = time.monotonic() + timeout
        with self.buf_cv:
            start = self.mark_pos
            while mark not in self.buf[start:]:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError("ibsim console did not echo %r" % mark)
                self.buf_cv.wait(left)
            end = self.buf.index(mark, start)
            out = self.buf[start:end]
            self.mark_pos = end + len(mark)
        return [l.replace("sim> ", "").strip() for l in out.splitlines()
                if l.replace("sim> ", "").strip() and "parse_port_connection_data" not in l]

    def set(self, node, port, attr_field, value):
        out = self.cmd('PerformanceSet "%s"[%d] %s=%d' % (node, port, attr_field, value))
        if not any("has been set" in l for l in out):
            raise RuntimeError("PerformanceSet failed: %s" % out)

    def run(self, argv, timeout=30, env=None):
        return subprocess.run(argv, cwd=self.dir, env=dict(self.shim_env, **(env or {})), capture_output=True,
                              text=True, timeout=timeout)

    def perfquery(self, *args):
        r = self.run(["perfquery"] + [str(a) for a in args])
        if r.returncode != 0:
            raise RuntimeError("perfquery %s failed: %s" % (args, r.stderr))
        return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+):\.*(\d+)$", r.stdout, re.M)}

    def lids(self):
        """nodeid -> {port: lid} for CAs, nodeid -> lid for switches, from ibnetdiscover."""
        out = self.run(["ibnetdiscover"]).stdout
        res = {}
        for m in re.finditer(r'^Switch\s+\d+\s+"[^"]+"\s+# "([^"]+)".* lid (\d+)', out, re.M):
            res[m.group(1)] = int(m.group(2))
        cur = None
        for line in out.splitlines():
            m = re.match(r'^Ca\s+\d+\s+"[^"]+"\s+# "([^"]+)"', line)
            if m:
                cur = m.group(1)
                res[cur] = {}
                continue
            if line.startswith("Switch"):
                cur = None
            m = re.match(r'^\[(\d+)\]\(\w+\)\s.*# lid (\d+)', line)
            if cur and m:
                res[cur][int(m.group(1))] = int(m.group(2))
        return res

    def track(self, proc):
        self.procs.append(proc)
        return proc

    def close(self):
        for p in self.procs:
            if p.poll() is not None and p.returncode != 0:
                print("process %s exited with %d" % (p.args[0], p.returncode))
        for p in self.procs:
            stop_process(p)
        for e in self.exporters:
            if e.proc.returncode not in (0, None):
                print("--- exporter log tail (exit %d) ---\n%s" % (e.proc.returncode, e.log()[-4000:]))
        if self.ibsim.poll() is None:
            try:
                os.kill(self.ibsim.pid, signal.SIGCONT)
                self.ibsim.stdin.write("Quit\n")
                self.ibsim.stdin.flush()
            except (OSError, ValueError):
                pass
            stop_process(self.ibsim, grace=3)
        self.log.close()
        if os.environ.get("PMA_KEEP_TMP"):
            print("kept", self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


class Exporter(exporter_harness.Exporter):
    """The shared runner (tests/lib/exporter_harness.py) under the simulator: its shim in the
    environment, the simulator's directory as working directory and for the log, one collector."""

    def __init__(self, sim, binary, *args, env=None, collector="pma", sysfs=None):
        """env: variables added to the simulator's (e.g. an LD_PRELOAD that includes sim.shim);
        collector: the one collector enabled; sysfs: the --path.sysfs tree (default: an empty one)."""
        self.sim = sim
        self.headers = {}  # sent with every text()/metrics(): credentials when a web config asks for them
        self.sysfs = sysfs or tempfile.mkdtemp(dir=sim.dir, prefix="sysfs-")
        super().__init__(binary, "--path.sysfs=" + self.sysfs, "--collector.disable-defaults",
                         "--collector." + collector, "--log.level=debug", *args,
                         env=dict(sim.shim_env, **(env or {})), cwd=sim.dir, log_dir=sim.dir)
        sim.track(self.proc)
        sim.exporters.append(self)  # close() prints the log of one that died

    def log(self):
        return self.read_log()

    def text(self, timeout=30):
        return self.get(headers=self.headers, timeout=timeout)[2]

    def metrics(self, timeout=30):
        return parse_metrics(self.text(timeout))


def parse_labels(s):
    """The labels of one exposition line's {...} as a sorted tuple of (name, unescaped value)."""
    return tuple(sorted((k, exporter_harness.unescape(v)) for k, v in exporter_harness.LABEL_RE.findall(s or "")))


def _number(v):
    return int(v) if re.fullmatch(r"-?\d+", v) else float(v)


def parse_metrics(text):
    """{(name, ((label, value), ...)): value as int when integral text, else float}: the shared
    parser's samples (tests/lib/exporter_harness.py parse_text), keyed by sorted label tuples."""
    samples, _ = exporter_harness.parse_text(text)
    return {(name, tuple(sorted(labels))): _number(v) for (name, labels), v in samples.items()}


def get(metrics, name, **labels):
    """The one sample of `name` whose labels include `labels`; KeyError when none or several."""
    hits = [v for (n, l), v in metrics.items() if n == name and all(dict(l).get(k) == str(x) for k, x in labels.items())]
    if len(hits) != 1:
        raise KeyError("%s%s: %d samples" % (name, labels, len(hits)))
    return hits[0]


def wait_for(pred, timeout=30, step=0.1, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = pred()
            if v:
                return v
        except (KeyError, OSError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(step)


def run_sim_case(sim, case, cases, fails, *args):
    """The end of every ibsim test script: runs cases[case](sim, *args), reports an exception with its
    traceback as one more failure in `fails`, closes the simulator whatever happened, prints
    "<case>: N failed" and returns the exit status (0 only when nothing failed)."""
    import traceback
    try:
        cases[case](sim, *args)
    except Exception as ex:  # noqa: BLE001 - report, clean up, fail
        traceback.print_exc()
        fails.append(repr(ex))
    finally:
        sim.close()
    print("%s: %d failed" % (case, len(fails)))
    return 1 if fails else 0
