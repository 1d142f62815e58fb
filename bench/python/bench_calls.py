#!/usr/bin/env python3
"""Per-call overhead of calling a no-op C function from Python: packfn, TVM-FFI's Python
binding, ctypes and a plain Python function, in one process.

The packfn and TVM-FFI columns call the very same C function object (a packfn no-op,
packfn._packfn._noop(), registered in TVM-FFI's global table through TVMFFIFunctionSetGlobal:
the two runtimes share the ABI). The ctypes column calls that function's safe_call pointer with
arguments packed by hand into 16-byte Anys; the Python column calls `def noop(*args): pass`.
Each row is the median over repetitions of the mean time per call of a loop.

The error rows raise ValueError("bad value") from C through a packed call on each side and catch
it in Python: packfn's is a packfn Function made in C that raises (packfn._packfn._raiser()),
TVM-FFI's its testing.test_raise_error. TVM-FFI's raise always walks the stack and names the
frames (libbacktrace); packfn's records the raise site only unless PACKFN_BACKTRACE=1, which
packfn reads once per process: the script measures packfn's raise in this process and again in
a process of its own with the other setting, and pairs with TVM-FFI only the figure where both
walk the stack (both backtraces become text: the exception's). packfn's figure without a stack
walk has no TVM-FFI counterpart reachable from Python. The report starts with the run's
conditions (bench_conditions.py: packfn's version, commit, CPU, date, load, package versions).

    python bench/python/bench_calls.py [--quick]
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import timeit

import numpy as np

import packfn
from packfn import _packfn

import bench_conditions

try:
    import tvm_ffi
    import tvm_ffi.libinfo
except ImportError:  # the column is then left out
    tvm_ffi = None


class Any(ctypes.Structure):
    _fields_ = [("type_index", ctypes.c_int32), ("pad", ctypes.c_uint32), ("v", ctypes.c_int64)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("dtype", ctypes.c_uint32), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


SAFE_CALL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(Any), ctypes.c_int32,
                             ctypes.POINTER(Any))
TYPE_INT, TYPE_FLOAT, TYPE_DLTENSOR_PTR, TYPE_RAW_STR = 1, 3, 7, 8


def ctypes_caller(fn):
    """A hand-written ctypes bridge to a packfn function object: what a user without a binding
    writes. Ints, floats, str and NumPy arrays only."""
    address = fn._address
    cell = ctypes.cast(address + 24, ctypes.POINTER(ctypes.c_void_p))
    call = SAFE_CALL(cell[0])
    result = Any()
    as_double = ctypes.c_double

    def invoke(*args):
        n = len(args)
        packed = (Any * n)()
        keep = []
        for i, a in enumerate(args):
            slot = packed[i]
            if type(a) is int:
                slot.type_index, slot.v = TYPE_INT, a
            elif type(a) is float:
                slot.type_index = TYPE_FLOAT
                slot.v = ctypes.cast(ctypes.pointer(as_double(a)), ctypes.POINTER(ctypes.c_int64))[0]
            elif type(a) is str:
                b = ctypes.c_char_p(a.encode())
                keep.append(b)
                slot.type_index, slot.v = TYPE_RAW_STR, ctypes.cast(b, ctypes.c_void_p).value
            elif isinstance(a, np.ndarray):
                shape = (ctypes.c_int64 * a.ndim)(*a.shape)
                dl = DLTensor(a.ctypes.data, 1, 0, a.ndim, 2 | (a.itemsize * 8) << 8 | 1 << 16,
                              ctypes.addressof(shape), None, 0)
                keep.append((shape, dl))
                slot.type_index, slot.v = TYPE_DLTENSOR_PTR, ctypes.addressof(dl)
            else:
                raise TypeError(type(a))
        if call(address, packed, n, ctypes.byref(result)) != 0:
            raise RuntimeError("call failed")
        return None

    return invoke


def tvm_ffi_function(fn, name):
    """The packfn function object registered in TVM-FFI's global table, as a tvm_ffi.Function."""
    lib = ctypes.CDLL(tvm_ffi.libinfo.find_libtvm_ffi(), mode=ctypes.RTLD_GLOBAL)

    class ByteArray(ctypes.Structure):
        _fields_ = [("data", ctypes.c_char_p), ("size", ctypes.c_size_t)]

    set_global = lib.TVMFFIFunctionSetGlobal
    set_global.argtypes = [ctypes.POINTER(ByteArray), ctypes.c_void_p, ctypes.c_int]
    raw = name.encode()
    if set_global(ctypes.byref(ByteArray(raw, len(raw))), fn._address, 1) != 0:
        raise RuntimeError("TVMFFIFunctionSetGlobal failed")
    return tvm_ffi.get_global_func(name)


def measure(call, args, number, repeat):
    loop = timeit.Timer(lambda: call(*args))
    # calling through a lambda costs the same for every column: measured and taken off
    base = timeit.Timer(lambda: None)
    per = []
    for _ in range(repeat):
        t = loop.timeit(number) - base.timeit(number)
        per.append(t / number * 1e9)
    return statistics.median(per)


BACKTRACE_ENV = "PACKFN_BACKTRACE"


def packfn_backtrace_on():
    """packfn's backtrace mode in this process, read as packfn reads it."""
    v = os.environ.get(BACKTRACE_ENV, "")
    return v not in ("", "0")


def packfn_raise_call():
    """A packed call of a packfn Function (C) that raises ValueError, caught in Python."""
    raiser = _packfn._raiser()

    def call():
        try:
            raiser("ValueError", "bad value")
        except ValueError:
            pass

    return call


def packfn_raise_other_mode(quick):
    """ns per packfn raise with the other PACKFN_BACKTRACE setting: this script again, in a
    process of its own (packfn reads the variable once per process)."""
    env = dict(os.environ)
    env[BACKTRACE_ENV] = "0" if packfn_backtrace_on() else "1"
    argv = [sys.executable, os.path.abspath(__file__), "--error-only"]
    if quick:
        argv.append("--quick")
    out = subprocess.run(argv, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
    return float(out.split()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--error-only", action="store_true",
                    help="(internal) print ns per packfn raise in this process's mode and exit")
    opts = ap.parse_args()
    number, repeat = (20_000, 5) if opts.quick else (200_000, 11)
    if opts.error_only:
        print(f"{measure(packfn_raise_call(), (), number // 4, repeat):.3f}")
        return
    conditions = bench_conditions.take(bench_conditions.packfn_package(), ("numpy", "tvm_ffi"))

    noop = _packfn._noop()
    arr = np.zeros(16, dtype=np.float32)
    cases = [
        ("0 args", ()),
        ("1 int", (1,)),
        ("3 args (int, float, str)", (1, 2.5, "hello")),
        ("6 args", (1, 2.5, "hello", 4, 5.5, "world")),
        ("1 NumPy array", (arr,)),
    ]

    def plain(*args):
        pass

    columns = [("packfn", noop), ("ctypes", ctypes_caller(noop)), ("python", plain)]
    if tvm_ffi is not None:
        columns.insert(1, ("tvm_ffi", tvm_ffi_function(noop, "bench.packfn_noop")))

    rows = []
    for label, args in cases:
        rows.append((label, [measure(fn, args, number, repeat) for _, fn in columns]))

    # a Python callback called through each runtime, and an error raised back to Python
    cb = lambda x: x  # noqa: E731
    extra = [("callback round trip (1 int)", packfn.Function(cb),
              tvm_ffi.convert(cb) if tvm_ffi else None)]
    tvm_raise = None
    if tvm_ffi is not None:
        tvm_test_raise = tvm_ffi.get_global_func("testing.test_raise_error")

        def tvm_raise():
            try:
                tvm_test_raise("ValueError", "bad value")
            except ValueError:
                pass

    # the error rows: packfn in this process's backtrace mode and, in a process of its own, in
    # the other; TVM-FFI always walks the stack
    here = measure(packfn_raise_call(), (), number // 4, repeat)
    other = packfn_raise_other_mode(opts.quick)
    pf_bt, pf_site = (here, other) if packfn_backtrace_on() else (other, here)
    tvm_bt = measure(tvm_raise, (), number // 4, repeat) if tvm_raise is not None else None
    err_bt = "error raised to Python, both walk the stack [1]"
    err_site = "error raised to Python, packfn raise site only [2]"

    names = [c[0] for c in columns]
    width = max(len(r[0]) for r in rows + [(e[0],) for e in extra] + [(err_bt,), (err_site,)]) + 2
    head = "".join(f"{n:>11}" for n in names)
    ratio = "  packfn/tvm_ffi" if tvm_ffi is not None else ""
    print(conditions.line())
    print(f"per-call time in ns (median of {repeat} x {number} calls), Python {sys.version.split()[0]}")
    print(f"{'call':<{width}}{head}{ratio}")
    for label, ts in rows:
        r = f"{ts[0] / ts[1]:>16.2f}" if tvm_ffi is not None else ""
        print(f"{label:<{width}}" + "".join(f"{t:>11.0f}" for t in ts) + r)
    for label, pf, tv in extra:
        a = measure(pf, (1,), number, repeat)
        if tv is not None:
            b = measure(tv, (1,), number, repeat)
            print(f"{label:<{width}}{a:>11.0f}{b:>11.0f}{'':>22}{a / b:>16.2f}")
        else:
            print(f"{label:<{width}}{a:>11.0f}")
    if tvm_bt is not None:
        print(f"{err_bt:<{width}}{pf_bt:>11.0f}{tvm_bt:>11.0f}{'':>22}{pf_bt / tvm_bt:>16.2f}")
        print(f"{err_site:<{width}}{pf_site:>11.0f}{'-':>11}")
    else:
        print(f"{err_bt:<{width}}{pf_bt:>11.0f}")
        print(f"{err_site:<{width}}{pf_site:>11.0f}")
    where = "this process" if packfn_backtrace_on() else "a process of its own"
    print(f"[1] packfn: a packed call of packfn._packfn._raiser() with {BACKTRACE_ENV}=1 ({where}):"
          " raise site + native stack (backtrace(3)), frames named when the exception is made;"
          " TVM-FFI: testing.test_raise_error, stack walked and named at raise (libbacktrace),"
          " always")
    where = "a process of its own" if packfn_backtrace_on() else "this process"
    print(f"[2] packfn: the same call with {BACKTRACE_ENV} off ({where}): the raise site's line"
          " only, no stack walk; TVM-FFI has no raise without a stack walk reachable from Python:"
          " no figure, no ratio")

if __name__ == "__main__":
    main()
