"""Binds libpackfn from Python with ctypes alone, through the exported copies of the inline API:
creates a function from a Python callback, calls it with pf_function_call, reads the result
with pf_any_as_int and drops it with pf_object_release. usage: ctypes_inline.py libpackfn.so"""
import ctypes
import sys


class Any(ctypes.Structure):
    _fields_ = [("type_index", ctypes.c_int32), ("zero_padding", ctypes.c_uint32),
                ("v_int64", ctypes.c_int64)]


SAFE_CALL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(Any), ctypes.c_int32,
                             ctypes.POINTER(Any))


def main(path):
    lib = ctypes.CDLL(path)
    lib.pf_any_int.restype = Any
    lib.pf_any_int.argtypes = [ctypes.c_int64]
    lib.pf_function_create_direct.argtypes = [SAFE_CALL, ctypes.POINTER(ctypes.c_void_p)]
    lib.pf_function_call.argtypes = [ctypes.c_void_p, ctypes.POINTER(Any), ctypes.c_int32,
                                     ctypes.POINTER(Any)]
    lib.pf_any_as_int.argtypes = [ctypes.POINTER(Any), ctypes.POINTER(ctypes.c_int64)]
    lib.pf_object_release.argtypes = [ctypes.c_void_p]
    lib.pf_object_strong_count.argtypes = [ctypes.c_void_p]
    lib.pf_object_strong_count.restype = ctypes.c_uint32
    lib.pf_global_get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.pf_global_set.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    lib.pf_global_remove.argtypes = [ctypes.c_char_p]

    @SAFE_CALL
    def add(self, args, num_args, result):
        result[0] = lib.pf_any_int(args[0].v_int64 + args[1].v_int64)
        return 0

    fn = ctypes.c_void_p()
    assert lib.pf_function_create_direct(add, ctypes.byref(fn)) == 0
    args = (Any * 2)(lib.pf_any_int(40), lib.pf_any_int(2))
    result = Any()
    assert lib.pf_function_call(fn, args, 2, ctypes.byref(result)) == 0
    value = ctypes.c_int64()
    assert lib.pf_any_as_int(ctypes.byref(result), ctypes.byref(value)) == 0
    assert value.value == 42, value.value
    assert lib.pf_global_set(b"ctypes.add", fn, 0) == 0
    got = ctypes.c_void_p()
    assert lib.pf_global_get(b"ctypes.add", ctypes.byref(got)) == 0 and got.value == fn.value
    assert lib.pf_object_strong_count(fn) == 3
    lib.pf_object_release(got)
    assert lib.pf_global_remove(b"ctypes.add") == 0
    assert lib.pf_object_strong_count(fn) == 1
    lib.pf_object_release(fn)
    print("ctypes: pf_function_call, pf_global_get and pf_object_release bound and called")


if __name__ == "__main__":
    main(sys.argv[1])
