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

    A missing name raises KeyError worded as the C runtime's pf_global_call, with the closest
    registered name (pf_global_suggest)."""
    return _get_global(name)


def from_dlpack(obj) -> Tensor:
    """A packfn.Tensor over the memory of `obj` (DLPack or buffer protocol), without a copy."""
    return Tensor(obj)
