#!/bin/sh
# bench_cli.sh: wall time and peak memory of `packfn call` on a .npy file against `cp` of the
# same file (docs/performance.md, "The command line").
#
# usage: bench/bench_cli.sh PACKFN PYTHON [DIR] [MIB]
#   PACKFN  the packfn executable (BUILD/cli/packfn)
#   PYTHON  a Python with NumPy (writes the input file)
#   DIR     where the files go (default: a new folder under /tmp); its file system matters:
#           packfn fsyncs what it writes, cp does not
#   MIB     size of the float32 input in MiB (default 64)
# With PACKFN_OTHER set to another packfn executable (an older build), its two rows are measured
# too, in the same run, for a side-by-side comparison.
# The rows: cp to a new file, cp followed by sync, cp onto an existing file, packfn call with its
# output missing and existing.
# Prints the median wall and CPU time of 7 runs of each command (after one run not counted, with the
# input in the page cache; /usr/bin/time's own start included for every command alike) and the
# largest peak RSS (/usr/bin/time %M), in a markdown table.
set -eu
packfn=$1
python=$2
dir=${3:-$(mktemp -d /tmp/bench_cli.XXXXXX)}
mib=${4:-64}
mkdir -p "$dir"
"$python" - "$packfn" "$dir" "$mib" <<'PY'
import os, statistics, subprocess, sys, time
import numpy as np

packfn, d, mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
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


def measure(name, argv, before=None, reps=7):
    run(argv, before)  # not counted: warms the page cache and the binary
    runs = [run(argv, before) for _ in range(reps)]
    wall = statistics.median(r[0] for r in runs)
    rss = max(r[1] for r in runs)
    cpu = statistics.median(r[2] for r in runs)
    return name, wall, rss, cpu


cp = "/bin/cp"
sync = "/bin/sync"
rows = [
    measure("cp x.npy c.npy", [cp, x, c], remove(c)),
    measure("cp x.npy c.npy && sync c.npy", ["/bin/sh", "-c", f'{cp} "$0" "$1" && {sync} "$1"',
                                             x, c], remove(c)),
    # cp onto an existing file: it truncates and rewrites that file, and ext4 then writes the
    # data back at close (its replace-by-truncate heuristic): the comparison for "y.npy exists"
    measure("cp x.npy c.npy (c.npy exists)", [cp, x, c]),
    measure("packfn call rms_norm x.npy y.npy 1e-5 --out y.npy (y.npy missing)",
            [packfn, "call", "packfn.kernels.rms_norm", x, y, "1e-5", "--out", y], remove(y)),
    measure("packfn call rms_norm x.npy y.npy 1e-5 --out y.npy (y.npy exists)",
            [packfn, "call", "packfn.kernels.rms_norm", x, y, "1e-5", "--out", y]),
]
other = os.environ.get("PACKFN_OTHER")
if other:
    rows += [
        measure("PACKFN_OTHER: (y.npy missing)",
                [other, "call", "packfn.kernels.rms_norm", x, y, "1e-5", "--out", y], remove(y)),
        measure("PACKFN_OTHER: (y.npy exists)",
                [other, "call", "packfn.kernels.rms_norm", x, y, "1e-5", "--out", y]),
    ]
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
