"""Runs the real rdma_exporter binary on loopback and parses its real /metrics output.

Shared by the Python tests (fixtures, prometheus, deploy...). Stdlib only.
"""
import contextlib
import gzip
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import unprivileged  # noqa: E402

SYSFS_GEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sysfs_gen.py")

SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def take_exporter_arg():
    """The exporter binary: `--exporter PATH` (removed from sys.argv, so unittest never sees it),
    else $RDMA_EXPORTER."""
    argv = sys.argv
    if len(argv) > 2 and argv[1] == "--exporter":
        path = argv[2]
        del argv[1:3]
        return path
    return os.environ.get("RDMA_EXPORTER", "")


def write_tree(root, profile="fixtures", with_manifest=False, devices=None):
    """Writes a generated sysfs tree at root (tests/lib/sysfs_gen.py); returns its manifest
    (every file written and its exact content) when asked for. devices: the bench profile's HCAs."""
    args = [sys.executable, SYSFS_GEN, root, "--profile", profile]
    if devices is not None:
        args += ["--devices", str(devices)]
    manifest = root + ".manifest.json"
    if with_manifest:
        args += ["--manifest", manifest]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    if with_manifest:
        with open(manifest) as f:
            return json.load(f)
    return None


def write_file_atomically(path, text):
    """Replaces a file of a fake sysfs tree as the kernel changes an attribute: a reader sees the
    old content or the new, never the empty file that truncating in place shows for a moment (a
    background reader caught it and counted the file malformed)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unescape(v):
    return v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")


def parse_text(text):
    """-> (samples {(name, frozenset(labels.items())): raw value string}, types {family: type})."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, fam, typ = line.split(" ", 3)
            types[fam] = typ
            continue
        if not line or line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        if not m:
            raise AssertionError(f"unparsable exposition line: {line!r}")
        labels = {k: unescape(v) for k, v in LABEL_RE.findall(m.group(3) or "")}
        key = (m.group(1), frozenset(labels.items()))
        if key in samples:
            raise AssertionError(f"duplicate series: {line!r}")
        samples[key] = m.group(4)
    return samples, types


def stop_process(proc, grace=10):
    """SIGTERM, then SIGKILL when it has not exited after `grace` seconds; waits either way and
    returns the exit status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def memory_kib(pid):
    """VmRSS and its parts (RssAnon: the process's own memory; RssFile: mapped files, mostly the
    shared libraries' pages, which every process using them maps too), in KiB."""
    with open(f"/proc/{pid}/status") as f:
        return {k: int(v.split()[0]) for k, v in (l.split(":", 1) for l in f)
                if k in ("VmRSS", "RssAnon", "RssFile")}


def rss_kib(pid):
    return memory_kib(pid).get("VmRSS", 0)


class Exporter:
    """The real rdma_exporter on 127.0.0.1:<free port>, its output in a temporary log file;
    started ready (/healthz answers) unless wait=False. Subclasses change how readiness is asked
    (healthy()) and the URL (scheme, host)."""

    def __init__(self, binary, *args, env=None, wait=True, scheme="http", host="127.0.0.1", user=None,
                 cwd=None, log_dir=None):
        """cwd: the exporter's working directory; log_dir: where its log file goes (default: the
        system's temporary directory; the log is removed by stop() there, kept in a log_dir)."""
        self.port = free_port()
        self.log_dir = log_dir
        self.logf = tempfile.NamedTemporaryFile(prefix="rdma_exporter-", suffix=".log", delete=False, dir=log_dir)
        # user=(user, group): the exporter runs as that user, with no supplementary groups (a test
        # running as root needs an unprivileged exporter to see permission errors). The user may
        # not reach the binary where it was built (a checkout under /root, mode 0700): it runs a
        # copy staged where it can (tests/lib/unprivileged.py).
        ids = {}
        if user:
            ids = dict(user=user[0], group=user[1], extra_groups=[])
            self.staged = unprivileged.StagedBinary(binary)
            binary = self.staged.path
        self.args = [binary, f"--web.listen-address=127.0.0.1:{self.port}", *args]
        self.proc = subprocess.Popen(self.args, stdout=self.logf, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})}, cwd=cwd, **ids)
        self.url = f"{scheme}://{host}:{self.port}"
        if wait:
            self.wait_ready()

    def healthy(self):
        with urllib.request.urlopen(self.url + "/healthz", timeout=2) as r:
            return r.status == 200

    def wait_ready(self, seconds=30):
        deadline = time.monotonic() + seconds
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"exporter exited with {self.proc.returncode}: {self.read_log()}")
            try:
                if self.healthy():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                log = self.read_log()
                self.stop()
                raise AssertionError("exporter did not answer /healthz: " + log)
            time.sleep(0.05)

    def read_log(self):
        with open(self.logf.name) as f:
            return f.read()

    def get(self, path="/metrics", headers=None, timeout=60):
        req = urllib.request.Request(self.url + path, headers=headers or {})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
            if r.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            return r.status, dict(r.headers), body.decode()

    def scrape(self):
        return parse_text(self.get()[2])

    def stop(self):
        """Stops the exporter; returns its exit status."""
        rc = stop_process(self.proc)
        if self.log_dir is None:
            with contextlib.suppress(OSError):
                os.unlink(self.logf.name)
        if getattr(self, "staged", None):
            self.staged.remove()
        return rc

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def value(samples, name, **labels):
    key = (name, frozenset(labels.items()))
    if key not in samples:
        near = [dict(l) for (n, l) in samples if n == name][:5]
        raise AssertionError(f"missing sample {name}{labels}; some {name} series: {near}")
    return samples[key]


def series(samples, name):
    return {l: v for (n, l), v in samples.items() if n == name}


class Prometheus:
    """Debian's prometheus (found on PATH: ctest puts the unpacked one first) on loopback scraping `targets` every second, with an optional
    rules file; temporary data directory; stopped by PID on exit."""

    def __init__(self, workdir, targets, rule_files=(), binary=None, job="rdma", scrape_configs=None):
        """scrape_configs: the YAML of the scrape_configs list instead of one static job (e.g. http_sd_configs)."""
        binary = binary or "prometheus"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cfg = os.path.join(workdir, "prometheus.yml")
        rules = "".join(f"rule_files: ['{r}']\n" for r in rule_files[:1])
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n" + rules +
                    "scrape_configs:\n" + (scrape_configs or
                                            f"  - job_name: {job}\n    static_configs:\n"
                                            f"      - targets: [{', '.join(repr(t) for t in targets)}]\n"))
        self.proc = subprocess.Popen([binary, f"--config.file={cfg}", f"--storage.tsdb.path={workdir}/prometheus-data",
                                      f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def api(self, path, **params):
        """GET /api/v1/<path> with query parameters -> its data (asserts status success)."""
        url = self.url + "/api/v1/" + path + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def stop(self):
        stop_process(self.proc, grace=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class Watchers:
    """What a node's HTTP clients see while a test attacks the exporter: a Prometheus-like client
    scrapes `scrape_path` every `scrape_every` s on a fresh connection with Prometheus' 10 s timeout
    (and its header), and a kubelet-like client GETs /healthz every `health_every` s. Every answer is
    kept as (status or the error's text, seconds). Use as a context manager around the attack."""

    def __init__(self, port, scrape_path="/metrics", headers=None, scrape_every=0.5, health_every=0.2, timeout=10.0):
        import threading
        self.port, self.path, self.timeout = port, scrape_path, timeout
        self.headers = {"X-Prometheus-Scrape-Timeout-Seconds": str(timeout), "Accept-Encoding": "gzip",
                        **(headers or {})}
        self.scrapes, self.healthz = [], []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, args=(self.scrapes, scrape_path, self.headers, scrape_every)),
                         threading.Thread(target=self._loop, args=(self.healthz, "/healthz", {}, health_every))]

    def _get(self, path, headers):
        import http.client
        t0 = time.monotonic()
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            try:
                c.request("GET", path, headers=headers)
                r = c.getresponse()
                r.read()
                return r.status, time.monotonic() - t0
            finally:
                c.close()
        except (OSError, http.client.HTTPException) as e:
            return f"{type(e).__name__}: {e}", time.monotonic() - t0

    def _loop(self, out, path, headers, every):
        while not self._stop.is_set():
            out.append(self._get(path, headers))
            self._stop.wait(every)

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join()

    @staticmethod
    def failed(results):
        return [r for r in results if r[0] != 200]

    def summary(self):
        def stats(results):
            s = sorted(t for _, t in results)
            if not s:
                return "none"
            return (f"{len(s)} answers, {len(self.failed(results))} failed, median {s[len(s) // 2] * 1000:.0f} ms, "
                    f"max {s[-1] * 1000:.0f} ms")
        return f"{self.path}: {stats(self.scrapes)}; /healthz: {stats(self.healthz)}"


class Holders:
    """`count` connections to 127.0.0.1:port that each send `first` on connect and then one byte of
    `trickle` every `every` s (b"": nothing), re-opened as soon as the server closes one: the shapes
    of silent connections, one-byte connections and slowloris heads. One thread, non-blocking
    sockets; `reopened` counts the connections the server ended. Use as a context manager."""

    def __init__(self, port, count, first=b"", trickle=b"", every=0.5):
        import threading
        self.port, self.count, self.first, self.trickle, self.every = port, count, first, trickle, every
        self.reopened = 0
        self.open_failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _open(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            self.open_failures += 1
            return None
        return [s, False, 0]  # socket, first bytes sent, trickle position

    def _run(self):
        import select  # poll, not select(): the descriptors may pass FD_SETSIZE
        conns = [c for c in (self._open() for _ in range(self.count)) if c]
        next_trickle = time.monotonic() + self.every
        while not self._stop.is_set():
            p = select.poll()
            for c in conns:
                p.register(c[0], select.POLLIN | (0 if c[1] else select.POLLOUT))
            events = dict(p.poll(50))
            keep = []
            for c in conns:
                ev = events.get(c[0].fileno(), 0)
                ended = False
                if not c[1] and ev & select.POLLOUT:
                    try:
                        if self.first:
                            c[0].send(self.first)
                        c[1] = True
                    except OSError:
                        ended = True
                if ev & (select.POLLIN | select.POLLHUP | select.POLLERR):
                    try:
                        ended = ended or c[0].recv(4096) == b""
                    except BlockingIOError:
                        pass
                    except OSError:
                        ended = True
                if ended:
                    c[0].close()
                    self.reopened += 1
                    c = self._open()
                if c:
                    keep.append(c)
            conns = keep
            while len(conns) < self.count and not self._stop.is_set():
                c = self._open()
                if not c:
                    break
                conns.append(c)
            if self.trickle and time.monotonic() >= next_trickle:
                next_trickle = time.monotonic() + self.every
                for c in conns:
                    if c[1]:
                        with contextlib.suppress(OSError):
                            c[0].send(self.trickle[c[2] % len(self.trickle):][:1])
                            c[2] += 1
        for c in conns:
            c[0].close()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
