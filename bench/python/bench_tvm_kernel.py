#!/usr/bin/env python3
"""Calling a packfn kernel through TVM-FFI's Python against calling the same kernel built with
TVM-FFI's own C++ export macro (issue 11, deliverable 8), in one process.

Rows, each calling rms_norm(x, out, eps) from tvm_ffi on NumPy float32 arrays:
  tvm_macro   libpf_bench_tvm_rms_norm.so, loaded with tvm_ffi.load_module: a
              TVM_FFI_DLL_EXPORT_TYPED_FUNC wrapper whose body is pf_kernel_rms_norm (reference)
  packfn_lib  libpackfn_kernels.so, loaded with tvm_ffi.load_module (packfn's export macros)
  packfn_glob tvm_ffi.get_global_func("packfn.kernels.rms_norm") (packfn's global table, seen
              from TVM-FFI's)
The loop body is the same C function in every row, so the ratio is the cost of the call path
(argument conversion by tvm_ffi, the safe call, packfn's or TVM-FFI's argument checks). Each
row is the median over repetitions (rows interleaved) of the mean time per call of a loop. The
report starts with the run's conditions (bench_conditions.py).

    python bench/python/bench_tvm_kernel.py --tvm-lib BUILD/bench/libpf_bench_tvm_rms_norm.so [--quick]
"""
import argparse
import os
import statistics
import sys
import timeit

import numpy as np

import packfn  # noqa: F401  (loads libpackfn and libpackfn_kernels; joins TVM-FFI once imported)
import tvm_ffi

import bench_conditions


def kernels_path():
    """The libpackfn_kernels the packfn package loaded (every row runs that one copy)."""
    path = os.path.join(os.path.dirname(packfn.__file__), "libpackfn_kernels.so")
    if not os.path.exists(path):
        raise SystemExit(f"bench_tvm_kernel: {path} not found (pip install . first)")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tvm-lib", required=True, help="path of libpf_bench_tvm_rms_norm.so")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (smoke run)")
    args = ap.parse_args()
    conditions = bench_conditions.take(bench_conditions.packfn_package(), ("numpy", "tvm_ffi"))
    reps = 5 if args.quick else 21
    ref = tvm_ffi.load_module(args.tvm_lib)
    ref.bind(kernels_path())
    rows = {
        "tvm_macro": ref.rms_norm,
        "packfn_lib": tvm_ffi.load_module(kernels_path()).rms_norm,
        "packfn_glob": tvm_ffi.get_global_func("packfn.kernels.rms_norm"),
    }
    print(conditions.line("# "))
    print(f"# rms_norm called from tvm_ffi {tvm_ffi.__version__} (Python {sys.version.split()[0]})")
    print("# median over %d repetitions of the mean time per call; ratio = row / tvm_macro" % reps)
    print(f"{'shape':>12} {'row':>12} {'ns/call':>10} {'ratio':>7}")
    rng = np.random.default_rng(0)
    for shape, number in (((1, 8), 20000), ((4, 256), 20000), ((64, 4096), 200)):
        if args.quick:
            number = max(number // 10, 10)
        x = rng.standard_normal(shape).astype(np.float32)
        outs = {name: np.empty_like(x) for name in rows}
        for name, fn in rows.items():
            fn(x, outs[name], 1e-5)
        ref = outs["tvm_macro"]
        for name in rows:  # the same loop: the same bytes
            if not np.array_equal(outs[name], ref):
                raise SystemExit(f"bench_tvm_kernel: {name} disagrees with tvm_macro")
        samples = {name: [] for name in rows}
        for _ in range(reps):
            for name, fn in rows.items():
                out = outs[name]
                t = timeit.timeit(lambda: fn(x, out, 1e-5), number=number)
                samples[name].append(t / number * 1e9)
        base = statistics.median(samples["tvm_macro"])
        for name in rows:
            med = statistics.median(samples[name])
            print(f"{'x'.join(map(str, shape)):>12} {name:>12} {med:10.0f} {med / base:7.3f}")


if __name__ == "__main__":
    main()
