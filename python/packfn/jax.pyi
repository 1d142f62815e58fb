from typing import Any, Callable, Mapping, Sequence

class Target:
    name: str
    target: str
    slot: int
    signature: str
    tensors: tuple[str, ...]
    scalars: Mapping[str, str]
    platforms: tuple[str, ...]
    generation: int

def library_path() -> str: ...
def register(name: str, *, platforms: Sequence[str] | None = None) -> Target: ...
def ffi_call(
    name: str,
    result_shape_dtypes: Any,
    *,
    vmap_method: str | None = None,
    platforms: Sequence[str] | None = None,
) -> Callable[..., Any]: ...
