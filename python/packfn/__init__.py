"""packfn: call packfn functions (C, C++ and CUDA kernels on the TVM-FFI ABI) from Python.

    import numpy as np, packfn
    x = np.random.rand(4, 8).astype(np.float32)
    packfn.get_global("packfn.kernels.rms_norm")(x, x, 1e-5)   # in place, no copy

Importing the package loads libpackfn and libpackfn_kernels (registered as packfn.kernels.*).
"""
from __future__ import annotations

import collections.abc as _abc

from ._packfn import (  # noqa: F401  (re-exported)
    Array,
    Error,
    Function,
    Map,
    Module,
    Object,
    Tensor,
    __version__,
    abi_version,
    kernels_cuda_error,
    kernels_have_cuda,
    list_globals,
    load_module,
    register_global,
    remove_global,
    system_module,
)
from ._packfn import _get_global

__all__ = [
    "Array",
    "Error",
    "Function",
    "Map",
    "Module",
    "Object",
    "Tensor",
    "error_class",
    "from_dlpack",
    "get_global",
    "list_globals",
    "load_module",
    "register_global",
    "remove_global",
    "system_module",
]


_abc.Sequence.register(Array)
_abc.Mapping.register(Map)


# Error kinds packfn raises that TVM-FFI's Python does not map to built-in exceptions itself:
# registered with it so they arrive as the same exceptions both ways.
_KINDS_FOR_TVM_FFI = {"NotImplementedError": NotImplementedError, "OSError": OSError}


def _joined() -> None:
    """Joins (pf_tvm_ffi_join) and tells tvm_ffi's error mapping packfn's other kinds."""
    if not _packfn._tvm_ffi_join():
        return
    import tvm_ffi.error

    for kind, cls in _KINDS_FOR_TVM_FFI.items():
        if kind not in tvm_ffi.error.core.ERROR_NAME_TO_TYPE:
            tvm_ffi.error.register_error(kind, cls)


def _is_join_hook(finder) -> bool:
    """Whether a sys.meta_path entry is the join hook of a run of this package (its class's
    mark: a reload defines the class again)."""
    return getattr(type(finder), "_packfn_join_hook", False) is True


def _join_tvm_ffi() -> None:
    """Joins TVM-FFI's runtime now if tvm_ffi is imported, else right after its import.

    With both in one process, packfn and TVM-FFI share one error slot, type registry and global
    table (docs/interop.md). libtvm_ffi is loaded by `import tvm_ffi`, so when packfn is imported
    first, an import hook joins once tvm_ffi's module has run. The hook stays in sys.meta_path
    until then: a probe such as importlib.util.find_spec("tvm_ffi") also asks it for a spec, and
    throws that spec away; each spec it returns runs the join after the module, and the first
    one executed removes the hook. A reload of the package (importlib.reload) replaces the hook
    the earlier run left: with two, each asked the other for the spec, which asked the first
    again, and `import tvm_ffi` failed with RecursionError (review)."""
    import sys

    sys.meta_path[:] = [f for f in sys.meta_path if not _is_join_hook(f)]
    if "tvm_ffi" in sys.modules:
        _joined()
        return
    import importlib.abc

    class _JoinAfterImport(importlib.abc.MetaPathFinder):
        _packfn_join_hook = True  # what a reload finds its predecessor by (another class)

        def find_spec(self, name, path=None, target=None):
            if name != "tvm_ffi":
                return None
            spec = None
            for finder in list(sys.meta_path):  # the others, in order, as the import system
                find = getattr(finder, "find_spec", None)
                if _is_join_hook(finder) or find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    break
            loader = spec.loader if spec is not None else None
            if loader is None or not hasattr(loader, "exec_module"):
                return spec
            run = loader.exec_module
            hook = self

            def exec_module(module):
                run(module)
                try:
                    sys.meta_path.remove(hook)
                except ValueError:
                    pass
                _joined()

            loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _JoinAfterImport())


from . import _packfn  # noqa: E402

_join_tvm_ffi()


def get_global(name: str) -> Function:
    """The global function `name`, a packfn.Function.

    A missing name raises KeyError worded as the C runtime's pf_global_call, with the closest
    registered name (pf_global_suggest)."""
    return _get_global(name)


def from_dlpack(obj) -> Tensor:
    """A packfn.Tensor over the memory of `obj` (DLPack or buffer protocol), without a copy."""
    return Tensor(obj)



def error_class(kind: str) -> type:
    """The exception class a packfn error of `kind` raises: the built-in class a kind names
    (error_class("TypeError") is TypeError), else the packfn.Error subclass of that kind, made
    now if no error of it was raised yet (within the 1024 kinds that get a class; past them, and
    for a kind that is no identifier, packfn.Error itself). So that an except clause can name a
    kind before its first error: `except packfn.error_class("CudaError"):`."""
    if not isinstance(kind, str):
        raise TypeError(f"error_class: expected a str, got {type(kind).__name__}")
    return _packfn._kind_class(kind)
