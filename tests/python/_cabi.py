"""libpackfn's C API through ctypes, for tests that act as a C caller would: the library the
packfn package loaded (a second dlopen of its file returns the same mapping), with the
signatures the tests use, and the ABI's Any and byte-array structs."""
import ctypes
import os

import packfn


class Any(ctypes.Structure):
    _fields_ = [("type_index", ctypes.c_int32), ("pad", ctypes.c_uint32), ("v", ctypes.c_uint64)]


class ByteArray(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]


def libpackfn() -> ctypes.CDLL:
    lib = ctypes.CDLL(os.path.join(os.path.dirname(packfn.__file__), "libpackfn.so"))
    lib.pf_error_take.restype = ctypes.c_void_p
    lib.pf_error_kind.restype = ctypes.c_char_p
    lib.pf_error_kind.argtypes = [ctypes.c_void_p]
    lib.pf_error_message.restype = ctypes.c_char_p
    lib.pf_error_message.argtypes = [ctypes.c_void_p]
    lib.pf_object_release.argtypes = [ctypes.c_void_p]
    lib.pf_function_call.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                     ctypes.c_void_p]
    return lib
