"""Views a call lends and what may outlive it: a function made by packfn's runtime gets a NumPy
array as a DLTensor described on the C stack, borrowed for the call; a function that may keep
its arguments gets tensor objects owning their buffers; a DLTensor* a call returns becomes a
tensor keeping its argument alive, or is refused."""
import gc
import os
import weakref

import numpy as np
import pytest

import packfn
from packfn import _packfn


def test_functions_made_by_packfn_take_the_stack_view(rms_norm):
    assert rms_norm._owned_args is False
    assert _packfn._noop()._owned_args is False
    lib = os.path.join(os.path.dirname(_packfn.__file__), "libpackfn_kernels.so")
    assert packfn.load_module(lib).rms_norm._owned_args is False


def test_python_callbacks_get_owned_tensors(identity):
    assert identity._owned_args is True
    assert packfn.get_global("test.identity")._owned_args is True


def test_dltensor_result_keeps_its_argument_alive():
    """A function returning the DLTensor* it was lent gives a tensor that holds the array."""
    echo = _packfn._echo()
    x = np.arange(1024, dtype=np.float32)
    alive = weakref.ref(x)
    r = echo(x)
    assert isinstance(r, packfn.Tensor)
    assert r.data_ptr == x.ctypes.data and r.shape == (1024,) and not r.read_only
    del x
    gc.collect()
    assert alive() is not None  # r holds the array's buffer
    np.testing.assert_array_equal(np.from_dlpack(r), np.arange(1024, dtype=np.float32))
    r = None
    gc.collect()
    assert alive() is None  # and lets it go with itself


def test_dltensor_result_of_which_argument():
    echo = _packfn._echo()
    arrays = [np.full(4, i, np.float64) for i in range(10)]  # past the 8 stack slots
    for n in (2, 10):
        r = echo(*arrays[:n])
        assert r.data_ptr == arrays[n - 1].ctypes.data
        assert list(np.from_dlpack(r)) == [n - 1.0] * 4
    ro = np.arange(3.0)
    ro.setflags(write=False)  # passed as a tensor object: the same object comes back
    r = echo(1, ro)
    assert r.read_only and r.data_ptr == ro.ctypes.data


def test_dltensor_result_that_no_argument_owns_is_refused():
    echo = _packfn._echo()
    with pytest.raises(TypeError, match=r"echo: result: expected a tensor object, got a borrowed "
                                        r"DLTensor\* that is none of its arguments"):
        echo()


def test_view_results_converted_while_the_arguments_live():
    """A byte array or string view a call returns may point into the call's temporaries (more
    than 8 arguments are converted into heap memory freed after the call)."""
    echo = _packfn._echo()
    data = b"a bytes value longer than seven bytes"
    assert echo(*range(9), data) == data
    text = "a long string with a NUL\0 inside"
    assert echo(*range(9), text) == text


def test_null_object_result_is_refused_whatever_its_type():
    """A C function returning an object value holding NULL raises the ValueError of any value
    holding NULL, whatever the object's type index: a Function, Tensor, Array, Map or Module
    (68, 70-73) at NULL came back as None, while a str, Shape or List at NULL raised (review)."""
    import ctypes

    from _cabi import Any, libpackfn

    lib = libpackfn()
    call_t = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(Any), ctypes.c_int32,
                              ctypes.POINTER(Any))
    type_index = [0]

    @call_t
    def null_object(self, args, n, result):
        result[0].type_index, result[0].pad, result[0].v = type_index[0], 0, 0
        return 0

    lib.pf_function_create.argtypes = [ctypes.c_void_p, call_t, ctypes.c_void_p, ctypes.c_void_p]
    fn = ctypes.c_void_p()
    assert lib.pf_function_create(None, null_object, None, ctypes.byref(fn)) == 0
    lib.pf_global_set.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    assert lib.pf_global_set(b"test.null_object", fn, 1) == 0
    lib.pf_object_release(fn)
    try:
        f = packfn.get_global("test.null_object")
        for index in range(64, 77):
            type_index[0] = index
            with pytest.raises(ValueError, match=rf"^packfn: a \w+ value \(type index {index}\) "
                                                 r"with a NULL pointer$"):
                f()
    finally:
        packfn.remove_global("test.null_object")


def test_null_dltensor_result_is_refused_whatever_the_arguments():
    """A C function returning a DLTensor* at NULL raises the ValueError of any value holding
    NULL: it returned the first list or function argument (pf_tensor_dltensor is NULL for
    objects that are no tensors; review), or a TypeError saying no argument describes it."""
    import ctypes

    from _cabi import Any, libpackfn

    lib = libpackfn()
    call_t = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(Any), ctypes.c_int32,
                              ctypes.POINTER(Any))

    @call_t
    def null_view(self, args, n, result):
        result[0].type_index, result[0].pad, result[0].v = 7, 0, 0
        return 0

    lib.pf_function_create.argtypes = [ctypes.c_void_p, call_t, ctypes.c_void_p, ctypes.c_void_p]
    fn = ctypes.c_void_p()
    assert lib.pf_function_create(None, null_view, None, ctypes.byref(fn)) == 0
    lib.pf_global_set.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    assert lib.pf_global_set(b"test.null_view", fn, 1) == 0
    lib.pf_object_release(fn)
    try:
        f = packfn.get_global("test.null_view")
        x = np.arange(3.0)
        for args in ((), ([1, 2],), (f,), ({"k": 1}, x), (packfn.Tensor(x),), (x,) * 9):
            with pytest.raises(ValueError, match=r"^packfn: a DLTensor\* value \(type index 7\) "
                                                 r"with a NULL pointer$"):
                f(*args)
    finally:
        packfn.remove_global("test.null_view")


def test_callback_keeps_a_copy_of_a_lent_tensor_as_the_docs_say():
    """A C caller lends a callback a DLTensor* for the call only; docs/python.md tells the
    callback to copy it to keep it. It said np.array(t), which makes a 0-d object array holding
    the tensor, not a copy (packfn.Tensor has no __array__ or buffer export): what was kept
    still read the lent memory (found by review). The advice is np.from_dlpack(t).copy(), which
    this checks; with np.array(t) in its place the test fails."""
    import ctypes

    from _cabi import Any, libpackfn

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                    ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                    ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                    ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]

    lent = np.arange(4, dtype=np.float32)
    shape = (ctypes.c_int64 * 1)(4)
    dl = DLTensor(lent.ctypes.data, 1, 0, 1, 2, 32, 1, shape, None, 0)
    kept = []
    keep = packfn.Function(lambda t: kept.append(np.from_dlpack(t).copy()))
    arg = Any(7, 0, ctypes.addressof(dl))  # PF_TYPE_DLTENSOR_PTR: a view, lent for the call
    result = Any()
    lib = libpackfn()
    assert lib.pf_function_call(ctypes.c_void_p(keep._address), ctypes.byref(arg), 1,
                                ctypes.byref(result)) == 0
    lent[:] = -1  # the caller reuses its memory once the call returned
    assert isinstance(kept[0], np.ndarray) and kept[0].dtype == np.float32
    assert kept[0].tolist() == [0.0, 1.0, 2.0, 3.0]
