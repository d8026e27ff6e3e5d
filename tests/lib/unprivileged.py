"""What a test that drops to an unprivileged user (nobody) needs of the build: the binary and the
shared libraries it loads, where that user can reach them.

A root user's checkout is often under /root (mode 0700): nobody cannot execute
/root/project/build/rdma_exporter, nor load a library the build links from under it. So a test that
runs the exporter as nobody runs a copy, staged in a private temporary directory of its own (mode
0755, removed after), with the libraries nobody could not reach copied beside it. From a checkout
every user can reach, it runs the binary itself: the test is the same either way.

  python3 tests/lib/unprivileged.py stage BINARY DIR   copy into DIR (made 0755), print what to run
The C++ tests have tests/lib/unprivileged.h (a seteuid scope), the shell tests tests/lib/common.sh's
stage_unprivileged (this module's CLI). Stdlib only.
"""
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile


def reachable_by_others(path):
    """True when a user with no relation to the files' owners can read `path`: every directory
    above it searchable by others, the file itself readable by others."""
    path = os.path.realpath(path)
    try:
        if not os.stat(path).st_mode & stat.S_IROTH:
            return False
        d = os.path.dirname(path)
        while True:
            if not os.stat(d).st_mode & stat.S_IXOTH:
                return False
            parent = os.path.dirname(d)
            if parent == d:
                return True
            d = parent
    except OSError:
        return False


def reachable_temp_dir():
    """Where to put what nobody must reach: the temporary directory when others can search it and
    every directory above it, else /tmp (a root user's TMPDIR may be under /root, mode 0700)."""
    tmp = tempfile.gettempdir()
    return tmp if reachable_by_others(os.path.join(tmp, ".")) else "/tmp"


def private_dir(prefix):
    """A new private temporary directory that nobody can read (mode 0755, where nobody reaches it):
    for the trees an unprivileged exporter reads. The caller removes it."""
    d = tempfile.mkdtemp(prefix=prefix, dir=reachable_temp_dir())
    os.chmod(d, 0o755)
    return d


def linked_libraries(binary):
    """The shared libraries `binary` loads, as the dynamic loader resolves them for this process
    (ldd: the RUNPATH, LD_LIBRARY_PATH, the system's)."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=False).stdout
    return [m.group(1) for m in re.finditer(r"=>\s+(/\S+)\s+\(0x", out)]


def rpath_dirs(binary):
    """The directories of the binary's DT_RPATH/DT_RUNPATH: where it (and civetweb) dlopen()s the
    daemon's own modules and TLS shims from (exporter/tls/CMakeLists.txt)."""
    out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=False).stdout
    dirs = []
    for m in re.finditer(r"\((?:RPATH|RUNPATH)\)\s+Library r(?:un)?path: \[(.*)\]", out):
        dirs += [d for d in m.group(1).split(":") if d and "$ORIGIN" not in d]
    return dirs


def unreachable_libraries(binary):
    """The shared objects `binary` loads or may dlopen() that others cannot reach."""
    libs = [l for l in linked_libraries(binary) if not reachable_by_others(l)]
    for d in rpath_dirs(binary):
        if os.path.isdir(d) and not reachable_by_others(os.path.join(d, ".")):
            libs += [os.path.join(d, f) for f in sorted(os.listdir(d)) if ".so" in f and
                     os.path.isfile(os.path.join(d, f))]
    return list(dict.fromkeys(libs))


def stage(binary, directory):
    """The path to run `binary` as an unprivileged user: `binary` itself when that user can reach
    it and everything it loads; else a copy in `directory` (made 0755) with the libraries that user
    cannot reach copied beside it and a wrapper that points the loader at them first (exec: the
    process is the exporter itself, same PID)."""
    libs = unreachable_libraries(binary)
    if reachable_by_others(binary) and not libs:
        return binary
    os.makedirs(directory, exist_ok=True)
    os.chmod(directory, 0o755)
    exe = os.path.join(directory, os.path.basename(binary))
    shutil.copy2(binary, exe)
    os.chmod(exe, 0o755)
    if not libs:
        return exe
    libdir = os.path.join(directory, "lib")
    os.makedirs(libdir, exist_ok=True)
    os.chmod(libdir, 0o755)
    for lib in libs:
        dst = os.path.join(libdir, os.path.basename(lib))
        shutil.copy2(lib, dst)
        os.chmod(dst, 0o755)
    wrapper = exe + ".run"
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n'
                % (libdir, exe))
    os.chmod(wrapper, 0o755)
    return wrapper


class StagedBinary:
    """A staged copy of `binary` in a private temporary directory; remove() deletes it."""

    def __init__(self, binary):
        self.dir = private_dir("rdma-unprivileged-")
        try:
            self.path = stage(binary, self.dir)
        except BaseException:
            self.remove()
            raise

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def main(argv):
    if len(argv) != 4 or argv[1] != "stage":
        print("usage: unprivileged.py stage BINARY DIR", file=sys.stderr)
        return 2
    print(stage(argv[2], argv[3]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
