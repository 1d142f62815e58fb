"""The "conditions:" line of the benchmark scripts (bench_calls.py, bench_tvm_kernel.py,
../jax/bench_ffi.py and ../bench_cli.sh), worded as bench/timing.c's pf_bench_conditions_print
writes it for the C programs, so that every report records its run alike:

    conditions: <packfn build>, git <commit>; CPU <model>, <n> logical CPUs; <UTC date>;
    load average <1 5 15 min> at start; Python <version>, <package> <version>, ...

(one line). The packfn build is what the script can know: for the Python package its version and
ABI (the package does not expose its build type or C flags: the line says so); for the packfn
executable (bench_cli.sh) its --version and the build type and C flags of the CMakeCache.txt of
the build tree it sits in. The commit is `git rev-parse --short HEAD` of the checkout this file is
in, "-dirty" when a tracked file differs from HEAD, "unknown" outside a checkout. The date and the
load average are taken by take() (call it when the run starts); the package versions when the
line is made, of the packages imported by then ("(not installed)" or "(installed, not
imported)" otherwise).

    import bench_conditions
    cond = bench_conditions.take(bench_conditions.packfn_package(), ("numpy", "tvm_ffi"))
    ...
    print(cond.line())          # or cond.line("# ")
"""
import datetime
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _run(argv):
    """stdout of argv, stripped, or None when it cannot run or fails."""
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def git_commit(path=HERE):
    """`git rev-parse --short HEAD` of the checkout holding path, "-dirty" appended when a tracked
    file differs from HEAD; "unknown" outside a checkout or without git."""
    head = _run(["git", "-C", path, "rev-parse", "--short", "HEAD"])
    if not head:
        return "unknown"
    try:
        dirty = subprocess.run(["git", "-C", path, "diff", "--quiet", "HEAD", "--"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=30).returncode == 1
    except (OSError, subprocess.SubprocessError):
        dirty = False
    return head + ("-dirty" if dirty else "")


def cpu_model():
    """The first "model name" of /proc/cpuinfo, else "unknown"."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and ":" in line:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def loadavg():
    """The 1, 5 and 15-minute load averages of /proc/loadavg, else "unknown"."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f"{float(v):.2f}" for v in f.read().split()[:3])
    except (OSError, ValueError):
        return "unknown"


def packfn_package():
    """The packfn Python package as far as it tells: version and ABI (import it first)."""
    pf = sys.modules.get("packfn")
    if pf is None:
        return "packfn package not imported, build unknown"
    cuda = ", with CUDA kernels" if getattr(pf, "kernels_have_cuda", 0) else ""
    return (f"packfn {getattr(pf, '__version__', '?')} (Python package, ABI "
            f"{getattr(pf, 'abi_version', '?')}{cuda}; build type and C flags unknown: the "
            "package does not expose them)")


def _cmake_cache(start):
    """The entries of the first CMakeCache.txt in start or a folder above it: {name: value}."""
    d = os.path.abspath(start)
    while True:
        path = os.path.join(d, "CMakeCache.txt")
        if os.path.isfile(path):
            entries = {"": path}
            with open(path, errors="replace") as f:
                for line in f:
                    name, sep, value = line.rstrip("\n").partition("=")
                    if sep and not line.startswith(("#", "//")):
                        entries[name.split(":", 1)[0]] = value
            return entries
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def packfn_cli(exe):
    """The packfn executable: its --version and the build type and C flags (CMAKE_C_FLAGS and
    those of the build type, the warning options left out, as timing.c reports them) of the
    CMake build tree it is in."""
    version = (_run([exe, "--version"]) or "packfn (--version failed)").splitlines()[0]
    cache = _cmake_cache(os.path.dirname(os.path.abspath(exe)))
    if cache is None:
        return f"{version}, build type and C flags unknown (no CMakeCache.txt above {exe})"
    build = cache.get("CMAKE_BUILD_TYPE", "")
    flags = [cache.get("CMAKE_C_FLAGS", ""), cache.get("CMAKE_C_FLAGS_" + build.upper(), "")]
    if cache.get("PF_SANITIZE"):
        flags.append("-fsanitize=" + cache["PF_SANITIZE"])
    flags = " ".join(" ".join(flags).split())
    return f"{version}, {build or 'none'} build, C flags '{flags}' ({cache['']})"


def _version(name):
    """The version of module name as imported; else whether it is installed (without importing
    it: importing tvm_ffi, say, would join packfn to TVM-FFI)."""
    mod = sys.modules.get(name)
    if mod is not None:
        return str(getattr(mod, "__version__", "(no __version__)"))
    try:
        from importlib.metadata import packages_distributions  # Python 3.10+
    except ImportError:
        return "(not imported)"
    return "(installed, not imported)" if name in packages_distributions() else "(not installed)"


class Conditions:
    """What take() read at the start of a run; line() words it."""

    def __init__(self, build, packages):
        self.build = build
        self.packages = tuple(packages)
        self.git = git_commit()
        self.cpu = cpu_model()
        self.cpus = os.cpu_count() or "unknown"
        self.date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.loadavg = loadavg()

    def line(self, prefix=""):
        """One line, "conditions: ...", without a newline."""
        versions = "".join(f", {name} {_version(name)}" for name in self.packages)
        return (f"{prefix}conditions: {self.build}, git {self.git}; CPU {self.cpu}, {self.cpus} "
                f"logical CPUs; {self.date}; load average {self.loadavg} at start; Python "
                f"{platform.python_version()}{versions}")

    __str__ = line


def take(build, packages=()):
    """The conditions at the start of a run: build is packfn_package() or packfn_cli(exe);
    packages the names of the modules whose versions the line gives."""
    return Conditions(build, packages)
