"""packfn: call packfn functions (C, C++ and CUDA kernels on the TVM-FFI ABI) from Python.

    import numpy as np, packfn
    x = np.random.rand(4, 8).astype(np.float32)
    packfn.get_global("packfn.kernels.rms_norm")(x, x, 1e-5)   # in place, no copy

Importing the package loads libpackfn and libpackfn_kernels (registered as packfn.kernels.*).
"""
from __future__ import annotations

import collections.abc as _abc
import difflib as _difflib

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


def get_global(name: str) -> Function:
    """The global function `name`, a packfn.Function.

    A missing name raises KeyError with the C runtime's message and the closest names."""
    try:
        return _get_global(name)
    except KeyError as e:
        close = _difflib.get_close_matches(name, list_globals(), n=3, cutoff=0.6)
        if not close:
            raise
        msg = f"{e.args[0] if e.args else name}; did you mean {', '.join(map(repr, close))}?"
        raise KeyError(msg) from None


def from_dlpack(obj) -> Tensor:
    """A packfn.Tensor over the memory of `obj` (DLPack or buffer protocol), without a copy."""
    return Tensor(obj)
