"""Values both ways, through a Python callback called as a packfn function."""
import array
import ctypes
import math

import numpy as np
import pytest

import packfn


@pytest.mark.parametrize(
    "value",
    [0, 1, -1, 2**63 - 1, -(2**63), 1.5, -0.0, math.inf, True, False, None, "", "abc",
     "seven77", "eight888", "a longer string with ünïcödé ✓", "nul\0inside a long string",
     "nul\0", b"", b"\x00\xff", b"a longer bytes value\x00\x01"],
)
def test_scalar_round_trip(identity, value):
    got = identity(value)
    assert type(got) is type(value)
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(got)
    else:
        assert got == value


def test_bool_stays_bool(identity):
    assert identity(True) is True and identity(False) is False


def test_int_subclass_and_float_subclass(identity):
    import enum

    class Color(enum.IntEnum):
        RED = 3

    assert identity(Color.RED) == 3 and type(identity(Color.RED)) is int

    class F(float):
        pass

    assert identity(F(2.5)) == 2.5


@pytest.mark.parametrize("big", [2**63, -(2**63) - 1, 10**30])
def test_huge_int_overflow(identity, big):
    with pytest.raises(OverflowError, match="argument 0: .*64-bit"):
        identity(big)


def test_unsupported_type(identity):
    with pytest.raises(TypeError, match="argument 0: .*cannot pass a value of type 'object'"):
        identity(object())
    with pytest.raises(TypeError, match="argument 1"):
        packfn.Function(lambda *a: None)(1, {1, 2})


def test_list_tuple_to_array(identity):
    a = identity([1, "two", 3.0, None, [4, 5], {"k": "v"}])
    assert isinstance(a, packfn.Array)
    assert len(a) == 6
    assert a[0] == 1 and a[1] == "two" and a[2] == 3.0 and a[3] is None
    assert a[-1]["k"] == "v" and a[-2] == [4, 5]
    assert list(a[1:3]) == ["two", 3.0]
    with pytest.raises(IndexError):
        a[6]
    with pytest.raises(IndexError):
        a[-7]
    assert list(identity((1, 2, 3))) == [1, 2, 3]
    assert identity(()) == []
    assert repr(identity([1])) == "packfn.Array([1])"
    import collections.abc

    assert isinstance(a, collections.abc.Sequence)
    assert isinstance(identity({}), collections.abc.Mapping)
    # an Array passes through as the same object
    assert identity(a) == a and identity(a)._pf_refcount >= 1


def test_dict_to_map(identity):
    m = identity({"a": 1, "b": [2, 3], 7: "seven", b"k": None})
    assert isinstance(m, packfn.Map)
    assert len(m) == 4
    assert m["a"] == 1 and list(m["b"]) == [2, 3] and m[7] == "seven" and m[b"k"] is None
    assert "a" in m and "zz" not in m and 8 not in m
    assert list(m) == ["a", "b", 7, b"k"]
    assert m.keys() == ["a", "b", 7, b"k"]
    assert m.values()[0] == 1
    assert m.items()[2] == (7, "seven")
    assert m.get("zz", 5) == 5 and m.get("a") == 1
    with pytest.raises(KeyError):
        m["missing"]
    with pytest.raises(TypeError):
        identity({1.5: "float keys are refused"})


def test_packfn_objects_pass_through(identity, rms_norm):
    assert identity(rms_norm) is not None
    assert identity(rms_norm) == rms_norm


def test_callable_argument_becomes_function():
    apply = packfn.Function(lambda f, x: f(x))
    assert apply(lambda v: v + 1, 41) == 42


def test_many_arguments():
    f = packfn.Function(lambda *a: list(a))
    args = list(range(20)) + ["s" * 20, np.zeros(3)]
    out = f(*args)
    assert list(out[:20]) == list(range(20)) and out[20] == "s" * 20
    assert isinstance(out[21], packfn.Tensor)


def test_numpy_into_callback_is_zero_copy():
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    seen = []

    def cb(t):
        seen.append((t.shape, t.dtype, t.device, t.strides, t.read_only))
        v = np.from_dlpack(t)
        v[1, 2] = 100.0  # written through the packfn tensor
        return None

    packfn.Function(cb)(x)
    assert seen == [((2, 3), "float64", "cpu:0", (3, 1), False)]
    assert x[1, 2] == 100.0


def test_tensor_result_zero_copy(identity):
    x = np.arange(4, dtype=np.int32)
    t = identity(x)
    assert isinstance(t, packfn.Tensor)
    assert t.data_ptr == x.ctypes.data and t.shape == (4,) and t.dtype == "int32"
    v = np.from_dlpack(t)
    v[0] = 42
    assert x[0] == 42
    assert t.__dlpack_device__() == (1, 0)
    del x
    assert list(np.from_dlpack(t)) == [42, 1, 2, 3]  # the tensor keeps the buffer alive


def test_tensor_from_objects():
    x = np.ones((2, 2), dtype=np.float32)
    t = packfn.Tensor(x)
    assert t.data_ptr == x.ctypes.data and packfn.from_dlpack(x).shape == (2, 2)
    assert packfn.Tensor(t) is t
    assert packfn.Tensor(memoryview(bytearray(b"abc"))).dtype == "uint8"
    assert packfn.Tensor(array.array("d", [1.0, 2.0])).dtype == "float64"
    with pytest.raises(TypeError, match="__dlpack__"):
        packfn.Tensor(3)
    # legacy (unversioned) capsule too
    assert np.from_dlpack(t).shape == (2, 2)
    cap = t.__dlpack__()
    assert "dltensor" in repr(cap)
    del cap  # never consumed: the destructor frees it


def test_numpy_dtypes(identity):
    for dt, name in [(np.int8, "int8"), (np.uint16, "uint16"), (np.float16, "float16"),
                     (np.float32, "float32"), (np.int64, "int64"), (np.bool_, "bool"),
                     (np.complex64, "complex64")]:
        assert identity(np.zeros(2, dtype=dt)).dtype == name


def test_many_dimensions_and_scalars(identity):
    t = identity(np.zeros((1,) * 10 + (2,)))
    assert t.shape == (1,) * 10 + (2,)
    assert identity(np.float64(3.5)) == 3.5  # a NumPy scalar that is a float subclass
    assert identity(np.int32(7)).shape == ()  # other NumPy scalars: 0-d tensors
    assert identity(np.zeros(())).shape == ()


def test_non_contiguous_strides_kept(identity):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    t = identity(x)
    assert t.strides == (4, 2) and not t.is_contiguous
    assert np.array_equal(np.from_dlpack(t), x)


def test_read_only_flag(identity):
    x = np.arange(3.0)
    x.setflags(write=False)
    t = identity(x)
    assert t.read_only
    assert packfn.Tensor(x).read_only
    assert not packfn.Tensor(np.arange(3.0)).read_only


def test_read_only_dlpack_export():
    """A read-only tensor leaves only as a versioned capsule, which marks it read-only: a legacy
    capsule cannot, and its consumers write through it (found by review; NumPy refuses alike)."""
    t = packfn.Tensor(b"hello world!")
    assert t.read_only
    for kwargs in ({}, {"max_version": (0, 8)}):
        with pytest.raises(BufferError, match="read-only tensor is exported only as a versioned"):
            t.__dlpack__(**kwargs)
    cap = t.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(cap)
    view = np.from_dlpack(t)
    assert not view.flags.writeable and bytes(view) == b"hello world!"
    assert type(packfn.Tensor(np.arange(3.0)).__dlpack__()).__name__ == "PyCapsule"


def test_jax_arrays():
    jnp = pytest.importorskip("jax.numpy")
    import jax

    # on the CPU even where jax's default device is a GPU (tests/python/test_cuda.py has those)
    j = jnp.arange(8, dtype=jnp.float32, device=jax.devices("cpu")[0]).reshape(2, 4)
    t = packfn.Tensor(j)
    assert t.data_ptr == j.unsafe_buffer_pointer()  # no copy
    assert t.shape == (2, 4) and t.dtype == "float32"
    out = np.empty((2, 4), np.float32)
    packfn.get_global("packfn.kernels.rms_norm")(j, out, 1e-5)
    x = np.asarray(j)
    np.testing.assert_allclose(out, x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5), rtol=1e-5)
    back = jax.dlpack.from_dlpack(packfn.Tensor(np.arange(3.0)))
    assert list(np.asarray(back)) == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_jax_arrays_through_dlpack_are_read_only(dtype):
    """A JAX array whose dtype the buffer protocol cannot carry comes through DLPack, and JAX
    answers a max_version request with a legacy capsule, which has no read-only flag: it arrived
    writable, and a kernel that honours pf_tensor_is_read_only wrote into the immutable array
    (review). A JAX array's tensor is read-only whatever the capsule."""
    jnp = pytest.importorskip("jax.numpy")
    import ctypes
    import gc

    import jax

    if not hasattr(jnp, dtype):
        pytest.skip(f"this jax has no {dtype}")
    cpu = jax.devices("cpu")[0]
    j = jnp.arange(4, dtype=jnp.float32, device=cpu).astype(getattr(jnp, dtype))
    raw = np.asarray(j).tobytes()
    t = packfn.Tensor(j)
    assert t.dtype == dtype and t.read_only and t.data_ptr == j.unsafe_buffer_pointer()
    assert packfn.from_dlpack(t).read_only  # a view of it too
    # the kernels refuse a read-only output before looking at its dtype: this refusal is the
    # read-only check (a writable bfloat16 out is refused for its dtype, a TypeError)
    add_n = packfn.get_global("packfn.kernels.add_n")
    x = np.zeros(4, np.float32)
    for out in (j, t):
        with pytest.raises(ValueError, match=r"add_n: argument 1 \(out\): expected a writable "
                                             r"tensor, got a read-only one"):
            add_n(x, out, 1.0)
    assert np.asarray(j).tobytes() == raw
    # the tensor keeps JAX's buffer alive after the array goes
    del j
    gc.collect()
    assert ctypes.string_at(t.data_ptr, len(raw)) == raw


def test_jax_array_capsules_are_read_only_whatever_their_form():
    """Any jax.Array's tensor is read-only: a legacy capsule (wrapped into a versioned one with
    READ_ONLY whose deleter calls the legacy one: called once, after the tensor goes) and a
    versioned one without the flag. A refused import leaves the capsule to its own destructor,
    which calls the producer's deleter once. Here a jax.Array subclass exports a NumPy array's
    capsules, whose deleter drops a reference to the array (counted)."""
    jax = pytest.importorskip("jax")
    import ctypes
    import gc
    import sys

    a = np.arange(3.0)
    form = {}

    class Fake(jax.Array):
        def __init__(self):
            pass

        def __dlpack__(self, stream=None, max_version=None):
            cap = a.__dlpack__(max_version=(1, 0) if form.get("versioned") else None)
            if form.get("bad"):  # ndim -1: refused by packfn's import
                get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
                    ("PyCapsule_GetPointer", ctypes.pythonapi))
                p = get(cap, b"dltensor")
                ctypes.c_int32.from_address(p + 16).value = -1  # DLTensor.ndim
            return cap

        def __dlpack_device__(self):
            return (1, 0)

    f = Fake()
    assert isinstance(f, jax.Array)
    base = sys.getrefcount(a)
    for versioned in (False, True):
        form["versioned"] = versioned
        t = packfn.Tensor(f)
        assert t.read_only and t.data_ptr == a.ctypes.data and t.shape == (3,)
        assert sys.getrefcount(a) == base + 1
        del t
        gc.collect()
        assert sys.getrefcount(a) == base
    form.update(versioned=False, bad=True)
    with pytest.raises(ValueError, match="ndim"):
        packfn.Tensor(f)
    gc.collect()
    assert sys.getrefcount(a) == base
    # a NumPy array is no JAX array: its DLPack import stays writable
    assert not packfn.from_dlpack(_capsule_producer(a.__dlpack__())).read_only


def test_jax_array_capsule_of_another_major_version_is_not_written():
    """A versioned capsule of a major version other than 1 has a layout packfn does not know
    (DLPack: only its deleter may be used): a jax.Array's one had the read-only bit or-ed into
    the 8 bytes at offset 24, flags in 1.x, before the import refused the version (found by
    review). It is refused untouched, and its own destructor calls the deleter once."""
    jax = pytest.importorskip("jax")
    import gc
    import sys

    a = np.arange(3.0)
    seen = {}

    class Fake(jax.Array):
        def __init__(self):
            pass

        def __dlpack__(self, stream=None, max_version=None):
            cap = a.__dlpack__(max_version=(1, 0))
            get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
                ("PyCapsule_GetPointer", ctypes.pythonapi))
            p = get(cap, b"dltensor_versioned")
            ctypes.c_uint32.from_address(p).value = 2  # version.major
            seen["p"] = p
            seen["word"] = ctypes.c_uint64.from_address(p + 24).value
            seen["cap"] = cap  # kept, so its memory can be read after the refusal
            return cap

        def __dlpack_device__(self):
            return (1, 0)

    base = sys.getrefcount(a)
    with pytest.raises(ValueError, match="expected DLPack major version 1, got 2.0"):
        packfn.Tensor(Fake())
    assert ctypes.c_uint64.from_address(seen["p"] + 24).value == seen["word"]
    del seen["cap"]
    gc.collect()
    assert sys.getrefcount(a) == base  # the producer's deleter ran, once


def test_callback_from_partial_and_list_changed_while_converted():
    import functools

    # a callable without __qualname__ (functools.partial) still becomes a Function
    add = packfn.Function(functools.partial(lambda a, b: a + b, 40))
    assert add(2) == 42

    # converting an item may run Python code that changes the list being converted: the
    # conversion works on a snapshot, so it neither crashes nor sees the change
    items = [1, 2, 3]
    data = np.arange(4.0)

    class Shrinks:  # a DLPack producer whose export empties the list
        def __dlpack__(self, *args, **kwargs):
            items.clear()
            return data.__dlpack__(*args, **kwargs)

        def __dlpack_device__(self):
            return data.__dlpack_device__()

    items.append(Shrinks())
    got = packfn.Function(lambda x: len(x))(items)
    assert got == 4 and items == []


def test_refused_buffer_then_dlpack_with_a_cached_type_lookup():
    """An object whose buffer request fails (as CuPy's GPU arrays do) but which has __dlpack__ on
    a base class goes through DLPack, also when CPython's method cache holds the metatype's miss
    for __dlpack__: a type lookup made with the buffer's exception pending used to clear it,
    and packfn returned NULL without an exception (SystemError)."""
    import mmap
    import sys

    class Base(mmap.mmap):
        def __dlpack__(self, stream=None, max_version=None):
            return np.arange(3.0).__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)

    class Sub(Base):
        pass

    m = Sub(-1, 16)
    m.close()  # its buffer request now fails
    for _ in range(3):
        sys._clear_type_cache()
        hasattr(int, "__dlpack__")  # caches the metatype's miss
        assert packfn.Tensor(m).shape == (3,)
    out = np.zeros(3)
    sys._clear_type_cache()
    hasattr(int, "__dlpack__")
    packfn.get_global("packfn.kernels.add_n")(m, out, 1.0)
    assert list(out) == [1.0, 2.0, 3.0]


def test_huge_int_overflow_names_its_bit_length(identity):
    """An int beyond int64 is an OverflowError giving its size in bits: its digits would fill the
    message, and str() of one past 4300 digits raises ValueError itself."""
    for big, bits in [(10**4300, 14285), (-(2**20000), 20001), (2**63, 64)]:
        with pytest.raises(OverflowError, match=f"argument 0: .*int of {bits} bits does not fit "
                                                "in a 64-bit signed integer") as e:
            identity(big)
        assert len(str(e.value)) < 200


def test_dlpack_dl_device_not_a_tuple():
    t = packfn.Tensor(np.zeros(3, np.float32))
    for bad, got in [([1, 0], "got list"), ((1, 0, 0), "got a tuple of another length")]:
        with pytest.raises(TypeError, match=r"__dlpack__: dl_device: expected a tuple "
                                            rf"\(device_type, device_id\), {got}"):
            t.__dlpack__(dl_device=bad)
    assert type(t.__dlpack__(dl_device=(1, 0))).__name__ == "PyCapsule"
    with pytest.raises(BufferError, match="another device"):
        t.__dlpack__(dl_device=(2, 0))


@pytest.mark.parametrize("device, got", [((1.0, 0), "float and int"), ((1, "0"), "int and str"),
                                         ((None, 0), "NoneType and int")])
def test_dlpack_dl_device_items_not_ints(device, got):
    """A dl_device pair that is not two ints raised PyArg_ParseTuple's bare "'float' object
    cannot be interpreted as an integer", naming neither __dlpack__ nor dl_device (found by
    review, as __dlpack_device__'s was before); an int out of range keeps its OverflowError."""
    t = packfn.Tensor(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match=r"^packfn.Tensor.__dlpack__: dl_device: expected a tuple "
                                        rf"\(device_type, device_id\) of two ints, got {got}$"):
        t.__dlpack__(dl_device=device)
    with pytest.raises(OverflowError):
        t.__dlpack__(dl_device=(1, 2**40))


@pytest.mark.parametrize("version, got", [([1, 0], "got list"), ((), "got an empty tuple"),
                                          (1, "got int"), ((1.0, 0), "got a major of type float"),
                                          (("1", 0), "got a major of type str")])
def test_dlpack_max_version_not_a_pair_of_ints(version, got):
    """A max_version that is no tuple raised "max_version must be a tuple (major, minor)", which
    named no function, and one whose major is no int the bare "'float' object cannot be
    interpreted as an integer", which named neither __dlpack__ nor max_version (found by
    review). A major too large for a C long keeps its OverflowError."""
    t = packfn.Tensor(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match=r"^packfn.Tensor.__dlpack__: max_version: expected a "
                                        rf"tuple \(major, minor\) of ints, {got}$"):
        t.__dlpack__(max_version=version)
    with pytest.raises(OverflowError):
        t.__dlpack__(max_version=(2**70, 0))
    assert type(t.__dlpack__(max_version=(1,))).__name__ == "PyCapsule"  # minor optional


def _capsule_producer(cap, device=(1, 0)):
    """An object whose __dlpack__ returns `cap`, a capsule already made, for np.from_dlpack."""

    class Producer:
        def __dlpack__(self, **kwargs):
            return cap

        def __dlpack_device__(self):
            return device

    return Producer()


def _versioned_capsule_fields(cap):
    """(flags, data) of the DLManagedTensorVersioned in a "dltensor_versioned" capsule, read with
    ctypes: version (8 bytes), manager_ctx, deleter, flags (offset 24), then the DLTensor, whose
    data pointer comes first (offset 32)."""
    import ctypes

    get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", ctypes.pythonapi))
    p = get(cap, b"dltensor_versioned")
    return ctypes.c_uint64.from_address(p + 24).value, ctypes.c_void_p.from_address(p + 32).value


IS_COPIED = 1 << 1  # PF_DLPACK_FLAG_IS_COPIED (DLPACK_FLAG_BITMASK_IS_COPIED)
READ_ONLY = 1 << 0


def test_dlpack_copy_true_exports_a_copy():
    """__dlpack__(copy=True) exports a fresh copy, as the array API asks (it raised BufferError,
    so np.from_dlpack(t, copy=True) failed: review)."""
    a = np.arange(6.0).reshape(2, 3)
    t = packfn.Tensor(a)
    b = np.from_dlpack(t, copy=True)
    assert np.array_equal(b, a) and b.ctypes.data != a.ctypes.data and b.flags.writeable
    b[0, 0] = 42.0
    assert a[0, 0] == 0.0
    # strided: the copy is compact, with the same values
    s = packfn.Tensor(a[:, ::2])
    c = np.from_dlpack(s, copy=True)
    assert np.array_equal(c, a[:, ::2]) and c.flags.c_contiguous


@pytest.mark.parametrize("copy", [True, 1, np.True_, "yes"])
def test_dlpack_copy_by_truth_value(copy):
    """copy is read by its truth value: copy=1 and np.True_ were taken for no copy (compared
    with True by identity: review). A versioned copy is flagged IS_COPIED, and is writable."""
    a = np.arange(3.0)
    t = packfn.Tensor(a)
    cap = t.__dlpack__(max_version=(1, 1), copy=copy)
    flags, data = _versioned_capsule_fields(cap)
    assert flags == IS_COPIED and data != a.ctypes.data
    b = np.from_dlpack(_capsule_producer(cap))
    assert np.array_equal(b, a) and b.ctypes.data != a.ctypes.data and b.flags.writeable


@pytest.mark.parametrize("copy", [None, False, 0, np.False_])
def test_dlpack_no_copy_shares_memory(copy):
    a = np.arange(3.0)
    t = packfn.Tensor(a)
    cap = t.__dlpack__(max_version=(1, 1), copy=copy)
    flags, data = _versioned_capsule_fields(cap)
    assert flags == 0 and data == a.ctypes.data
    assert np.from_dlpack(_capsule_producer(cap)).ctypes.data == a.ctypes.data
    legacy = t.__dlpack__(copy=copy)
    assert np.from_dlpack(_capsule_producer(legacy)).ctypes.data == a.ctypes.data
    with pytest.raises(BufferError, match="another device without a copy"):
        t.__dlpack__(dl_device=(2, 0), copy=copy)


def test_dlpack_copy_truth_value_error_propagates():
    class Bad:
        def __bool__(self):
            raise ZeroDivisionError("no truth")

    with pytest.raises(ZeroDivisionError, match="no truth"):
        packfn.Tensor(np.arange(3.0)).__dlpack__(copy=Bad())


def test_dlpack_copy_of_a_read_only_tensor_is_writable():
    """A read-only tensor shares its memory only through a versioned capsule (flagged read-only),
    but its copy is the consumer's: a legacy capsule too, writable, and a versioned one without
    READ_ONLY."""
    a = np.arange(4.0)
    a.setflags(write=False)
    t = packfn.Tensor(a)
    assert t.read_only
    with pytest.raises(BufferError, match="read-only tensor is exported only as a versioned"):
        t.__dlpack__()
    # legacy: NumPy makes every legacy import read-only (the form cannot say), so the copy is
    # read back through packfn, which sees the tensor it exported, writable
    cap = t.__dlpack__(copy=True)
    assert "dltensor" in repr(cap) and "versioned" not in repr(cap)
    back = packfn.from_dlpack(_capsule_producer(cap))
    assert not back.read_only and back.data_ptr != a.ctypes.data
    assert np.array_equal(np.from_dlpack(back), a)
    cap = t.__dlpack__(max_version=(1, 0), copy=True)
    flags, data = _versioned_capsule_fields(cap)
    assert flags == IS_COPIED and data != a.ctypes.data
    flags, data = _versioned_capsule_fields(t.__dlpack__(max_version=(1, 0)))
    assert flags == READ_ONLY and data == a.ctypes.data
    c = np.from_dlpack(t, copy=True)
    assert c.flags.writeable and c.ctypes.data != a.ctypes.data


def test_dlpack_copy_on_its_own_device():
    """dl_device naming the tensor's own device with copy=True copies (there); a copy is also
    made through a packfn round trip, which sees a new tensor."""
    a = np.arange(5, dtype=np.int32)
    t = packfn.Tensor(a)
    cap = t.__dlpack__(max_version=(1, 1), dl_device=(1, 0), copy=True)
    flags, data = _versioned_capsule_fields(cap)
    assert flags == IS_COPIED and data != a.ctypes.data
    back = packfn.from_dlpack(_capsule_producer(cap))
    assert back.data_ptr == data and not back.read_only and back != t
    assert np.array_equal(np.from_dlpack(back), a)
    b = np.from_dlpack(t, copy=True, device="cpu")
    assert np.array_equal(b, a) and b.ctypes.data != a.ctypes.data


def _mmap_producer():
    """A type whose objects have both routes: the buffer protocol (an mmap of 16 bytes: uint8,
    shape (16,)) and DLPack (three float64), and say where they are by a per-object device.
    Closing one makes its buffer request fail, as a GPU array's or a bfloat16 array's does."""
    import mmap

    class Producer(mmap.mmap):
        device = (1, 0)

        def __dlpack__(self, stream=None, max_version=None):
            return np.arange(3.0).__dlpack__()

        def __dlpack_device__(self):
            return self.device

    return Producer


def test_cpu_object_refusing_its_buffer_does_not_mark_its_type():
    """A CPU object whose buffer request fails (a bfloat16 or datetime64 array) goes through
    DLPack, and its type's other objects keep the buffer protocol."""
    Producer = _mmap_producer()
    refusing = Producer(-1, 16)
    refusing.close()
    assert packfn.Tensor(refusing).shape == (3,)  # DLPack
    ok = Producer(-1, 16)
    assert packfn.Tensor(ok).shape == (16,) and packfn.Tensor(ok).dtype == "uint8"  # buffer
    assert packfn._packfn._echo()(ok).shape == (16,)  # a call's stack route too


def test_gpu_object_refusing_its_buffer_decides_per_object():
    """A type whose object on a GPU refused its buffer sends its GPU objects to DLPack directly
    from then on, and its CPU objects still to the buffer protocol."""
    Producer = _mmap_producer()
    gpu = Producer(-1, 16)
    gpu.device = (2, 0)  # what it says; its __dlpack__ gives CPU memory, which nothing reads
    gpu.close()
    assert packfn.Tensor(gpu).shape == (3,)
    cpu = Producer(-1, 16)
    assert packfn.Tensor(cpu).shape == (16,) and packfn.Tensor(cpu).dtype == "uint8"
    assert packfn._packfn._echo()(cpu).shape == (16,)
    assert packfn.Tensor(gpu).shape == (3,)


def test_numpy_and_jax_arrays_without_buffer_keep_the_others_fast_and_read_only():
    """The reviewer's case: a bfloat16 or datetime64 array, whose buffer export fails, no longer
    sends every later NumPy array through DLPack (3-4x slower, BufferError for a byte-swapped
    array instead of TypeError) nor makes JAX arrays lose their read-only flag. In a child
    process: before the fix, the failure marked ndarray for the process."""
    import subprocess
    import sys

    code = (
        "import numpy as np, packfn\n"
        "rms = packfn.get_global('packfn.kernels.rms_norm')\n"
        "x = np.ones((2, 4), np.float32); out = np.empty_like(x)\n"
        "try: rms(np.zeros((2, 4), 'M8[s]'), out, 1e-5)\n"
        "except (BufferError, TypeError): pass\n"
        "try: rms(x.astype('>f4'), out, 1e-5)\n"
        "except TypeError as e: assert 'buffer format' in str(e), e\n"
        "ro = x.copy(); ro.setflags(write=False)\n"
        "assert packfn.Tensor(ro).read_only\n"
        "try:\n"
        "    import jax, jax.numpy as jnp\n"
        "except ImportError:\n"
        "    jnp = None\n"
        "if jnp is not None:\n"
        "    cpu = jax.devices('cpu')[0]\n"
        "    packfn.Tensor(jnp.ones(8, jnp.bfloat16, device=cpu))\n"
        "    assert packfn.Tensor(jnp.zeros(8, jnp.float32, device=cpu)).read_only\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_str_and_bytes_subclasses_are_strings(identity):
    """Subclasses of str and bytes (enum.StrEnum, numpy.str_, numpy.bytes_) travel as strings and
    bytes: str subclasses were refused and bytes subclasses became uint8 tensors (review)."""
    import enum

    class Color(str, enum.Enum):
        RED = "red"

    class B(bytes):
        pass

    assert identity(np.str_("a numpy string, long enough")) == "a numpy string, long enough"
    assert identity(Color.RED) == "red"
    assert identity(B(b"abc")) == b"abc" and identity(np.bytes_(b"xyz" * 5)) == b"xyz" * 5
    m = identity({B(b"key"): 1})
    assert m.get(b"key") == 1


def test_map_lookups_compare_keys_as_python_does():
    """Keys are looked up as Python compares them: True, 1.0 and numpy.int64(1) find the key 1;
    a float no int equals is absent (get() gives the default, `in` False, [] KeyError). They
    raised TypeError, and numpy integers missed silently after a first fix (review)."""
    echo = packfn.register_global("test.echo_map", lambda x: x, override=True)
    try:
        m = echo({1: "a"})
        for same in (1, True, 1.0, np.int64(1), np.int32(1), np.uint8(1)):
            assert m[same] == "a" and same in m and m.get(same) == "a", same
        assert m.get(1.5, "d") == "d" and 1.5 not in m and False not in m
        with pytest.raises(KeyError):
            m[2.5]
        with pytest.raises(KeyError):
            m[np.int64(2)]
    finally:
        packfn.remove_global("test.echo_map")


def test_register_global_taken_name_says_override():
    packfn.register_global("test.taken", lambda: 1, override=True)
    try:
        with pytest.raises(ValueError, match=r"pass override=True to replace it"):
            packfn.register_global("test.taken", lambda: 2)
    finally:
        packfn.remove_global("test.taken")


def test_map_lookups_of_keys_no_int64_equals_are_absent():
    """An int beyond int64 and an object packfn cannot pass equal no Map key: `in` is False,
    get() gives the default, [] raises KeyError, as a dict answers (they raised OverflowError and
    TypeError); a whole float in [9.2e18, 2**63) finds the int it equals (it was never found),
    and -2.0**63 finds the least int64 (found by review)."""
    echo = packfn._packfn._echo()
    keys = {"a": 1, 9210000000000000000: 4, -2**63: 5}
    m = echo(keys)
    for absent in (2**70, -2**70, 2**63, object(), (1, 2), 1.5):
        assert absent not in m and m.get(absent, "d") == "d", absent
        with pytest.raises(KeyError):
            m[absent]
    assert 9.21e18 in m and m.get(9.21e18) == 4 and m[9.21e18] == 4
    assert -2.0**63 in m and m[-2.0**63] == 5
    assert 2.0**63 not in m and m.get(2.0**63) is None
    # numbers of other types find the int they equal, as in a dict (they were absent)
    import fractions, decimal
    two = {2: "two", 1: "one"}
    m2 = echo(two)
    for k in (fractions.Fraction(2), decimal.Decimal(2), 2 + 0j, np.float32(2.0),
              np.float16(2.0), np.int8(2), np.bool_(True)):
        assert (k in m2) == (k in two) and m2.get(k) == two.get(k), k
    for k in (fractions.Fraction(5, 2), decimal.Decimal("NaN"), decimal.Decimal("Infinity"),
              2 + 1j, np.float32("nan"), complex(float("inf"), 0)):
        assert k not in m2 and m2.get(k, "d") == "d", k
    # an unhashable key, or one whose __hash__ raises, raises as in a dict

    class BadHash:
        def __hash__(self):
            raise ValueError("no hash")

    for bad, kind in (([1], TypeError), ({}, TypeError), (BadHash(), ValueError)):
        with pytest.raises(kind):
            {}.get(bad)
        with pytest.raises(kind):
            m.get(bad)
        with pytest.raises(kind):
            bad in m


def test_map_lookup_of_a_str_that_stands_for_no_bytes_is_absent():
    """A str holding a lone surrogate outside U+DC80..U+DCFF ("\\ud800") stands for no bytes,
    so no Map key (text from C) equals it: `in` is False, get() gives the default and [] raises
    KeyError, as a dict answers (they raised UnicodeEncodeError); keys decoded from bytes that
    are no UTF-8 are still found."""
    m = packfn._packfn._echo()({"a": 1, "caf\udce9": 2, "a longer key, past 7 bytes": 3})
    for absent in ("\ud800", "\ud800 a longer key, past 7 bytes", "a\udfff"):
        assert absent not in m and m.get(absent, "d") == "d", absent
        with pytest.raises(KeyError):
            m[absent]
    assert m["caf\udce9"] == 2 and m["a longer key, past 7 bytes"] == 3
    # passing such a str to a function is still refused (docs/python.md)
    with pytest.raises(UnicodeEncodeError):
        packfn._packfn._echo()("\ud800")


def _owned_str_bytes(value):
    """The bytes of an owned string value a C caller got (small string 11, string object 65),
    as pf_any_as_str reads them."""
    from _cabi import ByteArray

    if value.type_index == 11:  # the length in the word after the type index, the text inline
        return ctypes.string_at(ctypes.addressof(value) + 8, value.pad)
    assert value.type_index == 65, value.type_index
    cell = ByteArray.from_address(value.v + 24)  # the cell after the 24-byte header
    return ctypes.string_at(cell.data, cell.size)


def test_strings_no_utf8_from_c_go_back_as_they_came():
    """A str decoded from C text that is no UTF-8 (its bytes 0x80-0xFF as U+DC80-U+DCFF:
    surrogateescape) goes back to C as the same bytes: a callback returning the string it was
    given failed with UnicodeEncodeError, and so did looking up a Map key read with keys()
    (review). Another lone surrogate stands for no byte and is still refused."""
    from _cabi import Any, libpackfn

    lib = libpackfn()
    seen = []

    def give_back(s):
        seen.append(s)
        return s

    def raise_it(s):
        raise ValueError(s)

    def call(fn, raw):
        buf = ctypes.create_string_buffer(raw)
        args = (Any * 1)(Any(8, 0, ctypes.cast(buf, ctypes.c_void_p).value))
        res = Any()
        rc = lib.pf_function_call(ctypes.c_void_p(fn._address), args, 1, ctypes.byref(res))
        return rc, res

    back, raiser = packfn.Function(give_back), packfn.Function(raise_it)
    for raw in (b"caf\xe9 latin-1 text", b"\xff", b"ok \x80\xfe", b"\xc3"):
        rc, res = call(back, raw)
        assert rc == 0 and seen[-1] == raw.decode("utf-8", "surrogateescape")
        assert _owned_str_bytes(res) == raw
        if res.type_index >= 64:
            lib.pf_object_release(ctypes.c_void_p(res.v))
        rc, _ = call(raiser, raw)  # the message too (it was "<unprintable exception>")
        err = lib.pf_error_take()
        assert rc != 0 and lib.pf_error_message(err) == raw
        lib.pf_object_release(err)
    echo = packfn._packfn._echo()
    for s in ("caf\udce9 key, long", "\udce9", "a\0\udcff with a NUL"):
        assert echo(s) == s
        m = echo({s: 1, "x": 2})
        (k, _) = m.keys()
        assert k == s and m[k] == 1 and k in m and m.get(k) == 1
    # a Map a C caller built with a key that is no UTF-8, read by a callback
    m = ctypes.c_void_p()
    assert lib.pf_map_create(ctypes.byref(m)) == 0
    raw = ctypes.create_string_buffer(b"caf\xe9 key")
    key, value = Any(8, 0, ctypes.cast(raw, ctypes.c_void_p).value), Any(1, 0, 42)
    assert lib.pf_map_set(m, ctypes.byref(key), ctypes.byref(value)) == 0
    found = []
    reader = packfn.Function(lambda mp: found.extend((k, mp[k], k in mp) for k in mp.keys()))
    args, res = (Any * 1)(Any(72, 0, m.value)), Any()
    assert lib.pf_function_call(ctypes.c_void_p(reader._address), args, 1, ctypes.byref(res)) == 0
    lib.pf_object_release(m)
    assert found == [("caf\udce9 key", 42, True)]
    for bad in ("\ud800", "a long text, \udc80 then \ud800", "\udbff\udfff"):
        with pytest.raises(UnicodeEncodeError, match="surrogates not allowed"):
            echo(bad)
        rc, _ = call(packfn.Function(lambda s, bad=bad: bad), b"x")
        err = lib.pf_error_take()
        assert rc != 0 and lib.pf_error_kind(err) == b"UnicodeEncodeError"
        lib.pf_object_release(err)


def test_map_keys_from_a_dict_are_converted_as_lookups_compare_them(identity):
    """A dict key that Python compares as an int (a bool, numpy.int64, anything with __index__)
    becomes the int key it equals, as lookups take it: a numpy.int64 key became a 0-d tensor key
    that its own lookup never found, and True was refused (review)."""
    import enum

    class E(enum.IntEnum):
        A = 5

    echo = packfn._packfn._echo()
    for make in (echo, identity):
        m = make({np.int64(1): "a", np.uint8(2): "b", True: "t", E.A: "e", "s": "x"})
        assert m.keys() == [1, 2, 5, "s"]  # True and np.int64(1) are one key, as in the dict
        for k, v in ((np.int64(1), "t"), (1, "t"), (True, "t"), (2, "b"), (np.int32(2), "b"),
                     (5, "e"), (E.A, "e"), ("s", "x")):
            assert m[k] == v and k in m and m.get(k) == v, k
        assert all(type(k) is int for k in m.keys() if k != "s")
        assert make({False: 0})[0] == 0
    with pytest.raises(TypeError):
        echo({1.5: "float keys are still refused"})

    class HashableTensor:
        """A tensor type that is hashable and has __index__ for one-element integer values
        only (as torch.Tensor): it stays a tensor key."""

        def __init__(self):
            self.array = np.arange(3.0)

        def __index__(self):
            raise TypeError("only integer tensors of a single element can be an index")

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    (key,) = echo({HashableTensor(): "t"}).keys()
    assert isinstance(key, packfn.Tensor) and np.from_dlpack(key).tolist() == [0.0, 1.0, 2.0]


def test_array_index_and_count_as_a_sequence():
    """Array is registered as a collections.abc.Sequence, so it has Sequence's index() and
    count() (it had neither; review), with list's bounds: negative ones from the end, ones past
    the ends clamped, ValueError for a value absent from [start, stop)."""
    items = [1, 2, 3, 2, "x", [1], None]
    a = packfn._packfn._echo()(items)
    for args in ((2,), (2, 2), (2, -4), (2, -100), (2, 0, -3), (2, 0, 2**100), (2, -(2**100)),
                 ("x",), ([1],), (None,), (True,), (2.0,), (np.int64(3),)):
        assert a.index(*args) == items.index(*args), args
    for args in ((2, 0, 1), (9,), (2, 4), (2, -3), (2, 4, 100), ("x", 0, -3), (2, 100)):
        with pytest.raises(ValueError, match="is not in packfn.Array"):
            a.index(*args)
    for v in (2, 1, True, [1], None, 9, "x"):
        assert a.count(v) == items.count(v), v
    with pytest.raises(TypeError):
        a.index(1, 1.5)
    with pytest.raises(TypeError):
        a.index()
    empty = packfn._packfn._echo()([])
    assert empty.count(1) == 0
    with pytest.raises(ValueError):
        empty.index(1)


def test_array_negative_index_out_of_range_names_the_index_given():
    """a[-4] on a 3-item Array names -4, the index the caller gave (it said "index -1")."""
    a = packfn._packfn._echo()([1, 2, 3])
    for i in (-4, -10):
        with pytest.raises(IndexError, match=rf"index {i} is out of range for an array of size 3"):
            a[i]
    with pytest.raises(IndexError, match=r"index 3 is out of range for an array of size 3"):
        a[3]
    assert a[-3] == 1


def test_map_with_a_short_insertion_list_raises_instead_of_handing_out_null():
    """A dense map whose insertion-order list ends before its size (a foreign writer's damaged
    table: pf_map_iter_next ends the walk there) made keys(), values(), items(), iter() and
    repr() return lists with NULL slots, which crashed the interpreter when read (review)."""
    echo = packfn._packfn._echo()
    m = echo({i: i * 10 for i in range(8)})  # 8 entries: the dense form
    # pf__mapcell_t: data at 24, iter_head at 64; items after 16 metadata bytes per block of 16
    data = ctypes.c_void_p.from_address(m._address + 24).value
    head = ctypes.c_uint64.from_address(m._address + 64).value
    item = data + (head // 16) * 16 * 49 + 16 + (head % 16) * 48
    nxt = ctypes.c_uint64.from_address(item + 40)  # the head entry's next link
    saved = nxt.value
    nxt.value = 2**64 - 1  # the list ends after one entry
    try:
        for read in (m.keys, m.values, m.items, lambda: list(iter(m)), lambda: repr(m)):
            with pytest.raises(ValueError, match=r"expected 8 entries.*got 1"):
                read()
    finally:
        nxt.value = saved
    assert sorted(m.keys()) == list(range(8))


def test_map_keys_from_numbers_without_index_are_found_by_themselves(identity):
    """A dict key that is a number without __index__ and is no float (numpy.bool_, numpy.float32,
    numpy.float16, fractions.Fraction) went through the buffer protocol and became a 0-d tensor
    key (numpy's), equal to nothing: not even the key it came from found it, though lookups
    take such a number as the int it equals (found by review). It becomes that int, as
    np.int64 and True do; one that equals no int64 is refused, as float keys are."""
    import fractions

    echo = packfn._packfn._echo()
    for make in (echo, identity):
        for k, want in ((np.bool_(True), 1), (np.bool_(False), 0), (np.float32(2.0), 2),
                        (np.float16(-3.0), -3), (fractions.Fraction(4), 4)):
            m = make({k: "v"})
            assert m.keys() == [want] and type(m.keys()[0]) is int, k
            assert m[k] == "v" and k in m and m[want] == "v", k
        for bad in (np.float32(2.5), np.float32("nan"), fractions.Fraction(1, 3)):
            with pytest.raises(TypeError, match="Map key"):
                make({bad: "v"})


def test_map_keys_of_numpy_complex64_compare_without_a_warning():
    """A NumPy complex64 (no subclass of complex, unlike complex128) is looked up, and made a
    key, as the number it is: it went through int(), which emits ComplexWarning (discarding the
    imaginary part), so under warnings-as-errors `in`, get() and a dict holding it raised
    where a dict answers (found by review)."""
    import warnings
    echo = packfn._packfn._echo()
    two = {2: "two", 1: "one"}
    m = echo(two)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in (np.complex64(2), np.complex64(2 + 1j), np.complex64(2.5),
                  np.clongdouble(1)):
            assert (k in m) == (k in two) and m.get(k, "d") == two.get(k, "d"), k
        assert echo({np.complex64(1): "v"})[1] == "v"
        with pytest.raises(TypeError, match="equals no int64"):
            echo({np.complex64(1 + 1j): "v"})
