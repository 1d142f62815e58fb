#!/usr/bin/env python3
"""Overhead of calling a small rms_norm (256 float32) from jitted JAX code: packfn's C adapter
(packfn.jax) vs a native C++ handler written with XLA's ffi.h vs jax-tvm-ffi vs pure jnp.

The three FFI columns run the same packfn kernel: packfn.jax and jax-tvm-ffi call the packed
function packfn.kernels.rms_norm (for jax-tvm-ffi, the same function object registered in
TVM-FFI's table: the ABI is shared), the native handler calls its direct C entry
pf_kernel_rms_norm (same checks, same loop). Two measures, minimum and median over
repetitions in which the columns take turns:

- "jit call": one jitted call of one rms_norm, blocked on, per call (JAX's dispatch included,
  the same for every column);
- "in loop": per rms_norm inside one jitted lax.fori_loop of N calls, which leaves out
  dispatch and shows what the handler adds to the kernel.

    python bench/jax/bench_ffi.py [--quick]

The native handler is compiled here with the system C++ compiler against jax's ffi.h; its
column (and jax-tvm-ffi's, when that package is not installed) is left out when it cannot be.
The report starts with the run's conditions (../python/bench_conditions.py).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

import packfn
import packfn.jax as pj

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import bench_conditions  # noqa: E402
from bench_calls import tvm_ffi_function  # noqa: E402

EPS = 1e-5
SHAPE = (256,)


def rms_norm_ref(x):
    return x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPS)


def build_native(tmp):
    """Compiles native_rms_norm.cc into a shared library; its path, or None with the reason
    printed."""
    pkg = os.path.dirname(os.path.abspath(packfn.__file__))
    out = os.path.join(tmp, "libnative_rms_norm.so")
    cmd = ["c++", "-O2", "-std=c++17", "-shared", "-fPIC", "-I", jax.ffi.include_dir(),
           "-I", os.path.join(pkg, "include"), os.path.join(HERE, "native_rms_norm.cc"),
           "-o", out, "-L", pkg, "-lpackfn_kernels", "-lpackfn", "-Wl,-rpath," + pkg]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("native handler not built:", r.stderr.strip().splitlines()[-1:], file=sys.stderr)
        return None
    return out


def columns(tmp):
    out_type = jax.ShapeDtypeStruct(SHAPE, jnp.float32)
    cols = {}
    packfn_call = pj.ffi_call("packfn.kernels.rms_norm", out_type)
    cols["packfn.jax"] = lambda x: packfn_call(x, eps=EPS)

    native = build_native(tmp)
    if native is not None:
        import ctypes

        lib = ctypes.CDLL(native)
        jax.ffi.register_ffi_target("bench.native_rms_norm", jax.ffi.pycapsule(lib.NativeRmsNorm),
                                    platform="cpu")
        native_call = jax.ffi.ffi_call("bench.native_rms_norm", out_type)
        cols["native C++"] = lambda x: native_call(x, eps=np.float32(EPS))

    try:
        import jax_tvm_ffi
    except ImportError:
        print("jax-tvm-ffi not installed: column left out", file=sys.stderr)
    else:
        fn = tvm_ffi_function(packfn.get_global("packfn.kernels.rms_norm"), "bench.rms_norm")
        jax_tvm_ffi.register_ffi_target("bench.tvm_rms_norm", fn, ["args", "rets", "attrs.eps"],
                                        platform="cpu")
        tvm_call = jax.ffi.ffi_call("bench.tvm_rms_norm", out_type)
        cols["jax-tvm-ffi"] = lambda x: tvm_call(x, eps=np.float64(EPS))

    cols["jnp"] = rms_norm_ref
    return cols


def time_ns(fn, number):
    t0 = time.perf_counter_ns()
    for _ in range(number):
        fn()
    return (time.perf_counter_ns() - t0) / number


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    opts = ap.parse_args()
    conditions = bench_conditions.take(bench_conditions.packfn_package(),
                                       ("numpy", "jax", "jaxlib", "tvm_ffi", "jax_tvm_ffi"))
    number, repeat, loop_n = (500, 5, 2000) if opts.quick else (5000, 11, 20000)

    x = jnp.asarray(np.random.default_rng(0).normal(size=SHAPE).astype(np.float32))
    ref = rms_norm_ref(x)
    with tempfile.TemporaryDirectory() as tmp:
        cols = columns(tmp)
        runs = {}
        for name, f in cols.items():
            single = jax.jit(f)
            np.testing.assert_allclose(single(x), ref, rtol=1e-5, atol=1e-6)
            # each step normalises the previous output: the calls cannot be folded away
            looped = jax.jit(lambda x, f=f: jax.lax.fori_loop(0, loop_n, lambda i, v: f(v), x))
            looped(x).block_until_ready()
            runs[name] = (lambda s=single: s(x).block_until_ready(),
                          lambda lp=looped: lp(x).block_until_ready())
        # the columns take turns in every repetition, so a busy spell of the machine hits all
        calls = {n: [] for n in runs}
        loops = {n: [] for n in runs}
        for _ in range(repeat):
            for name, (single, looped) in runs.items():
                calls[name].append(time_ns(single, number))
                loops[name].append(time_ns(looped, 1) / loop_n)

    print(conditions.line())
    print(f"rms_norm of {SHAPE[0]} float32, jax {jax.__version__}, {os.cpu_count()} CPUs; ns per "
          f"call, minimum and median of {repeat} interleaved repetitions")
    print(f"{'column':<14}{'jit call min':>13}{'median':>8}{'in loop min':>13}{'median':>8}"
          f"{'loop min / native':>19}")
    native = min(loops["native C++"]) if "native C++" in loops else None
    for name in runs:
        c, lp = calls[name], loops[name]
        ratio = f"{min(lp) / native:>19.2f}" if native else ""
        print(f"{name:<14}{min(c):>13.0f}{statistics.median(c):>8.0f}{min(lp):>13.0f}"
              f"{statistics.median(lp):>8.0f}{ratio}")

if __name__ == "__main__":
    main()
