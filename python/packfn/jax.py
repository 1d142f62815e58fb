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
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import jax
import numpy as np

from . import _packfn
from ._signature import _param_list, _split_params

__all__ = ["Target", "register", "ffi_call", "library_path"]

_LIB_NAME = "libpackfn_xla.so"
_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_targets: dict[str, "Target"] = {}  # packfn name -> its Target for the latest slot bound
# XLA target name -> platforms it is registered for. Kept for removed names too: XLA keeps a
# target's registration until the process ends (it has no way to remove one), and this is the
# record that stops a name added again from being registered again
_platforms: dict[str, list[str]] = {}
_SWEEP_MIN = 64  # _targets entries below which no sweep for removed names runs
_sweep_at = _SWEEP_MIN  # size of _targets at which the next sweep runs
_ERR_SIZE = 1 << 16  # bind messages quote names and signatures: room for them whole

# dtypes a tensor parameter can receive from XLA: those of whole bytes with a DLPack code
# (the adapter's dtype_of); the float8 kinds this jax has. Sub-byte types (int4, float4_e2m1fn)
# are not passed: XLA's layout of them is not DLPack's
_DTYPES = (
    frozenset(
        np.dtype(t)
        for t in ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                  "uint16", "uint32", "uint64", "bool", "complex64", "complex128")
    )
    | {jax.numpy.dtype(jax.numpy.bfloat16)}
    | {
        jax.numpy.dtype(getattr(jax.numpy, t))
        for t in ("float8_e5m2", "float8_e4m3fn", "float8_e4m3b11fnuz", "float8_e5m2fnuz",
                  "float8_e4m3fnuz", "float8_e4m3", "float8_e3m4", "float8_e8m0fnu")
        if hasattr(jax.numpy, t)
    }
)


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
                f"packfn.jax: {path} is missing: this packfn was built without XLA's FFI header, "
                "which its build takes from jax (jax.ffi.include_dir()). Install jax into this "
                "environment first, then reinstall packfn from its source folder without build "
                "isolation, as tools/dev does: `pip install jax jaxlib scikit-build-core`, then "
                "`pip install --no-build-isolation <packfn folder>`; or set PF_XLA_INCLUDE_DIR to "
                "the folder `python -c 'import jax.ffi; print(jax.ffi.include_dir())'` prints "
                "before `pip install`. See docs/jax.md, Installing."
            )
        lib = ctypes.CDLL(path)
        lib.pf_xla_bind.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.pf_xla_bind.restype = ctypes.c_int64
        lib.pf_xla_num_tensors.argtypes = [ctypes.c_int64]
        lib.pf_xla_num_tensors.restype = ctypes.c_int32
        lib.pf_xla_signature.argtypes = [ctypes.c_int64]
        lib.pf_xla_signature.restype = ctypes.c_char_p
        lib.pf_xla_generation.argtypes = [ctypes.c_int64]
        lib.pf_xla_generation.restype = ctypes.c_int64
        _lib = lib
    return _lib


@dataclass(frozen=True)
class Target:
    """A packfn function registered as an XLA FFI target."""

    name: str  # the packfn global name
    target: str  # the XLA custom-call target name
    slot: int  # the adapter's slot for the function (one per function bound under the name)
    signature: str  # of the function in that slot
    tensors: tuple[str, ...]  # tensor parameter names, in order
    # scalar parameter name -> "int" | "float" | "bool", read-only: register returns the Target
    # packfn.jax keeps and checks calls against (a dict could be changed under it: review); not
    # hashed (a mapping is not hashable), the signature says the same
    scalars: Mapping[str, str] = field(hash=False)
    platforms: tuple[str, ...]  # every platform the target is registered for, in that order
    # what calls pass as packfn_slot: the slot's place among those bound for the name in this
    # process (0 for the first), the same in every run that binds them in the same order, so
    # that JAX's persistent compilation cache finds the program again
    generation: int = 0


# The whitespace the adapter skips around names and types (xla/packfn_xla.c, is_space): ASCII
# only, so that a name holding another space character (U+00A0, U+0085) reads the same here.
_ADAPTER_SPACE = " \t\n\r\v\f"


def _parse(sig: str) -> tuple[tuple[str, ...], dict[str, str]]:
    params = _split_params(_param_list(sig), _ADAPTER_SPACE)
    tensors, scalars = [], {}
    for p in params:
        pname, _, kind = (s.strip(_ADAPTER_SPACE) for s in p.partition(":"))
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


def _platform_list(platforms: Sequence[str] | None) -> list[str]:
    if platforms is None:
        return ["cpu", "cuda"] if _cuda_available() else ["cpu"]
    if isinstance(platforms, str):
        platforms = [platforms]
    out = []
    for plat in platforms:
        if str(plat).lower() not in ("cpu", "cuda"):
            raise ValueError(f"packfn.jax.register: unknown platform {plat!r} (cpu or cuda)")
        out.append(str(plat).lower())
    if not out:  # registered nothing, and every call then failed with XLA's NOT_FOUND (review)
        raise ValueError("packfn.jax.register: no platform given (cpu, cuda or a list of them)")
    return out


def register(name: str, *, platforms: Sequence[str] | None = None) -> Target:
    """Registers the global packfn function `name` as the XLA FFI target "packfn:<name>" for
    the CPU platform, and CUDA when JAX has a CUDA backend (or for the given `platforms`,
    among "cpu" and "cuda"; a later call registers the ones still missing). Binds the function
    the global table holds now: registering again returns the same Target while that is the
    same function, and a new Target (its slot, its signature) once the global was replaced: a
    new slot for a function never bound under that name, its earlier slot for one that was.
    XLA keeps the target of a name registered until the process ends, also after the global is
    removed (docs/jax.md, "Replacing or removing a function").
    Raises KeyError (no such function, or it was removed), TypeError (a parameter that is not a
    tensor, int, float or bool, one named packfn_name or packfn_slot, or no signature),
    ValueError (an unknown platform), ImportError (the adapter was not built)."""
    if not isinstance(name, str):
        raise TypeError(f"packfn.jax.register: expected a function name (str), got "
                        f"{type(name).__name__}")
    if "\0" in name:
        raise ValueError(f"packfn.jax.register: function name {name!r} holds a NUL character")
    try:
        encoded = name.encode()
    except UnicodeEncodeError as e:  # a name of bytes that are not UTF-8, as list_globals() gives
        raise ValueError(
            f"packfn.jax.register: function name {name!r} is not UTF-8 ({e.reason} at index "
            f"{e.start}): XLA's target and attribute names are UTF-8 text; register the function "
            "under another name") from None
    wanted = _platform_list(platforms)
    with _lock:
        lib = _library()
        err = ctypes.create_string_buffer(_ERR_SIZE)
        slot = lib.pf_xla_bind(encoded, err, len(err))
        if slot < 0:
            kind, _, msg = err.value.decode(errors="replace").partition(": ")
            if kind == "KeyError":  # removed (or never there): nothing to keep for it
                _targets.pop(name, None)
            # the exception class packfn maps that kind to, made here: raising it through
            # packfn's error slot (_packfn._raise) took an error C code had left pending on this
            # thread before running this Python, and made it the cause (review)
            exc = _packfn._kind_class(kind)(msg)
            exc.kind = kind
            raise exc
        target = "packfn:" + name
        done = _platforms.setdefault(target, [])
        for plat in wanted:
            if plat in done:
                continue
            handler = lib.pf_xla_call_cuda if plat == "cuda" else lib.pf_xla_call_cpu
            jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(handler),
                                        platform="CUDA" if plat == "cuda" else plat)
            done.append(plat)
        t = _targets.get(name)
        if t is None or t.slot != slot or t.platforms != tuple(done):
            # the signature of the function in that slot, which the handler calls
            raw = lib.pf_xla_signature(slot) or b""
            try:
                sig = raw.decode()
            except UnicodeDecodeError as e:  # no keyword could name such a parameter
                raise TypeError(
                    f"{name}: its signature is not UTF-8 ({e.reason} at byte {e.start}), so its "
                    f"parameters cannot be named from Python: {raw!r}"
                ) from None
            tensors, scalars = _parse(sig)
            t = Target(name, target, int(slot), sig, tensors, types.MappingProxyType(scalars),
                       tuple(done), int(lib.pf_xla_generation(slot)))
            _targets[name] = t
            _forget_removed_locked()
        return t


def _forget_removed_locked() -> None:
    """Drops the Targets of names no longer in the global table, once _targets has doubled
    since the last sweep (one list_globals per sweep, whose cost is the size of the global
    table), so that names registered and removed, never registered again, do not pile up
    (found by review)."""
    global _sweep_at
    if len(_targets) < _sweep_at:
        return
    alive = set(_packfn.list_globals())
    for name in [n for n in _targets if n not in alive]:
        del _targets[name]
    _sweep_at = max(_SWEEP_MIN, 2 * len(_targets))


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
        try:
            with np.errstate(over="ignore"):
                out = np.float64(value)
        except OverflowError:  # an int past the float64 range (it raised a bare OverflowError)
            out = None
        # a long double past the range became inf (with a RuntimeWarning) and reached the kernel;
        # !s: format() prints a long double as a float ("inf")
        if out is None or (np.isinf(out) and not np.isinf(value)):
            raise TypeError(f"{t.name}: argument {pname}: expected a float in the float64 range, "
                            f"got {value!s}")
        return out
    if kind == "int":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{t.name}: argument {pname}: expected int, got {type(value).__name__}")
        if not -(1 << 63) <= int(value) < (1 << 63):  # np.int64 would wrap a uint64 silently
            raise TypeError(
                f"{t.name}: argument {pname}: expected an int in [-2**63, 2**63), got "
                f"{int(value)}")
        return np.int64(value)
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{t.name}: argument {pname}: expected bool, got {type(value).__name__}")
    return np.bool_(value)


def _tensor_position(t: Target, index: int) -> int:
    """The position among all the parameters of tensor parameter `index`: what the adapter and
    the kernels call it ("argument 1 (x)" in scaled(alpha: float, x: Tensor, out: Tensor))."""
    tensor = -1
    for pos, p in enumerate(_split_params(_param_list(t.signature), _ADAPTER_SPACE)):
        if p.partition(":")[2].strip(_ADAPTER_SPACE).lower() == "tensor":
            tensor += 1
            if tensor == index:
                return pos
    return index


def _check_tensor(t: Target, index: int, what: str, dtype: Any) -> None:
    try:
        plain = np.dtype(dtype)
    except TypeError:  # an extended dtype (a typed PRNG key): NumPy's message named nothing
        plain = None
    if plain not in _DTYPES:
        # named by its position among all the parameters, as the adapter names it (the tensor
        # index alone named the wrong argument when a scalar parameter came first: review)
        shown = dtype if plain is None else plain
        raise TypeError(
            f"{t.name}: argument {_tensor_position(t, index)} ({t.tensors[index]}): {what} of "
            f"dtype {shown} cannot be passed to packfn functions (only dtypes of whole bytes with "
            "a DLPack code are: not sub-byte ones such as int4)"
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
    which dtypes it accepts) is checked when it runs, and a failure there (the function's or
    the adapter's, any code) raises an exception whose text is XLA's code and packfn's
    "<kind>: <message>": jax.errors.JaxRuntimeError, or, with jax 0.10, builtins.ValueError
    after a first call that succeeded (JAX's C++ fast path raises that), so catch
    (jax.errors.JaxRuntimeError, ValueError). See docs/jax.md, "Errors"."""
    first = register(name, platforms=platforms)
    multiple = isinstance(result_shape_dtypes, (list, tuple))
    results = list(result_shape_dtypes) if multiple else [result_shape_dtypes]
    # a call with no results is run for its effects (a check that raises, say): XLA dropped it
    # as dead code, under jit and eagerly, unless it is marked as having some (review)
    call = jax.ffi.ffi_call(first.target, result_shape_dtypes, vmap_method=vmap_method,
                            has_side_effect=not results)

    def run(*operands: Any, **attrs: Any) -> Any:
        # each trace binds what the global holds now: a replaced global runs its new function
        # (with its own signature) in what is traced from then on; a removed one is a KeyError
        t = register(name, platforms=first.platforms)
        if len(operands) + len(results) != len(t.tensors):
            raise TypeError(
                f"{t.name}: {len(t.tensors)} tensor parameters ({', '.join(t.tensors)}), got "
                f"{len(operands)} operands and {len(results)} results: {t.signature}"
            )
        for i, op in enumerate(operands):
            try:
                dtype = jax.numpy.result_type(op)
            except TypeError:  # its message ("Cannot determine dtype of ...") named nothing
                raise TypeError(f"{t.name}: argument {_tensor_position(t, i)} ({t.tensors[i]}): "
                                f"expected an array, got {type(op).__name__}") from None
            _check_tensor(t, i, "operand", dtype)
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
        return call(*operands, packfn_name=t.name, packfn_slot=np.int64(t.generation), **converted)

    run.__name__ = first.name.rsplit(".", 1)[-1]
    run.__doc__ = f"{first.signature} through XLA's FFI (packfn.jax.ffi_call)"
    return run
