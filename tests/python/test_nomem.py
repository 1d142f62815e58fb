"""Allocation failures (CPython's _testcapi.set_nomemory) on the extension's paths: each raises
MemoryError, leaves nothing half made, and the next call works. Each case runs in a process of
its own: a failure may crash it, and what the first failure leaves behind (a cached class, a
half-initialised static) lasts for the process."""
import os
import subprocess
import sys

import pytest

import packfn

_testcapi = pytest.importorskip(
    "_testcapi", reason="CPython's _testcapi (set_nomemory) is not installed with this Python")
if not hasattr(_testcapi, "set_nomemory"):
    pytest.skip("this _testcapi has no set_nomemory", allow_module_level=True)


def _run(code, *args):
    """Runs `code` (with sys.argv[1:] = args) in a fresh interpreter importing this packfn;
    returns its stdout. A crash or a non-zero exit fails the test."""
    env = dict(os.environ)
    site = os.path.dirname(os.path.dirname(packfn.__file__))
    env["PYTHONPATH"] = site + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code, *map(str, args)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


# Fails allocation k while a DLPack producer is first imported (the statics tensor.c makes
# then), then imports it again with nothing failing.
_DLPACK_FIRST_IMPORT = """if True:
    import sys, _testcapi, numpy as np, packfn
    echo = packfn._packfn._echo()

    class Producer:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    d = Producer(np.ones(3))
    k = int(sys.argv[1])
    _testcapi.set_nomemory(k, k + 1)
    try:
        echo(d)
    except MemoryError:
        pass
    finally:
        _testcapi.remove_mem_hooks()
    t = echo(d)
    assert t.shape == (3,), t
    print("ok")
"""


def test_first_dlpack_import_under_allocation_failure_leaves_nothing_half_made():
    """The first DLPack import made the interned "__dlpack__" and the keyword tuples only while
    the first tuple was missing: one failed allocation left the name NULL for good, and the next
    import crashed calling a method named NULL (found by review)."""
    for k in range(10):
        assert _run(_DLPACK_FIRST_IMPORT, k).strip() == "ok", k


def test_failed_callback_creation_keeps_its_memory_error():
    """Making a callback (packfn.Function(callable), a callable argument) fails with a MemoryError
    pending; releasing the half-made function ran callback_delete, whose own failed allocation
    and PyErr_Clear wiped it: SystemError "returned NULL without setting an exception" (found
    by review). Two allocations fail at each step, the second inside the release."""
    code = """if True:
        import sys, _testcapi, packfn
        echo = packfn._packfn._echo()

        def attempt(fn, arg, start, stop):
            sys._getframe()
            _testcapi.set_nomemory(start, stop)
            try:
                fn(arg)
            except BaseException as e:
                _testcapi.remove_mem_hooks()
                return e
            _testcapi.remove_mem_hooks()
            return None

        packfn.Function(len)
        for k in range(14):
            for stop in (0, k + 2):
                for fn in (packfn.Function, echo):
                    e = attempt(fn, len, k, stop)
                    assert e is None or type(e) is MemoryError, (k, stop, fn, repr(e))
        print("ok")
    """
    assert _run(code).strip() == "ok"


def test_error_class_lookup_failure_raises_memory_error_and_caches_nothing():
    """Converting a packfn error under an allocation failure: the lookup of a built-in kind
    (ValueError) that failed looked like an absent name, and a class packfn.ValueError was made
    and kept for the process; a failure while the exception was made gave packfn.Error in place
    of the MemoryError (found by review). Now each is a MemoryError or the ValueError."""
    code = """if True:
        import sys, _testcapi, packfn
        P = packfn._packfn

        def attempt(k):
            sys._getframe()
            _testcapi.set_nomemory(k, k + 1)
            try:
                P._raise("ValueError", "msg")
            except BaseException as e:
                _testcapi.remove_mem_hooks()
                return e
            _testcapi.remove_mem_hooks()

        attempt(10**9)
        for k in range(8):
            e = attempt(k)
            assert type(e) in (ValueError, MemoryError), (k, type(e), e)
            assert type(e) is MemoryError or str(e) == "msg", (k, e)
        assert "ValueError" not in P._kind_classes, list(P._kind_classes)
        assert P._kind_class("ValueError") is ValueError
        print("ok")
    """
    assert _run(code).strip() == "ok"
