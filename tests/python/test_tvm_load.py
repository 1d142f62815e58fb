"""libpackfn_kernels loaded by TVM-FFI (issue 11, deliverables 5 and 6): tvm_ffi.load_module
finds every export, calls it on NumPy arrays and shows its signature metadata and doc, and
packfn's global kernels are TVM-FFI globals, whichever of packfn and tvm_ffi is imported
first. Each case runs in a fresh interpreter, so the import order is its own."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest


def kernels_path():
    """The installed package's libpackfn_kernels, found without importing packfn."""
    spec = importlib.util.find_spec("packfn")
    folder = spec.submodule_search_locations[0]
    for name in sorted(os.listdir(folder)):
        if name.startswith("libpackfn_kernels.so"):
            return os.path.join(folder, name)
    pytest.fail(f"no libpackfn_kernels.so in {folder}")


def run(*parts, env=None):
    """Runs the parts as one program in a fresh interpreter, `env` added to the environment."""
    code = "import numpy as np\nKERNELS = %r\n" % kernels_path()
    code += "".join(textwrap.dedent(part) for part in parts)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, **(env or {})))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


RMS_NORM_CHECK = """
x = np.random.default_rng(0).standard_normal((4, 33)).astype(np.float32)
out = np.zeros_like(x)
f(x, out, 1e-5)
ref = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5)
np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
print("rms_norm ok")
"""


def test_load_module_rms_norm_and_metadata():
    out = run("""
        import tvm_ffi
        from tvm_ffi.core import TypeSchema
        mod = tvm_ffi.load_module(KERNELS)
        f = mod.rms_norm
    """, RMS_NORM_CHECK, """
        meta = mod.get_function_metadata("rms_norm")
        print(TypeSchema.from_json_str(meta["type_schema"]))
        print(mod.get_function_doc("rms_norm"))
        x = np.arange(6, dtype=np.float64)
        y = np.zeros_like(x)
        mod.add_n(x, y, 2.5)
        assert (y == x + 2.5).all()
        print(TypeSchema.from_json_str(mod.get_function_metadata("add_n")["type_schema"]))
    """)
    assert "rms_norm ok" in out
    assert "Callable[[Tensor, Tensor, float], None]" in out
    assert "out = x / sqrt(mean(x^2, last axis) + eps) (CPU, or CUDA with libpackfn_kernels_cuda)" in out


@pytest.mark.parametrize("first", ["tvm_ffi", "packfn"])
def test_global_kernels_either_import_order(first):
    # packfn imported first joins when the package sees tvm_ffi imported (docs/interop.md)
    second = "packfn" if first == "tvm_ffi" else "tvm_ffi"
    out = run(f"import {first}\nimport {second}\nimport tvm_ffi\n",
              'f = tvm_ffi.get_global_func("packfn.kernels.rms_norm")\n', RMS_NORM_CHECK)
    assert "rms_norm ok" in out


def test_load_module_after_tvm_ffi_registers_globals():
    """tvm_ffi first, then its loader brings libpackfn in: the library's registrations land in
    TVM-FFI's table (packfn joins on its first table use)."""
    out = run("""
        import tvm_ffi
        mod = tvm_ffi.load_module(KERNELS)
        f = tvm_ffi.get_global_func("packfn.kernels.rms_norm")
    """, RMS_NORM_CHECK)
    assert "rms_norm ok" in out


@pytest.mark.parametrize("apart", ["0", "1"])
def test_load_module_failing_call_raises_joined_or_apart(apart):
    """A failing packfn kernel called through tvm_ffi.load_module raises TVM-FFI's exception,
    joined or with PACKFN_NO_TVM_FFI=1 (apart, the export moves the error into TVM-FFI's slot:
    TVM-FFI crashed finding its slot empty; review)."""
    out = run("""
        import tvm_ffi
        mod = tvm_ffi.load_module(KERNELS)
        x = np.ones((2, 4), np.float32)
        mod.rms_norm(x, x, 1e-5)
        for _ in range(3):
            try:
                mod.rms_norm(x, 1, 1e-5)
            except TypeError as e:
                print("raised:", e)
            else:
                print("no error")
    """, env={"PACKFN_NO_TVM_FFI": apart})
    assert out.count("raised: rms_norm: argument 1 (out): expected Tensor, got int") == 3, out


def test_tvm_module_seen_through_packfn():
    """TVM-FFI's ffi.Module handed to Python by a packfn call is a packfn.Module whose functions
    are attributes; dir() lists only path and exports (it raised TypeError), exports() says
    why it cannot list them."""
    out = run("""
        import tvm_ffi, packfn
        mod = packfn.get_global("testing.echo")(tvm_ffi.load_module(KERNELS))
        assert type(mod) is packfn.Module, type(mod)
        assert mod.path is None
        x = np.arange(4, dtype=np.float64)
        y = np.zeros_like(x)
        mod.add_n(x, y, 1.5)
        assert (y == x + 1.5).all()
        assert sorted(dir(mod)) == ["exports", "path"], dir(mod)
        try:
            mod.exports()
        except TypeError as e:
            assert "TVM-FFI's ffi.Module" in str(e), e
            print("exports refused")
    """)
    assert "exports refused" in out
