"""packfn errors as Python exceptions, Python exceptions through packfn, bad input."""
import ctypes
import os
import re
import sys

import numpy as np
import pytest
from _cabi import Any, libpackfn

import packfn
from packfn import _packfn


@pytest.mark.parametrize(
    "kind,cls",
    [("TypeError", TypeError), ("ValueError", ValueError), ("KeyError", KeyError),
     ("IndexError", IndexError), ("AttributeError", AttributeError),
     ("MemoryError", MemoryError), ("NotImplementedError", NotImplementedError),
     ("RuntimeError", RuntimeError), ("OSError", OSError)],
)
def test_kinds_map_to_builtins(kind, cls):
    with pytest.raises(cls) as e:
        _packfn._raise(kind, "the message")
    assert type(e.value) is cls
    assert e.value.args[0] == "the message"
    assert e.value.kind == kind


def test_other_kinds_are_packfn_error_subclasses():
    with pytest.raises(packfn.Error) as e:
        _packfn._raise("CudaError", "device lost")
    assert type(e.value).__name__ == "CudaError"
    assert type(e.value).__module__ == "packfn"
    assert str(e.value) == "device lost" and e.value.kind == "CudaError"
    with pytest.raises(type(e.value)):  # one class per kind
        _packfn._raise("CudaError", "again")
    with pytest.raises(packfn.Error):
        _packfn._raise("not an identifier!", "x")


def test_cause_chain_and_backtrace():
    with pytest.raises(RuntimeError) as e:
        _packfn._raise("RuntimeError", "outer", "ValueError", "inner")
    assert isinstance(e.value.__cause__, ValueError)
    assert str(e.value.__cause__) == "inner"
    notes = getattr(e.value, "__notes__", [])
    assert any("packfn backtrace" in n for n in notes)


def test_backtrace_note_names_its_order():
    """The note holds packfn's backtrace as C wrote it, most recent call first (docs/error.md);
    its header said "newest last" (found by review). With PACKFN_BACKTRACE=1 the raise site comes
    first and the interpreter's frames after it. In a process of its own: the variable is read
    once per process."""
    import subprocess

    code = """if True:
        from packfn import _packfn
        try:
            _packfn._raise("ValueError", "with its stack")
        except ValueError as e:
            print(e.__notes__[-1])
    """
    env = dict(os.environ, PACKFN_BACKTRACE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "packfn backtrace (most recent call first):", lines[0]
    assert "in m_raise" in lines[1], lines[:3]  # the raise site, innermost
    # the interpreter, which called it, further down
    outer = [i for i, ln in enumerate(lines) if "python" in ln.lower() and "_packfn" not in ln]
    assert outer and min(outer) > 1, lines


def test_failing_kernel_raises(rms_norm):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError, match="rms_norm: expected 3 arguments, got 1"):
        rms_norm(x)
    with pytest.raises(TypeError, match="argument 1 \\(out\\)"):
        rms_norm(x, 5, 1e-5)
    with pytest.raises(ValueError, match="shape"):
        rms_norm(x, np.ones((3, 2), np.float32), 1e-5)
    with pytest.raises(TypeError, match="float32 or float64"):
        rms_norm(np.ones(3, np.int64), np.ones(3, np.int64), 1e-5)


def test_non_contiguous_refused_with_clear_error(rms_norm):
    x = np.ones((4, 8), np.float32)[:, ::2]
    with pytest.raises(ValueError, match="expected a contiguous tensor, got strides"):
        rms_norm(x, np.empty((4, 4), np.float32), 1e-5)


def test_read_only_input_accepted(rms_norm):
    x = np.ones((2, 4), np.float32)
    x.setflags(write=False)
    out = np.empty_like(x)
    rms_norm(x, out, 0.0)
    np.testing.assert_allclose(out, 1.0)


def test_read_only_output_refused(rms_norm):
    x = np.ones((2, 4), np.float32)
    out = np.zeros_like(x)
    out.setflags(write=False)
    with pytest.raises(ValueError, match=r"argument 1 \(out\): expected a writable tensor, got a "
                                         r"read-only one"):
        rms_norm(x, out, 1e-5)
    assert not out.any()  # untouched


def test_python_exception_crosses_back_as_itself():
    class MyError(Exception):
        pass

    err = MyError("from Python")

    def boom(*args):
        raise err

    f = packfn.Function(boom)
    with pytest.raises(MyError) as e:
        f(1, "two")
    assert e.value is err
    with pytest.raises(ZeroDivisionError):
        packfn.Function(lambda: 1 / 0)()


def test_exception_through_nested_calls():
    inner = packfn.Function(lambda: {}["missing"])
    outer = packfn.Function(lambda g: g())
    with pytest.raises(KeyError, match="missing"):
        outer(inner)


def test_callback_result_not_convertible():
    with pytest.raises(TypeError, match="cannot pass a value of type 'object'"):
        packfn.Function(lambda: object())()
    with pytest.raises(OverflowError):
        packfn.Function(lambda: 2**64)()


def test_callback_result_not_convertible_names_the_callback_and_its_result():
    """A callback's result that packfn cannot convert names the callback and says it is the
    result, for Python and C callers alike (it read "packfn: cannot pass a value of type 'set'",
    naming nothing, though nothing was passed: review); an exception raised by Python code the
    conversion ran (a __dlpack__) stands as it was, with a note naming the result."""

    def make_set():
        return {1}

    with pytest.raises(TypeError, match=r"^result of .*make_set: packfn: cannot pass a value of "
                                        r"type 'set'$"):
        packfn.Function(make_set)()
    with pytest.raises(OverflowError, match=r"^result of .*<lambda>: packfn: a positive int of 65 "
                                            r"bits"):
        packfn.Function(lambda: 2**64)()
    # a C caller takes the error with that message and kind
    fn, res = packfn.Function(make_set), Any()
    lib = libpackfn()
    assert lib.pf_function_call(ctypes.c_void_p(fn._address), None, 0, ctypes.byref(res)) != 0
    err = lib.pf_error_take()
    assert lib.pf_error_kind(err) == b"TypeError"
    msg = lib.pf_error_message(err)
    assert msg.startswith(b"result of ") and b"make_set: packfn: cannot pass" in msg
    lib.pf_object_release(err)

    class Refusing:
        def __dlpack__(self, **kw):
            raise BufferError("no export today")

    def give():
        return Refusing()

    with pytest.raises(BufferError, match=r"^no export today") as info:
        packfn.Function(give)()
    assert any("result of" in n and "give" in n for n in getattr(info.value, "__notes__", []))


def test_bad_dlpack_producer():
    class Bad:
        def __dlpack__(self, **kw):
            return 42

    with pytest.raises(TypeError, match="no DLPack capsule"):
        packfn.Tensor(Bad())

    class Raises:
        def __dlpack__(self, **kw):
            raise BufferError("nope")

    with pytest.raises(BufferError, match="nope"):
        packfn.Function(lambda x: x)(Raises())


def test_unsupported_buffer_format():
    class Rec(np.ndarray):
        pass

    rec = np.zeros(2, dtype=[("a", "i4"), ("b", "f8")])
    with pytest.raises((TypeError, ValueError)):
        packfn.Tensor(rec)


@pytest.mark.parametrize(
    "kind", ["UnicodeDecodeError", "UnicodeEncodeError", "UnicodeTranslateError"]
    + (["ExceptionGroup"] if sys.version_info >= (3, 11) else []),
)
def test_kind_of_a_class_not_made_from_one_message(kind):
    """A built-in exception that takes more than the message (UnicodeDecodeError takes five
    arguments) arrives as packfn.Error with the kind and message, not as the constructor's
    TypeError in place of the error."""
    with pytest.raises(packfn.Error) as e:
        _packfn._raise(kind, "the real message", "ValueError", "its cause")
    assert type(e.value) is packfn.Error
    assert str(e.value) == f"{kind}: the real message"
    assert e.value.kind == kind
    assert isinstance(e.value.__cause__, ValueError)


def test_kind_classes_are_capped():
    """Ever new kinds do not each make a class kept for good (found by review): past a cap the
    kinds without a class yet raise packfn.Error itself, still with their kind, and the kinds
    with a class keep it. In a process of its own, since it fills the cache."""
    import subprocess

    code = """if True:
        import packfn
        from packfn import _packfn

        def raised(kind):
            try:
                _packfn._raise(kind, "the message")
            except packfn.Error as e:
                assert e.kind == kind and str(e) == "the message", (e.kind, str(e))
                return type(e)
            raise AssertionError("not raised")

        early = raised("EarlyKind")
        assert early is not packfn.Error and early.__name__ == "EarlyKind"
        for i in range(3000):
            raised(f"Kind{i}")
        size = len(_packfn._kind_classes)
        assert size < 3000, size
        assert raised("LateKind") is packfn.Error and raised("LateKind") is packfn.Error
        assert raised("EarlyKind") is early
        try:
            _packfn._raise("TypeError", "built-in kinds are not counted")
        except TypeError as e:
            assert type(e) is TypeError
        assert len(_packfn._kind_classes) == size

        # a kind past the cap keeps its name through C: a callback raising it leaves that kind
        # in the error C reads (it read "Error", the class's name)
        import ctypes
        import sys

        sys.path.insert(0, TESTS)
        from _cabi import Any, libpackfn

        lib = libpackfn()

        for kind in ("LateKind", "Kind5", "TypeError"):
            try:
                _packfn._raise(kind, "again")
            except Exception as e:
                exc = e

            def callback(exc=exc):
                raise exc

            fn = packfn.Function(callback)
            res = Any()
            assert lib.pf_function_call(fn._address, None, 0, ctypes.byref(res)) == -1
            err = lib.pf_error_take()
            assert lib.pf_error_kind(err).decode() == kind, (kind, lib.pf_error_kind(err))
            lib.pf_object_release(err)
        print(size)
    """
    code = code.replace("TESTS", repr(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) <= 1024



def test_error_class_before_raised():
    """packfn.error_class(kind) names the class of a kind before any error of it was raised, so
    an except clause can name it (the class did not exist until the first raise; found by
    review)."""
    cls = packfn.error_class("NotRaisedYetKindError")
    assert issubclass(cls, packfn.Error) and cls is not packfn.Error
    assert cls.__name__ == "NotRaisedYetKindError"
    with pytest.raises(packfn.error_class("NotRaisedYetKindError")) as info:
        packfn._packfn._raise("NotRaisedYetKindError", "now")
    assert type(info.value) is cls and info.value.kind == "NotRaisedYetKindError"
    assert packfn.error_class("TypeError") is TypeError
    assert packfn.error_class("not an identifier") is packfn.Error
    with pytest.raises(TypeError):
        packfn.error_class(3)
    with pytest.raises(AttributeError):  # no attribute magic on the module
        packfn.SomeKindError


def test_builtin_kinds_whatever_the_callers_builtins():
    """A kind naming a built-in exception raises it also in code run by exec() with its own
    __builtins__ (the lookup read the calling frame's: the kind ValueError there made a class
    packfn.ValueError, a RuntimeError, kept for the process; review)."""
    caught = []
    scope = {"__builtins__": {}, "raiser": packfn._packfn._raiser(), "caught": caught}
    exec("try:\n    raiser('ValueError', 'msg')\nexcept Exception as e:\n    caught.append(e)\n",
         {**scope, "Exception": Exception})
    exec("try:\n    raiser('LookupError', 'msg')\nexcept Exception as e:\n    caught.append(e)\n",
         {**scope, "__builtins__": {"Exception": Exception}})
    assert [type(e) for e in caught] == [ValueError, LookupError]
    assert "ValueError" not in packfn._packfn._kind_classes
    assert "LookupError" not in packfn._packfn._kind_classes


def test_error_class_of_a_kind_no_utf8_or_holding_a_nul():
    """error_class(e.kind) of an error whose kind came from C as no UTF-8 is that error's class,
    packfn.Error (it raised UnicodeEncodeError), and a kind holding a NUL is no identifier, so
    packfn.Error, not the class of its part before the NUL ("ValueError\\0x" gave ValueError,
    and "NulCutKind\\0Error" made a class packfn.NulCutKind: review)."""
    with pytest.raises(packfn.Error) as info:
        packfn._packfn._raiser()("Caf\udce9", "msg")
    assert info.value.kind == "Caf\udce9"
    assert packfn.error_class(info.value.kind) is type(info.value) is packfn.Error
    assert packfn.error_class("ValueError\0x") is packfn.Error
    assert packfn.error_class("NulCutKind\0Error") is packfn.Error
    assert "NulCutKind" not in packfn._packfn._kind_classes
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate stands for no byte
        packfn.error_class("Caf\ud800")


def test_callback_refuses_values_holding_null():
    """A C caller handing a Python callback a DLTensor*, str or bytes view at NULL, or an
    object Any holding NULL: a ValueError back in C, not a crash (strlen(NULL)) or bytes of
    uninitialised memory (found by review); the DLTensor* one with the same message as the
    others (it named pf_tensor_from_dltensor's argument)."""
    import ctypes

    from _cabi import Any, ByteArray, libpackfn

    lib = libpackfn()
    seen = []
    fn = packfn.Function(lambda *args: seen.append(args))
    at_null = ByteArray(None, 5)
    for type_index, payload in ((7, 0), (8, 0), (9, 0), (9, ctypes.addressof(at_null)), (65, 0)):
        arg, res = Any(type_index, 0, payload), Any()
        assert lib.pf_function_call(fn._address, ctypes.byref(arg), 1, ctypes.byref(res)) == -1
        err = lib.pf_error_take()
        assert lib.pf_error_kind(err) == b"ValueError", lib.pf_error_message(err)
        assert b"NULL pointer" in lib.pf_error_message(err)
        lib.pf_object_release(err)
    assert seen == []


def test_argument_conversion_error_raised_by_python_code_is_kept():
    """An exception raised by Python code that converting an argument ran (__dlpack__ here) is
    the one the caller gets, traceback, cause and attributes included, with a note naming the
    argument; it was remade as "argument 0: <message>", which lost them (found by review).
    packfn's own conversion errors keep the "argument N: " prefix in their message."""
    import traceback

    echo = _packfn._echo()

    class Producer:
        def __dlpack__(self, **kw):
            e = ValueError("bad layout")
            e.detail = 42
            raise e from KeyError("root cause")

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(ValueError) as info:
        echo(1, Producer())
    e = info.value
    assert str(e) == "bad layout" and e.detail == 42
    assert isinstance(e.__cause__, KeyError)
    assert "__dlpack__" in [f.name for f in traceback.extract_tb(e.__traceback__)]
    assert any("argument 1 of echo" in n for n in e.__notes__), e.__notes__
    with pytest.raises(TypeError, match=r"^argument 1: packfn: cannot pass a value of type"):
        echo(1, object())


def _leaves_an_error(kind: bytes, message: bytes):
    """(lib, f): a Python function f that raises a packfn error of `kind` through the C API and
    returns 7, as a C function that succeeds with an error left raised (a bug) does."""
    lib = libpackfn()
    lib.pf_error_create.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                    ctypes.POINTER(ctypes.c_void_p)]
    lib.pf_error_raise.argtypes = [ctypes.c_void_p]

    def leave():
        err = ctypes.c_void_p()
        assert lib.pf_error_create(kind, message, None, ctypes.byref(err)) == 0
        assert lib.pf_error_raise(err) == 0  # the thread's slot takes a reference
        lib.pf_object_release(err)
        return 7

    return lib, leave


def test_error_left_raised_by_a_succeeding_call_is_dropped():
    """A function that succeeds but leaves an error raised (a C bug) has the error dropped after
    the call: left, a later call failing without raising reported it as its own (review)."""
    lib, leave = _leaves_an_error(b"ValueError", b"left raised")
    assert packfn.Function(leave)() == 7
    left = lib.pf_error_take()
    lib.pf_object_release(left)
    assert not left


def test_error_pending_before_a_call_is_kept(thread_testmod):
    """C code that raised and then runs Python (a hook) keeps its error when that Python makes a
    successful packfn call: only an error the call itself left is dropped (review: the
    dropping above wiped the outer error, and the outer call said it failed without one)."""
    hook = packfn.Function(lambda: packfn.Function(lambda: 5)())  # a successful packfn call
    with pytest.raises(ValueError, match="the failure raised before the hook ran"):
        thread_testmod.fail_after_notify(hook)
    # the hook's call succeeds but leaves an error of its own (chained onto the pending one, it
    # took its place): that one is dropped and the outer one kept
    _, leave = _leaves_an_error(b"KeyError", b"left by the hook's call")
    hook = packfn.Function(lambda: packfn.Function(leave)())
    with pytest.raises(ValueError, match="the failure raised before the hook ran"):
        thread_testmod.fail_after_notify(hook)


def _as_hook_of_a_failing_call(thread_testmod, action):
    """Runs action() as the hook of C code that raised a ValueError first and fails with it
    after the hook (fail_after_notify); checks that the C code's error comes through as it was
    raised (nothing chained onto it), and returns what action() raised, or None."""
    seen = []

    def hook():
        try:
            action()
        except Exception as e:  # the entry point's own failure, as its own exception
            seen.append(e)
        else:
            seen.append(None)

    with pytest.raises(ValueError) as outer:
        thread_testmod.fail_after_notify(packfn.Function(hook))
    assert str(outer.value) == "the failure raised before the hook ran"
    assert outer.value.__cause__ is None
    assert len(seen) == 1
    return seen[0]


def _index_past_the_end():
    return _packfn._echo()([1, 2, 3])[3]


def _register_a_taken_name():
    packfn.register_global("test.pending.taken", lambda: 1, override=True)
    try:
        packfn.register_global("test.pending.taken", lambda: 2)
    finally:
        packfn.remove_global("test.pending.taken")


@pytest.mark.parametrize(
    "action,cls,match",
    [(lambda: packfn.get_global("test.missing.name"), KeyError,
      "no global function is named 'test.missing.name'"),
     (lambda: packfn.remove_global("test.missing.name"), KeyError, "test.missing.name"),
     (_register_a_taken_name, ValueError, "is already registered"),
     (lambda: packfn.load_module("/nonexistent/libpackfn_nope.so"), OSError, "cannot load"),
     (lambda: packfn.system_module().test_missing_export, AttributeError,
      "has no function 'test_missing_export'"),
     (_index_past_the_end, IndexError, "out of range"),
     (lambda: packfn.Tensor(np.arange(3.0)).__dlpack__(copy=True, dl_device=(8, 0)), KeyError,
      "no allocator for device type metal")],
    ids=["get_global", "remove_global", "register_global", "load_module", "module_attribute",
         "array_index", "dlpack_copy"],
)
def test_entry_point_failing_in_a_hook_keeps_the_outer_error(thread_testmod, action, cls, match):
    """An entry point that fails while an error of the C code that ran the hook is pending raises
    its own error, without that one as its cause, and leaves the pending one as it was (it took
    the pending error along with its own, and the C code then failed "without raising an error":
    review)."""
    e = _as_hook_of_a_failing_call(thread_testmod, action)
    assert type(e) is cls
    assert re.search(match, str(e))
    assert e.__cause__ is None


def _iterate_an_array():
    assert list(_packfn._echo()([1, 2, 3])) == [1, 2, 3]  # the end is an IndexError from C


def _register_and_remove():
    f = packfn.register_global("test.pending.fresh", lambda: 5)
    assert packfn.get_global("test.pending.fresh")() == 5
    packfn.remove_global("test.pending.fresh")
    assert f() == 5


def _read_a_map():
    m = _packfn._echo()({"a": 1, 2: "b"})
    assert m["a"] == 1 and "z" not in m and m.get("z", 3) == 3
    assert dict(m.items()) == {"a": 1, 2: "b"}


def _make_and_read_a_tensor():
    t = packfn.Tensor(np.arange(3.0))
    assert (t.dtype, t.device, t.shape) == ("float64", "cpu:0", (3,))
    assert "float64" in repr(t)
    assert np.from_dlpack(t).tolist() == [0.0, 1.0, 2.0]


def _read_the_system_module():
    m = packfn.system_module()
    assert "packfn.kernels.rms_norm" in m.exports()
    assert getattr(m, "packfn.kernels.rms_norm") == packfn.get_global("packfn.kernels.rms_norm")


@pytest.mark.parametrize(
    "action",
    [_iterate_an_array, _register_and_remove, _read_a_map, _make_and_read_a_tensor,
     _read_the_system_module, lambda: packfn.get_global("packfn.kernels.rms_norm"),
     lambda: packfn.Function(lambda: 1), packfn.list_globals],
    ids=["array_iteration", "register_remove", "map", "tensor", "system_module", "get_global",
         "function", "list_globals"],
)
def test_entry_point_succeeding_in_a_hook_keeps_the_outer_error(thread_testmod, action):
    """An entry point that succeeds while an error of the C code that ran the hook is pending
    leaves it as it was, also when it raised and cleared errors of its own on the way (the end
    of an Array's iteration is an IndexError raised in C)."""
    assert _as_hook_of_a_failing_call(thread_testmod, action) is None


@pytest.mark.parametrize("device", [(1, 0, 0), (1,), (), [1, 0], (1.0, 0), (1, "0"), (None, 0)])
def test_dlpack_device_of_another_size_is_no_device_tuple(device):
    """__dlpack_device__ returning a tuple of another size than 2 is refused as any value that is
    no (type, id) tuple: it raised PyArg_ParseTuple's "function takes exactly 2 arguments (3
    given)" (review); so is a pair that is not two ints, which raised PyArg_ParseTuple's
    "'float' object cannot be interpreted as an integer" (seventeenth session)."""
    a = np.arange(4.0)

    class P:
        def __dlpack__(self, **kw):
            return a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return device

    with pytest.raises(TypeError, match=r"^packfn: P.__dlpack_device__\(\) returned no \(type, "
                                        r"id\) tuple$"):
        packfn.Tensor(P())
    with pytest.raises(TypeError, match=r"^argument 1: packfn: P.__dlpack_device__\(\) returned "
                                        r"no \(type, id\) tuple$"):
        _packfn._noop()(1, P())


def test_kind_error_is_packfn_error_itself():
    """The kind "Error" gives packfn.Error, not a second class named packfn.Error (review)."""
    assert packfn.error_class("Error") is packfn.Error
    with pytest.raises(packfn.Error) as e:
        _packfn._raise("Error", "plain")
    assert type(e.value) is packfn.Error and e.value.kind == "Error" and str(e.value) == "plain"
    assert "Error" not in _packfn._kind_classes
