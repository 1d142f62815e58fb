"""packfn and TVM-FFI's Python (the apache-tvm-ffi wheel) in one interpreter (issue 11).

TVM-FFI's Python drives packfn's C kernels and functions and gets packfn's errors as its own
exceptions; TVM-FFI's objects (containers, functions, tensors, strings) go through packfn and
come back as the same C objects. The wheel is a dependency of the test venv: a missing wheel
fails these tests, it does not skip them."""
import os
import subprocess
import textwrap
import sys

import numpy as np
import pytest

import packfn
import tvm_ffi
from packfn import _packfn


def as_tvm(obj):
    """The packfn object `obj` seen from TVM-FFI's Python (the same C object)."""
    return obj.__tvm_ffi_object__()


@pytest.fixture(scope="module")
def identity():
    fn = packfn.register_global("test.tvm_interop.identity", lambda x: x, override=True)
    yield fn
    packfn.remove_global("test.tvm_interop.identity")



def _run_prints_ok(code):
    """Runs `code` in a fresh interpreter allowed to join TVM-FFI; it must print ok."""
    env = dict(os.environ)
    env.pop("PACKFN_NO_TVM_FFI", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"

def test_joined():
    assert _packfn._tvm_ffi_join() is True


@pytest.mark.parametrize("first", ["packfn", "tvm_ffi"])
def test_either_import_order_joins_and_shares_the_global_table(first):
    second = "tvm_ffi" if first == "packfn" else "packfn"
    code = (
        f"import {first}, {second}, numpy as np\n"
        "from packfn import _packfn\n"
        "rms = tvm_ffi.get_global_func('packfn.kernels.rms_norm')\n"
        "x = np.ones((2, 4), np.float32); out = np.empty_like(x)\n"
        "rms(x, out, 0.0)\n"
        "assert np.allclose(out, 1.0), out\n"
        "print('ok')\n"
    )
    _run_prints_ok(code)


def test_no_tvm_ffi_env_keeps_them_apart():
    code = "import packfn, tvm_ffi\nfrom packfn import _packfn\nprint(_packfn._tvm_ffi_join())\n"
    env = dict(os.environ, PACKFN_NO_TVM_FFI="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_rms_norm_from_tvm_ffi_on_numpy_arrays():
    rms = tvm_ffi.get_global_func("packfn.kernels.rms_norm")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 33)).astype(np.float32)
    out = np.empty_like(x)
    rms(x, out, 1e-5)
    ref = x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=1e-6)


KINDS = [
    ("TypeError", TypeError),
    ("ValueError", ValueError),
    ("IndexError", IndexError),
    ("KeyError", KeyError),
    ("AttributeError", AttributeError),
    ("RuntimeError", RuntimeError),
    ("MemoryError", MemoryError),
    ("NotImplementedError", NotImplementedError),
    ("OSError", OSError),
]


@pytest.mark.parametrize("kind,exc", KINDS)
def test_every_packfn_error_kind_arrives_as_the_python_exception(kind, exc):
    raiser = as_tvm(_packfn._raiser())
    assert isinstance(raiser, tvm_ffi.Function)
    with pytest.raises(exc) as info:
        raiser(kind, f"packfn raised {kind}")
    assert f"packfn raised {kind}" in str(info.value)


def test_packfn_error_cause_and_backtrace_reach_tvm_ffi():
    raiser = as_tvm(_packfn._raiser())
    with pytest.raises(ValueError) as info:
        raiser("ValueError", "outer", "KeyError", "inner")
    assert "outer" in str(info.value)
    text = "".join(__import__("traceback").format_exception(info.value))
    assert "inner" in text  # the cause travels with the error


def test_kernel_argument_errors_arrive_as_python_exceptions():
    rms = tvm_ffi.get_global_func("packfn.kernels.rms_norm")
    x = np.ones((2, 4), np.int64)
    with pytest.raises(TypeError, match="rms_norm"):
        rms(x, np.empty((2, 4), np.float32), 1e-5)
    with pytest.raises(ValueError, match="rms_norm"):
        rms(np.ones((2, 4), np.float32), np.empty((2, 5), np.float32), 1e-5)
    # nothing stale is left behind: the next call succeeds and the next error is unrelated
    y = np.ones((1, 4), np.float32)
    rms(y, y, 0.0)
    with pytest.raises(TypeError) as info:
        rms("not a tensor", y, 0.0)
    assert "shape" not in str(info.value)


def test_tvm_ffi_error_reaches_packfn(identity):
    def fails():
        raise IndexError("raised on the TVM-FFI side")

    tvm_fn = tvm_ffi.convert(fails)
    as_packfn = identity(tvm_fn)  # the same C function object, now a packfn.Function
    assert isinstance(as_packfn, packfn.Function)
    with pytest.raises(IndexError, match="raised on the TVM-FFI side"):
        as_packfn()
    assert _packfn._tvm_ffi_join()


def test_functions_cross_both_ways(identity):
    double = tvm_ffi.convert(lambda v: v * 2)
    assert identity(double)(21) == 42
    pf_add = packfn.register_global("test.tvm_interop.add", lambda a, b: a + b, override=True)
    try:
        tvm_add = tvm_ffi.get_global_func("test.tvm_interop.add")
        assert tvm_add(2, 3) == 5
        assert as_tvm(pf_add)(4, 5) == 9
    finally:
        packfn.remove_global("test.tvm_interop.add")


def test_tvm_ffi_global_found_from_packfn():
    # a global TVM-FFI registers itself (its Python package registers ffi.* functions)
    names = tvm_ffi.registry.list_global_func_names()
    name = next(n for n in names if n.startswith("ffi."))
    fn = packfn.get_global(name)
    assert isinstance(fn, packfn.Function)


def test_arrays_and_strings_round_trip(identity):
    arr = tvm_ffi.convert([1, 2.5, "a string longer than seven bytes", "short"])
    back = identity(arr)
    assert isinstance(back, packfn.Array)
    assert list(back) == [1, 2.5, "a string longer than seven bytes", "short"]
    again = as_tvm(back)
    assert isinstance(again, tvm_ffi.Array)
    assert list(again) == [1, 2.5, "a string longer than seven bytes", "short"]
    assert again.__chandle__() == arr.__chandle__()  # the very same C object


def test_maps_round_trip_both_ways(identity):
    small = {"a": 1, "b": "two", 3: 4.5}
    dense = {f"key{i}": i for i in range(100)}
    for content in (small, dense):
        tvm_map = tvm_ffi.convert(content)
        pf_map = identity(tvm_map)
        assert isinstance(pf_map, packfn.Map)
        assert len(pf_map) == len(content)
        for k, v in content.items():
            assert pf_map[k] == v
        # a map packfn built, read by TVM-FFI
        pf_built = identity(content)
        tvm_view = as_tvm(pf_built)
        assert isinstance(tvm_view, tvm_ffi.Map)
        assert len(tvm_view) == len(content)
        for k, v in content.items():
            assert tvm_view[k] == v
        assert sorted(map(str, tvm_view.keys())) == sorted(map(str, content.keys()))


def test_lists_and_dicts_round_trip(identity):
    tl = tvm_ffi.List([1, 2, 3])
    back = identity(tl)
    assert back.type_index == 75  # ffi.List
    tl2 = as_tvm(back)
    assert isinstance(tl2, tvm_ffi.List)
    tl2.append(4)
    assert list(tl) == [1, 2, 3, 4]  # mutable and shared: the same C object
    td = tvm_ffi.Dict({"x": 1})
    back = identity(td)
    assert back.type_index == 76  # ffi.Dict
    td2 = as_tvm(back)
    td2["y"] = 2
    assert dict(td) == {"x": 1, "y": 2}


def test_tensor_objects_cross_without_copy(identity):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = packfn.from_dlpack(x)
    tv = as_tvm(t)
    assert isinstance(tv, tvm_ffi.Tensor)
    assert tuple(tv.shape) == (3, 4)
    y = np.from_dlpack(tv)
    assert y.ctypes.data == x.ctypes.data
    tt = tvm_ffi.from_dlpack(np.ones(5, np.float64))
    back = identity(tt)
    assert isinstance(back, packfn.Tensor)
    assert back.shape == (5,)


def test_read_only_tensor_is_not_handed_to_tvm_ffi(identity):
    """TVM-FFI's tensors carry no read-only flag: a read-only packfn tensor handed to it became
    writable there (a write into a read-only mapping then crashed: review). It is refused with
    BufferError, as a legacy __dlpack__ export of it is; a writable one still crosses."""
    x = np.arange(4, dtype=np.float32)
    x.setflags(write=False)
    t = packfn.from_dlpack(x)
    assert t.read_only
    with pytest.raises(BufferError, match="read-only"):
        t.__tvm_ffi_object__()
    via_tvm = tvm_ffi.get_global_func("test.tvm_interop.identity")
    with pytest.raises(BufferError, match="read-only"):
        via_tvm(t)  # tvm_ffi converts a packfn.Tensor argument through __tvm_ffi_object__
    view = packfn.from_dlpack(t)  # a view of it is read-only too
    with pytest.raises(BufferError, match="read-only"):
        view.__tvm_ffi_object__()
    w = np.arange(4, dtype=np.float32)
    tw = via_tvm(packfn.from_dlpack(w))
    assert np.from_dlpack(tw).ctypes.data == w.ctypes.data


@pytest.fixture
def tvm_writer():
    """A Python function registered through tvm_ffi (a function of another runtime, seen from
    packfn) that writes 100 into the first element of each tensor argument, and its calls."""
    calls = []

    def writer(*args):
        calls.append(len(args))
        for a in args:
            if isinstance(a, tvm_ffi.Tensor):
                np.from_dlpack(a)[0] = 100

    tvm_ffi.register_global_func("test.tvm_interop.writer", writer, override=True)
    try:
        yield packfn.get_global("test.tvm_interop.writer"), calls
    finally:
        packfn.remove_global("test.tvm_interop.writer")


def _read_only(x):
    x.setflags(write=False)
    return x


def test_read_only_tensor_argument_refused_to_tvm_ffi_functions(tvm_writer, tmp_path):
    """packfn calling a function of another runtime handed it a read-only tensor as a tensor
    object whose read-only flag TVM-FFI cannot see: the callee wrote into the read-only array
    (a read-only np.memmap: SIGSEGV; review). A read-only tensor argument is refused with
    BufferError naming the argument, before the call, as TVM-FFI's own call refuses it."""
    f, calls = tvm_writer
    assert f._foreign is True and f._owned_args is True
    path = tmp_path / "ro.bin"
    np.arange(4, dtype=np.float32).tofile(path)
    ro_arrays = [
        _read_only(np.arange(4, dtype=np.float32)),
        packfn.from_dlpack(_read_only(np.arange(4, dtype=np.float32))),
        np.memmap(path, dtype=np.float32, mode="r"),  # PROT_READ: a write would crash
    ]
    for ro in ro_arrays:
        for index, args in [(0, (ro,)), (2, (1, "s", ro, np.zeros(2)))]:
            with pytest.raises(BufferError, match=rf"argument {index}: .*read-only tensor.*"
                                                  r"another runtime.*TVM-FFI's tensors carry no "
                                                  r"read-only flag.*pass a writable copy"):
                f(*args)
        assert list(np.from_dlpack(ro)) == [0.0, 1.0, 2.0, 3.0]
    assert calls == []
    with pytest.raises(BufferError, match="Cannot export readonly array"):  # TVM-FFI's own
        tvm_ffi.get_global_func("test.tvm_interop.writer")(ro_arrays[0])
    # a writable array is passed, and written
    w = np.arange(4, dtype=np.float32)
    f(w)
    assert w[0] == 100 and calls == [1]
    # packfn's own functions see the flag, and keep accepting read-only tensors
    seen = packfn.Function(lambda t: t.read_only)
    assert seen._foreign is False and seen(ro_arrays[0]) is True
    packfn.register_global("test.tvm_interop.ro_seen", lambda t: t.read_only, override=True)
    try:
        g = packfn.get_global("test.tvm_interop.ro_seen")
        assert g._foreign is False and g(ro_arrays[2]) is True
    finally:
        packfn.remove_global("test.tvm_interop.ro_seen")
    rms = packfn.get_global("packfn.kernels.rms_norm")
    assert rms._foreign is False
    out = np.empty(4, np.float32)
    rms(ro_arrays[2], out, 1e-5)
    assert packfn.get_global("testing.echo")._foreign is True


def test_read_only_tensor_in_containers_refused_to_tvm_ffi(identity):
    """A read-only tensor inside a list, tuple, dict, Array or Map reached a TVM-FFI function
    writable all the same: containers passed to a function of another runtime, and handed over
    with __tvm_ffi_object__, are looked through (PFPY_READ_ONLY_DEPTH levels)."""
    echo = packfn.get_global("testing.echo")
    assert echo._foreign is True
    ro = _read_only(np.arange(4, dtype=np.float32))
    t = packfn.from_dlpack(ro)
    nested = [1, [2, (3, {"k": [t]})]]
    array, mapping = identity([t]), identity({"x": identity([1, t])})  # packfn.Array, .Map
    assert type(array).__name__ == "Array" and type(mapping).__name__ == "Map"
    for arg in ([ro], (1, ro), {"a": ro}, [t], array, nested, mapping):
        with pytest.raises(BufferError, match=r"argument 0: packfn: a read-only tensor "
                                              r"\(in a container\) is not passed"):
            echo(arg)
    for obj in (array, mapping):
        with pytest.raises(BufferError, match=r"__tvm_ffi_object__: a read-only tensor "
                                              r"\(in this container\) is not handed"):
            obj.__tvm_ffi_object__()
    # writable tensors in containers still cross, and packfn's own functions take read-only ones
    w = np.arange(4, dtype=np.float32)
    back = echo([w, {"k": (w,)}])
    assert np.from_dlpack(back[0]).ctypes.data == w.ctypes.data
    assert as_tvm(identity([packfn.from_dlpack(w)])) is not None
    assert identity([t])[0].read_only is True


def test_read_only_walk_of_shared_containers(identity):
    """Containers reached by many paths (each level a packfn Array holding the one below 8
    times) were walked once per path: twelve levels took minutes (review). Each is walked at
    most once per depth it is reached at, so these finish at once, and a container first
    reached too deep to see its read-only tensor is walked again when reached higher up."""
    echo = packfn.get_global("testing.echo")
    ro = packfn.from_dlpack(_read_only(np.arange(4, dtype=np.float32)))
    w = packfn.from_dlpack(np.arange(4, dtype=np.float32))
    for leaf, refused in ((ro, True), (w, False)):
        level = identity([leaf])
        for _ in range(20):
            level = identity([level] * 8)
        if refused:
            with pytest.raises(BufferError, match=r"read-only tensor \(in a container\)"):
                echo(level)
        else:
            echo(level)
    x = identity([identity([ro])])  # the tensor two levels below x
    deep = x
    for _ in range(30):
        deep = identity([deep])
    with pytest.raises(BufferError, match=r"read-only tensor \(in a container\)"):
        echo(identity([deep, x]))  # x first reached 31 levels down (its tensor out of reach),
        # then right below the top


def test_read_only_jax_array_refused_to_tvm_ffi_functions(tvm_writer):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    f, calls = tvm_writer
    cpu = jax.devices("cpu")[0]
    for dtype in (jnp.float32, jnp.bfloat16):
        j = jnp.arange(4, dtype=jnp.float32, device=cpu).astype(dtype)
        with pytest.raises(BufferError, match="argument 0: .*read-only tensor"):
            f(j)
    assert calls == []


def test_custom_type_printed_and_passed_back(identity):
    obj = _packfn._custom_object("packfn.test.Point")
    tv = as_tvm(obj)
    text = repr(tv)  # TVM-FFI prints it from the shared type registry: no crash
    assert isinstance(text, str)
    assert "packfn.test.Point" in text
    back = identity(tv)
    assert back.type_index == obj.type_index
    assert back._address == obj._address



def test_big_integer_is_refused_with_a_type_error_naming_it():
    rms = tvm_ffi.get_global_func("packfn.kernels.rms_norm")
    x = np.ones(2, np.float32)
    with pytest.raises(TypeError, match="(?i)big ?int"):
        rms(x, x, 2**70)  # TVM-FFI passes a big integer object (index 78) for eps


def test_echo_of_a_numpy_array_keeps_it_alive():
    """TVM-FFI's testing.echo returns the tensor it was given: what comes back holds the array
    (it used to be a tensor over the freed array's memory)."""
    import gc
    import weakref

    echo = packfn.get_global("testing.echo")
    x = np.arange(1024, dtype=np.float32)
    alive = weakref.ref(x)
    r = echo(x)
    assert isinstance(r, packfn.Tensor) and r.data_ptr == x.ctypes.data
    del x
    gc.collect()
    assert alive() is not None
    np.testing.assert_array_equal(np.from_dlpack(r), np.arange(1024, dtype=np.float32))


def test_tvm_ffi_python_callback_may_keep_its_tensor_argument():
    """A Python function registered through tvm_ffi and called through packfn gets a tensor that
    owns the array's buffer, so keeping it is safe (it used to get the DLTensor described on the
    C stack, and reading the kept tensor after the array went crashed)."""
    import gc
    import weakref

    kept = []

    def keep(t):
        kept.append(t)

    tvm_ffi.register_global_func("test.tvm_interop.keep", keep, override=True)
    try:
        f = packfn.get_global("test.tvm_interop.keep")
        assert f._owned_args is True
        x = np.arange(1024, dtype=np.float32)
        alive = weakref.ref(x)
        f(x)
        del x
        gc.collect()
        assert alive() is not None
        np.testing.assert_array_equal(np.from_dlpack(kept[0]), np.arange(1024, dtype=np.float32))
    finally:
        kept.clear()
        packfn.remove_global("test.tvm_interop.keep")


def test_functions_of_tvm_ffi_get_owned_tensors():
    assert packfn.get_global("testing.echo")._owned_args is True
    assert packfn.get_global("packfn.kernels.rms_norm")._owned_args is False


def test_find_spec_probe_before_the_import_still_joins():
    """packfn imported first, then an optional-dependency probe (importlib.util.find_spec), then
    `import tvm_ffi`: the hook stays until the real import runs, joins, and leaves."""
    code = (
        "import importlib.util, sys\n"
        "import packfn\n"
        "from packfn import _packfn\n"
        "assert importlib.util.find_spec('tvm_ffi') is not None\n"
        "assert importlib.util.find_spec('tvm_ffi') is not None\n"
        "import tvm_ffi\n"
        "assert tvm_ffi.get_global_func('packfn.kernels.rms_norm') is not None\n"
        "packfn.get_global('testing.echo')\n"
        "assert not any(type(f).__name__ == '_JoinAfterImport' for f in sys.meta_path)\n"
        "assert _packfn._tvm_ffi_join()  # joins itself: asked last\n"
        "print('ok')\n"
    )
    _run_prints_ok(code)


def test_reloading_packfn_before_tvm_ffi_leaves_one_join_hook():
    """importlib.reload(packfn) before `import tvm_ffi` ran the package again, which put a second
    join hook in sys.meta_path: each hook asked the other finders for tvm_ffi's spec, the other
    hook among them, which asked the first again, and `import tvm_ffi` failed with RecursionError
    (found by review). A reload replaces the hook it left."""
    code = (
        "import importlib, sys\n"
        "import packfn\n"
        "from packfn import _packfn\n"
        "importlib.reload(packfn)\n"
        "importlib.reload(packfn)\n"
        "assert sum(type(f).__name__ == '_JoinAfterImport' for f in sys.meta_path) == 1\n"
        "import tvm_ffi\n"
        "assert tvm_ffi.get_global_func('packfn.kernels.rms_norm') is not None\n"
        "assert not any(type(f).__name__ == '_JoinAfterImport' for f in sys.meta_path)\n"
        "assert _packfn._tvm_ffi_join()\n"
        "print('ok')\n"
    )
    _run_prints_ok(code)


def test_tvm_ffi_functions_and_tensors_pass_as_the_same_c_object():
    """tvm_ffi.Function and tvm_ffi.Tensor derive from tvm_ffi.core.CObject, not from
    tvm_ffi.core.Object (apache-tvm-ffi 0.1.15): they were not recognised, so a function became
    a Python callback around it and a tensor went through DLPack, each a new C object (found by
    review). They are the same C object now, as containers are."""
    echo = _packfn._echo()
    fn = tvm_ffi.convert(lambda v: v * 2)
    kernel = tvm_ffi.get_global_func("packfn.kernels.rms_norm")
    x = np.ones(3)
    tensor = tvm_ffi.from_dlpack(x)
    for obj in (fn, kernel, tensor, tvm_ffi.convert([1, 2]), tvm_ffi.convert({"a": 1})):
        back = echo(obj)
        assert back._address == obj.__chandle__(), (type(obj), back)
    assert echo(fn)(21) == 42
    assert isinstance(echo(kernel), packfn.Function)
    t = echo(tensor)
    assert isinstance(t, packfn.Tensor) and t.data_ptr == x.ctypes.data


def test_object_faking_a_tvm_ffi_class_is_not_trusted_with_an_address():
    """isinstance() honours a __class__ attribute: an object faking tvm_ffi.core.Object passed
    the check and its __chandle__() was taken for a C object's address (a crash; found by
    review). Only the real types are trusted, and with their own __chandle__: a subclass
    overriding it gets no say. In a process of its own: the crash took the interpreter."""
    code = (
        "import packfn, pytest, tvm_ffi\n"
        "echo = packfn._packfn._echo()\n"
        "class Fake:\n"
        "    __class__ = tvm_ffi.core.Object\n"
        "    def __chandle__(self):\n"
        "        return 0xdead0\n"
        "assert isinstance(Fake(), tvm_ffi.core.Object)\n"
        "with pytest.raises(TypeError, match=\"cannot pass a value of type 'Fake'\"):\n"
        "    echo(Fake())\n"
        "class Sub(tvm_ffi.Object):\n"
        "    def __chandle__(self):\n"
        "        return 0xdead0\n"
        "with pytest.raises(ValueError, match='holds no object'):\n"
        "    echo(Sub.__new__(Sub))  # no handle: the override is not asked\n"
        "print('ok')\n"
    )
    _run_prints_ok(code)


def test_repr_of_a_dict_holding_itself_ends(identity):
    """A dict can hold itself through other containers (d["a"] = [d]); each level of repr()
    wrapped the same C dict in a new packfn.Map, so it recursed until RecursionError. It now
    writes {...} where the dict comes again, as Python's dict does (review)."""
    td = tvm_ffi.Dict({"x": 1})
    td["a"] = tvm_ffi.Array([td])
    m = identity(td)
    try:
        assert repr(m) == "packfn.Map({'x': 1, 'a': packfn.Array([packfn.Map({...})])})"
        assert repr(m) == repr(m)  # nothing left behind by the first
    finally:
        td.pop("a")  # break the cycle (reference counting does not collect it)
    assert repr(m) == "packfn.Map({'x': 1})"


def test_repr_of_a_list_holding_itself_ends(identity):
    """A TVM-FFI List can hold itself (l.append(l)), directly or through a Dict; each level of
    repr() wrapped the same C list in a new packfn.Array, so it recursed until RecursionError
    (the fix for dicts covered Maps only: review). It now writes [...] where the list comes
    again, as Python's list does, and a Map inside it ends at the list too."""
    tl = tvm_ffi.List([1])
    tl.append(tl)
    td = tvm_ffi.Dict({"l": tl})
    tl.append(td)
    a = identity(tl)
    try:
        assert repr(a) == ("packfn.Array([1, packfn.Array([...]), "
                           "packfn.Map({'l': packfn.Array([...])})])")
        assert repr(a) == repr(a)  # nothing left behind by the first
    finally:
        tl.clear()  # break the cycles (reference counting does not collect them)
    assert repr(a) == "packfn.Array([])"


def test_function_of_a_tvm_ffi_function_is_that_function():
    """packfn.Function(f) and register_global(name, f) of a tvm_ffi.Function give a
    packfn.Function of the same C function, as passing f to a packfn function does: they made a
    Python callback calling f through Python, so every call from C took the GIL (a C library
    calling the global from a thread it waits for, while the caller holds the GIL, hung), and
    the name was registered to a function other than f (review)."""
    echo = tvm_ffi.get_global_func("testing.echo")
    fn = packfn.Function(echo)
    theirs = packfn.get_global("testing.echo")
    assert fn == theirs and hash(fn) == hash(theirs)
    assert fn._foreign and fn._owned_args
    assert fn(3) == 3
    reg = packfn.register_global("test.tvm_interop.echo_again", echo, override=True)
    try:
        assert reg == theirs and packfn.get_global("test.tvm_interop.echo_again") == theirs
        assert tvm_ffi.get_global_func("test.tvm_interop.echo_again").same_as(echo)
    finally:
        packfn.remove_global("test.tvm_interop.echo_again")
    # other callables still become callbacks
    assert packfn.Function(len)._owned_args and not packfn.Function(len)._foreign


def test_function_of_a_tvm_ffi_function_apart_stays_a_callback():
    """With the runtimes apart (PACKFN_NO_TVM_FFI=1) a TVM-FFI function's errors are raised in
    TVM-FFI's slot, which packfn does not read: packfn.Function of it stays a Python callback,
    whose call takes them (as the same C function it failed "without raising an error")."""
    code = textwrap.dedent("""
        import packfn, tvm_ffi
        assert not packfn._packfn._tvm_ffi_join()
        def boom():
            raise ValueError("tvm boom")
        tvm_ffi.register_global_func("t.boom", boom, override=True)
        f = packfn.Function(tvm_ffi.get_global_func("t.boom"))
        assert f._owned_args and not f._foreign
        try:
            f()
        except ValueError as e:
            assert "tvm boom" in str(e), e
        else:
            raise AssertionError("no error")
        print("ok")
    """)
    env = dict(os.environ, PACKFN_NO_TVM_FFI="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
