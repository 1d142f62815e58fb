"""packfn functions as JAX primitives, through XLA's FFI (libpackfn_xla, a C adapter).

    import packfn.jax
    rms_norm = packfn.jax.ffi_call("packfn.kernels.rms_norm",
                                   jax.ShapeDtypeStruct(x.shape, x.dtype),
                                   vmap_method="broadcast_all")
    y = jax.jit(lambda x: rms_norm(x, eps=1e-5))(x)

Operands, then results, are the function's tensor parameters in order (destination passing);
keyword arguments are its scalar parameters, by name. See docs/jax.md.
"""
from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import jax
import numpy as np

from . import _packfn, get_global
from ._signature import _split_params

__all__ = ["Target", "register", "ffi_call", "library_path"]

_LIB_NAME = "libpackfn_xla.so"
_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_targets: dict[str, "Target"] = {}

# dtypes a tensor parameter can receive from XLA (those with a DLPack equivalent)
_DTYPES = frozenset(
    np.dtype(t)
    for t in ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
              "uint16", "uint32", "uint64", "bool", "complex64", "complex128")
) | {jax.numpy.dtype(jax.numpy.bfloat16)}


def library_path() -> str:
    """Path of libpackfn_xla next to this package (it may not exist: built only when the
    package was built with jax installed)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIB_NAME)


def _library() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        path = library_path()
        if not os.path.exists(path):
            raise ImportError(
                f"packfn.jax: {path} is missing: the package was built without XLA's FFI header "
                "(install jax, then reinstall packfn)"
            )
        lib = ctypes.CDLL(path)
        lib.pf_xla_bind.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.pf_xla_bind.restype = ctypes.c_int64
        lib.pf_xla_num_tensors.argtypes = [ctypes.c_int64]
        lib.pf_xla_num_tensors.restype = ctypes.c_int32
        _lib = lib
    return _lib


@dataclass(frozen=True)
class Target:
    """A packfn function registered as an XLA FFI target."""

    name: str  # the packfn global name
    target: str  # the XLA custom-call target name
    slot: int  # the adapter's slot for the function
    signature: str
    tensors: tuple[str, ...]  # tensor parameter names, in order
    scalars: dict[str, str]  # scalar parameter name -> "int" | "float" | "bool"
    platforms: tuple[str, ...]


def _parse(name: str, sig: str) -> tuple[tuple[str, ...], dict[str, str]]:
    params = _split_params(sig[sig.find("(") + 1 : sig.rfind(")")])
    tensors, scalars = [], {}
    for p in params:
        pname, _, kind = (s.strip() for s in p.partition(":"))
        if kind.lower() == "tensor":
            tensors.append(pname)
        else:
            scalars[pname] = kind
    return tuple(tensors), scalars


def _cuda_available() -> bool:
    try:
        return bool(jax.devices("cuda"))
    except RuntimeError:
        return False


def register(name: str, *, platforms: Sequence[str] | None = None) -> Target:
    """Registers the global packfn function `name` as the XLA FFI target "packfn:<name>" for
    the CPU platform, and CUDA when JAX has a CUDA backend (or for the given `platforms`,
    among "cpu" and "cuda"). Registering again returns the same Target. Raises KeyError
    (no such function), TypeError (a parameter that is not a tensor, int, float or bool, or no
    signature), ImportError (the adapter was not built)."""
    with _lock:
        t = _targets.get(name)
        if t is not None:
            return t
        lib = _library()
        fn = get_global(name)  # KeyError with the nearest names
        err = ctypes.create_string_buffer(1024)
        slot = lib.pf_xla_bind(name.encode(), err, len(err))
        if slot < 0:
            kind, _, msg = err.value.decode(errors="replace").partition(": ")
            _packfn._raise(kind, msg)  # the exception class packfn maps that kind to
        sig = fn.signature or ""
        tensors, scalars = _parse(name, sig)
        if platforms is None:
            platforms = ("cpu", "cuda") if _cuda_available() else ("cpu",)
        target = "packfn:" + name
        for plat in platforms:
            handler = {"cpu": lib.pf_xla_call_cpu, "cuda": lib.pf_xla_call_cuda}.get(plat.lower())
            if handler is None:
                raise ValueError(f"packfn.jax.register: unknown platform {plat!r} (cpu or cuda)")
            jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(handler),
                                        platform=plat.upper() if plat.lower() == "cuda" else plat)
        t = Target(name, target, int(slot), sig, tensors, scalars, tuple(platforms))
        _targets[name] = t
        return t


def _scalar(t: Target, pname: str, kind: str, value: Any) -> Any:
    if isinstance(value, jax.core.Tracer):
        raise TypeError(
            f"{t.name}: argument {pname} ({kind}) must be a static Python value, not a traced "
            "array: XLA attributes are fixed when the call is compiled"
        )
    if kind == "float":
        if (isinstance(value, (bool, np.bool_, complex, np.complexfloating))
                or not isinstance(value, (int, float, np.number))):
            raise TypeError(f"{t.name}: argument {pname}: expected float, got {type(value).__name__}")
        return np.float64(value)
    if kind == "int":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{t.name}: argument {pname}: expected int, got {type(value).__name__}")
        if not -(1 << 63) <= int(value) < (1 << 63):  # np.int64 would wrap a uint64 silently
            raise TypeError(
                f"{t.name}: argument {pname}: expected an int that fits in 64 bits, got "
                f"{int(value).bit_length()} bits")
        return np.int64(value)
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{t.name}: argument {pname}: expected bool, got {type(value).__name__}")
    return np.bool_(value)


def _check_tensor(t: Target, index: int, what: str, dtype: Any) -> None:
    if np.dtype(dtype) not in _DTYPES:
        raise TypeError(
            f"{t.name}: argument {index} ({t.tensors[index]}): {what} of dtype {np.dtype(dtype)} "
            "has no DLPack equivalent"
        )


def ffi_call(
    name: str,
    result_shape_dtypes: Any,
    *,
    vmap_method: str | None = None,
    platforms: Sequence[str] | None = None,
) -> Callable[..., Any]:
    """A callable running the packfn function `name` inside XLA, like jax.ffi.ffi_call:
    positional arguments are the operands (the function's first tensor parameters),
    `result_shape_dtypes` (a ShapeDtypeStruct or a sequence of them) the results (its
    remaining tensor parameters, which it writes), keywords its scalar parameters. Usable
    under jit, vmap (per `vmap_method`, see jax.ffi.ffi_call), shard_map and, with a
    custom_jvp or custom_vjp, grad. The arity, the scalar names and types and the dtypes are
    checked when the call is traced (TypeError); what only the function knows (shapes, ranks,
    which dtypes it accepts) is checked when it runs, and a failure there raises JAX's runtime
    error carrying packfn's "<kind>: <message>"."""
    t = register(name, platforms=platforms)
    multiple = isinstance(result_shape_dtypes, (list, tuple))
    results = list(result_shape_dtypes) if multiple else [result_shape_dtypes]
    call = jax.ffi.ffi_call(t.target, result_shape_dtypes, vmap_method=vmap_method)

    def run(*operands: Any, **attrs: Any) -> Any:
        if len(operands) + len(results) != len(t.tensors):
            raise TypeError(
                f"{t.name}: {len(t.tensors)} tensor parameters ({', '.join(t.tensors)}), got "
                f"{len(operands)} operands and {len(results)} results: {t.signature}"
            )
        for i, op in enumerate(operands):
            _check_tensor(t, i, "operand", jax.numpy.result_type(op))
        for j, r in enumerate(results):
            _check_tensor(t, len(operands) + j, "result", r.dtype)
        missing = [p for p in t.scalars if p not in attrs]
        extra = [k for k in attrs if k not in t.scalars]
        if missing or extra:
            parts = []
            if missing:
                parts.append("missing " + ", ".join(f"{p} ({t.scalars[p]})" for p in missing))
            if extra:
                parts.append("unexpected " + ", ".join(extra))
            raise TypeError(f"{t.name}: {'; '.join(parts)}: {t.signature}")
        converted = {k: _scalar(t, k, t.scalars[k], v) for k, v in attrs.items()}
        return call(*operands, packfn_name=t.name, packfn_slot=np.int64(t.slot), **converted)

    run.__name__ = t.name.rsplit(".", 1)[-1]
    run.__doc__ = f"{t.signature} through XLA's FFI (packfn.jax.ffi_call)"
    return run
