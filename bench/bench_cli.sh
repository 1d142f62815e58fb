#!/bin/sh
# bench_cli.sh: wall time and peak memory of `packfn call` on a .npy file against `cp` of the
# same file (docs/performance.md, "The command line").
#
# usage: bench/bench_cli.sh PACKFN PYTHON [DIR] [MIB]
#   PACKFN  the packfn executable (BUILD/cli/packfn)
#   PYTHON  a Python with NumPy (writes the input file)
#   DIR     where the files go (default: a new folder under /tmp); its file system matters:
#           packfn writes a temporary file and renames it over the output, and fsyncs it first
#           only when it replaces an existing file (the "y.npy exists" row; src/npy/npy_write.c);
#           a new output is not flushed, as cp does not flush its copy
#   MIB     size of the float32 input in MiB (default 64)
# With PACKFN_OTHER set to another packfn executable (an older build), its two rows are measured
# too, in the same run, for a side-by-side comparison.
# The rows: cp to a new file, cp followed by sync, cp onto an existing file, packfn call with its
# output missing and existing.
# Prints the median wall and CPU time of 7 runs of each command and the largest peak RSS
# (/usr/bin/time %M), in a markdown table. The commands alternate: one run of each in turn, not
# counted (it puts the input in the page cache), then 7 rounds of one run of each in turn, so
# that drift over the run hits every command alike; /usr/bin/time's own start is included for
# every command alike. The report starts with the run's conditions (bench/python/
# bench_conditions.py, the line the C benchmarks print): packfn's --version, the build type and C
# flags of the CMakeCache.txt above PACKFN, the commit, CPU, date and load at start.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
packfn=$1
python=$2
dir=${3:-$(mktemp -d /tmp/bench_cli.XXXXXX)}
mib=${4:-64}
mkdir -p "$dir"
PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}" "$python" - "$packfn" "$dir" "$mib" <<'PY'
import os, statistics, subprocess, sys, time
import numpy as np

import bench_conditions

packfn, d, mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
conditions = bench_conditions.take(bench_conditions.packfn_cli(packfn), ("numpy",))
x = os.path.join(d, "x.npy")
y = os.path.join(d, "y.npy")
c = os.path.join(d, "c.npy")
cols = 4096
np.save(x, np.random.default_rng(1).standard_normal((mib * 256 * 1024 // cols, cols),
                                                    dtype=np.float32))
tensor = os.path.getsize(x) - 128


def run(argv, before=None):
    """(wall seconds, peak RSS bytes, CPU seconds user+system) of one run of argv, under
    /usr/bin/time for the RSS (the rusage of a child spawned from Python would count Python's
    own pages)."""
    if before:
        before()
    rss_file = os.path.join(d, "rss.txt")
    with open(os.path.join(d, "stdout.txt"), "w") as out:
        t0 = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", "-o", rss_file] + argv, stdout=out)
        dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"bench_cli: {' '.join(argv)} failed")
    with open(rss_file) as f:
        rss, user, system = f.read().split()[-3:]
    return dt, int(rss) * 1024, float(user) + float(system)


def remove(path):
    return lambda: os.path.exists(path) and os.remove(path)


def measure(commands, reps=7):
    """(name, median wall, largest RSS, median CPU) of each (name, argv, before) command, the
    commands run in turn: one round not counted, then reps rounds."""
    for _, argv, before in commands:
        run(argv, before)  # not counted: warms the page cache and the binary
    runs = [[] for _ in commands]
    for _ in range(reps):
        for i, (_, argv, before) in enumerate(commands):
            runs[i].append(run(argv, before))
    return [(name, statistics.median(r[0] for r in rs), max(r[1] for r in rs),
             statistics.median(r[2] for r in rs))
            for (name, _, _), rs in zip(commands, runs)]


cp = "/bin/cp"
sync = "/bin/sync"
commands = [
    ("cp x.npy c.npy", [cp, x, c], remove(c)),
    ("cp x.npy c.npy && sync c.npy", ["/bin/sh", "-c", f'{cp} "$0" "$1" && {sync} "$1"', x, c],
     remove(c)),
    # cp onto an existing file: it truncates and rewrites that file, and ext4 then writes the
    # data back at close (its replace-by-truncate heuristic): the comparison for "y.npy exists"
    ("cp x.npy c.npy (c.npy exists)", [cp, x, c], None),
    ("packfn call rms_norm x.npy y.npy 1e-5 --out y.npy (y.npy missing)",
     [packfn, "call", "packfn.kernels.rms_norm", x, y, "1e-5", "--out", y], remove(y)),
    ("packfn call rms_norm x.npy y.npy 1e-5 --out y.npy (y.npy exists)",
     [packfn, "call", "packfn.kernels.rms_norm", x, y, "1e-5", "--out", y], None),
]
other = os.environ.get("PACKFN_OTHER")
if other:
    commands += [
        ("PACKFN_OTHER: (y.npy missing)",
         [other, "call", "packfn.kernels.rms_norm", x, y, "1e-5", "--out", y], remove(y)),
        ("PACKFN_OTHER: (y.npy exists)",
         [other, "call", "packfn.kernels.rms_norm", x, y, "1e-5", "--out", y], None),
    ]
rows = measure(commands)
print(conditions.line())
print(f"input: float32 ({tensor // 4 // cols}, {cols}), {tensor / 2**20:.0f} MiB of data, in {d}")
print("| command | median wall [ms] | / cp | / cp+sync | median CPU user+sys [ms] | / cp | "
      "peak RSS [MiB] | / tensor |")
print("|---|---|---|---|---|---|---|---|")
for name, wall, rss, cpu in rows:
    print(f"| `{name}` | {wall * 1e3:.1f} | {wall / rows[0][1]:.2f} | {wall / rows[1][1]:.2f} | "
          f"{cpu * 1e3:.0f} | {cpu / max(rows[0][3], 1e-3):.2f} | {rss / 2**20:.1f} | "
          f"{rss / tensor:.2f} |")
for f in (x, y, c, os.path.join(d, "rss.txt"), os.path.join(d, "stdout.txt")):
    if os.path.exists(f):
        os.remove(f)
PY
