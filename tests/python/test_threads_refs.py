"""GIL release, callbacks from other threads, reference counts and leaks."""
import gc
import os
import sys
import sysconfig
import threading
import time
import tracemalloc

import numpy as np
import pytest

import packfn


def _kepler_inputs(n):
    rng = np.random.default_rng(0)
    m = rng.uniform(-10, 10, n)
    e = rng.uniform(0, 0.99, n)
    return m, e, np.empty(n), np.empty(n)


def test_long_kernel_releases_the_gil():
    kepler = packfn.get_global("packfn.kernels.kepler")
    n = 1 << 18
    while True:  # size the call to take at least 0.2 s
        args = _kepler_inputs(n)
        t = time.perf_counter()
        kepler(*args)
        if time.perf_counter() - t > 0.2 or n >= 1 << 25:
            break
        n *= 4
    span = {}

    def worker():
        span["t0"] = time.perf_counter()
        kepler(*args)
        span["t1"] = time.perf_counter()

    stamps = []
    th = threading.Thread(target=worker)
    th.start()
    while th.is_alive():
        stamps.append(time.perf_counter())
    th.join()
    t0, t1 = span["t0"], span["t1"]
    quarter = (t1 - t0) / 4
    during = [s for s in stamps if t0 + quarter < s < t1 - quarter]
    # with the GIL held for the whole call, this thread could not run in its middle half
    assert len(during) > 100


def test_callbacks_from_many_threads():
    seen = []
    lock = threading.Lock()

    def cb(t, i):
        with lock:
            seen.append(i)
        return i * 2

    f = packfn.Function(cb)
    x = np.zeros(4)
    results = [None] * 8

    def run(i):
        for _ in range(200):
            results[i] = f(x, i)  # a tensor argument: called without the GIL, cb takes it

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == [i * 2 for i in range(8)] and len(seen) == 1600


def test_free_threaded_build_is_reported():
    # the extension does not declare free-threading support: on a free-threaded Python the
    # interpreter re-enables the GIL when it imports packfn
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        assert sys._is_gil_enabled()
    else:
        pytest.skip("this Python is not a free-threaded build")


def test_argument_refcounts_unchanged(identity):
    s = "a long string argument " * 4
    lst = [1, 2, 3]
    arr = np.zeros(8)
    b = b"bytes that are long enough"
    objs = [s, lst, arr, b]
    before = [sys.getrefcount(o) for o in objs]
    for _ in range(10_000):
        for o in objs:
            identity(o)
        packfn.get_global("packfn.kernels.rms_norm")(arr, arr, 1e-5)
    del o
    gc.collect()
    assert [sys.getrefcount(o) for o in objs] == before


def test_result_tensor_releases_buffer():
    arr = np.zeros(8)
    base = sys.getrefcount(arr)
    t = packfn.Function(lambda x: x)(arr)  # the result tensor keeps arr's buffer
    assert sys.getrefcount(arr) > base
    del t
    gc.collect()
    assert sys.getrefcount(arr) == base


def test_c_refcounts_stable(rms_norm):
    before = rms_norm._pf_refcount
    for _ in range(1000):
        packfn.get_global("packfn.kernels.rms_norm")
    assert rms_norm._pf_refcount == before


def test_no_leak_over_many_calls():
    noop = packfn.register_global("test.noop", lambda *a: None, override=True)
    try:
        rms = packfn.get_global("packfn.kernels.rms_norm")
        x = np.ones((2, 4), np.float32)
        ro = x.copy()
        ro.setflags(write=False)
        out = np.empty_like(x)

        def calls(n):
            for i in range(n):
                noop()
                noop(i, 1.5, "a str longer than seven", b"bytes", None, True)
                noop([1, "x"], {"k": i})
                rms(x, out, 1e-5)
                rms(ro, out, 1e-5)
                try:
                    rms(x)
                except TypeError:
                    pass

        calls(2_000)  # warm caches
        gc.collect()
        tracemalloc.start()
        snap0 = tracemalloc.take_snapshot()
        calls(100_000 // 6)
        gc.collect()
        snap1 = tracemalloc.take_snapshot()
        tracemalloc.stop()
        growth = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
        assert growth < 64 * 1024, growth
    finally:
        packfn.remove_global("test.noop")


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_no_leak_over_a_million_calls():
    # one million calls of each shape: resident memory, the functions' C reference counts and
    # the arguments' Python reference counts end where they started (a leak of even 16 bytes a
    # call would show as 16 MB)
    noop = packfn.register_global("test.noop_million", lambda *a: None, override=True)
    try:
        rms = packfn.get_global("packfn.kernels.rms_norm")
        x = np.ones((2, 4), np.float32)
        out = np.empty_like(x)
        s = "a str longer than seven"

        def calls(n):
            for i in range(n):
                noop(i, 1.5, s)
                rms(x, out, 1e-5)

        calls(20_000)  # warm caches
        gc.collect()
        refs = (sys.getrefcount(x), sys.getrefcount(out), sys.getrefcount(s))
        c_refs = (noop._pf_refcount, rms._pf_refcount)
        rss0 = _rss_bytes()
        calls(1_000_000)
        gc.collect()
        grown = _rss_bytes() - rss0
        assert (sys.getrefcount(x), sys.getrefcount(out), sys.getrefcount(s)) == refs
        assert (noop._pf_refcount, rms._pf_refcount) == c_refs
        assert grown < 4 * 1024 * 1024, grown
    finally:
        packfn.remove_global("test.noop_million")


def test_callback_from_another_thread_during_a_scalar_call(thread_testmod):
    """A C function that calls its callback on a thread it joins: the call must run without the
    GIL even with no tensor argument, or the thread waits for the GIL the caller holds and both
    hang (found by review). A watchdog turns a hang into a failure."""
    import faulthandler

    faulthandler.dump_traceback_later(60, exit=True)
    try:
        assert thread_testmod.call_in_thread(lambda v: v * 2, 21) == 42
        assert thread_testmod.call_in_thread(packfn.Function(lambda v: v + 1), 1) == 2
        with pytest.raises(KeyError, match="from the thread"):
            thread_testmod.call_in_thread(lambda v: {}["from the thread"], 0)
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.mark.parametrize(
    "arg",
    [
        "[lambda v: v * 2]",
        "[1, ('x', lambda v: v * 2)]",
        "{'hook': lambda v: v * 2}",
        "{'hooks': [packfn.Function(lambda v: v * 2)]}",
        "echo([packfn.Function(lambda v: v * 2)])",  # a packfn.Array
        "echo({'hook': lambda v: v * 2})",  # a packfn.Map
        "tvm_ffi.convert(lambda v: v * 2)",  # the same C object (tvm_ffi.Function)
        "tvm_ffi.convert([tvm_ffi.convert(lambda v: v * 2)])",  # a tvm_ffi.Array holding it
    ],
)
def test_callback_inside_a_container_called_from_another_thread(thread_testmod, arg):
    """A callback inside a list, tuple or dict, a packfn.Array or Map, or TVM-FFI's function or
    array, called on a thread the C function joins: the call must run without the GIL, or the
    thread waits for the GIL the caller holds and both hang (found by review: the flag of the
    nested conversions was dropped, and an Array, a Map or a TVM-FFI function kept the GIL). In
    a process of its own, which a hang leaves to the timeout."""
    import subprocess

    code = (
        "import packfn, tvm_ffi\n"
        f"mod = packfn.load_module({thread_testmod.path!r})\n"
        "echo = packfn._packfn._echo()\n"
        f"print(mod.call_in_thread({arg}, 21))\n"
    )
    env = dict(os.environ)
    env.pop("PACKFN_NO_TVM_FFI", None)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(packfn.__file__)) + os.pathsep + \
        env.get("PYTHONPATH", "")
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=30, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"call_in_thread({arg}, 21) hung: the call kept the GIL")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "42"
