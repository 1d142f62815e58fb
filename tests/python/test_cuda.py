"""CUDA tensors through the Python package: CuPy and JAX GPU arrays reach packfn's CUDA kernels
with no copy, packfn.kernels.* run them (libpackfn_kernels_cuda, loaded at import), and the
producer's pending work is ordered before them, and packfn's export orders the consumer's stream
after its own. Needs a GPU and CuPy (but the checks of __dlpack__'s stream argument); skips,
saying so, without."""
import ctypes
import os

import numpy as np
import pytest

import packfn

EPS = 1e-5


def _rms_norm_ref(x):
    return x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + EPS)


def test_kernels_cuda_loaded_when_installed():
    """A package built with CUDA has libpackfn_kernels_cuda next to the extension and loads it at
    import (any machine with a CUDA runtime library, GPU or not); otherwise it says why."""
    lib = os.path.join(os.path.dirname(packfn._packfn.__file__), "libpackfn_kernels_cuda.so")
    if not os.path.exists(lib):
        assert packfn.kernels_cuda_error is None and not packfn.kernels_have_cuda
        pytest.skip("this package was built without CUDA")
    if packfn.kernels_cuda_error is not None:
        assert "libpackfn_kernels_cuda.so" in packfn.kernels_cuda_error
        assert not packfn.kernels_have_cuda
    else:
        assert packfn.kernels_have_cuda
        assert "packfn.kernels.cuda.rms_norm" in packfn.list_globals()


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", ctypes.c_uint8 * 4),  # code, bits, lanes (uint16)
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", _DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


class _FakeCudaArray:
    """A DLPack producer that says its 4 floats are on cuda:0 (the pointer is host memory that
    nothing dereferences): enough to make a packfn tensor on CUDA on any machine."""

    def __init__(self):
        self.host = (ctypes.c_float * 4)()
        self.shape = (ctypes.c_int64 * 1)(4)
        self.m = _DLManagedTensor()
        self.m.dl_tensor.data = ctypes.addressof(self.host)
        self.m.dl_tensor.device = _DLDevice(2, 0)
        self.m.dl_tensor.ndim = 1
        self.m.dl_tensor.dtype[:] = [2, 32, 1, 0]
        self.m.dl_tensor.shape = self.shape

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.m), b"dltensor", None)

    def __dlpack_device__(self):
        return (2, 0)


def _cuda_driver_device_count():
    """GPUs the CUDA driver sees (0 without a driver), asked of libcuda itself."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    n = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(n)) != 0:
        return 0
    return n.value


def test_dlpack_export_stream_argument_of_a_cuda_tensor():
    """Tensor.__dlpack__(stream=) on CUDA follows the array API: -1 asks for no ordering; None
    and 1 (the legacy default stream) are packfn's own default stream; 0, other negative values
    and non-integers are refused; another stream is ordered after packfn's with
    pf_cuda_stream_wait, which without a GPU raises CUDA's error."""
    fake = _FakeCudaArray()
    t = packfn.Tensor(fake)
    assert t.device == "cuda:0" and t.shape == (4,)
    for stream in (-1, None, 1):
        assert type(t.__dlpack__(stream=stream)).__name__ == "PyCapsule"
    for bad in (0, -2, -(1 << 70), 1 << 64, True, "1", 1.5, 1 << 20000):
        with pytest.raises(BufferError, match=r"stream for a CUDA tensor: expected None, -1, 1, 2"):
            t.__dlpack__(stream=bad)
    gpu = _cuda_driver_device_count() > 0
    if not packfn.kernels_have_cuda:
        # no libpackfn_cuda: packfn queued no CUDA work, nothing to order
        assert type(t.__dlpack__(stream=2)).__name__ == "PyCapsule"
    elif gpu:
        assert type(t.__dlpack__(stream=2)).__name__ == "PyCapsule"  # the per-thread stream
    else:
        no_device = r"pf_cuda_stream_wait: cudaGetDevice failed: no CUDA device"
        with pytest.raises(RuntimeError, match=no_device):
            t.__dlpack__(stream=2)
    del t


@pytest.fixture
def cp():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:
        n = 0
    if n == 0:
        pytest.skip("no CUDA device")
    if not packfn.kernels_have_cuda:
        pytest.fail(f"a GPU, but packfn's CUDA kernels are not loaded: {packfn.kernels_cuda_error}")
    return cupy


def test_cupy_arrays_no_copy(cp):
    x = cp.asarray(np.random.default_rng(1).standard_normal((64, 1000)), dtype=cp.float32)
    t = packfn.Tensor(x)
    assert t.data_ptr == x.data.ptr and t.device == "cuda:0"
    assert t.shape == (64, 1000) and t.dtype == "float32"
    out = cp.empty_like(x)
    packfn.get_global("packfn.kernels.rms_norm")(x, out, EPS)
    np.testing.assert_allclose(cp.asnumpy(out), _rms_norm_ref(cp.asnumpy(x)), rtol=2e-5, atol=1e-6)
    # the CUDA version by its own name gives the same, and refuses a CPU output
    out2 = cp.empty_like(x)
    packfn.get_global("packfn.kernels.cuda.rms_norm")(x, out2, EPS)
    assert cp.array_equal(out, out2)
    with pytest.raises(TypeError, match=r"rms_norm: argument 1 \(out\): expected a tensor on cuda"):
        packfn.get_global("packfn.kernels.rms_norm")(x, np.empty((64, 1000), np.float32), EPS)


def test_cupy_every_kernel(cp):
    rng = np.random.default_rng(2)
    k = lambda name: packfn.get_global("packfn.kernels." + name)  # noqa: E731
    x = cp.asarray(rng.standard_normal((8, 300)))
    out = cp.empty_like(x)
    k("add_n")(x, out, 2.5)
    assert cp.allclose(out, x + 2.5)
    inv = cp.empty((8,), x.dtype)
    k("rms_norm_fwd")(x, out, inv, EPS)
    ref = _rms_norm_ref(cp.asnumpy(x))
    np.testing.assert_allclose(cp.asnumpy(out), ref, rtol=1e-12)
    ct = cp.asarray(rng.standard_normal((8, 300)))
    dx = cp.empty_like(x)
    k("rms_norm_bwd")(x, inv, ct, dx)
    cpu_dx = np.empty((8, 300))
    k("rms_norm_bwd")(cp.asnumpy(x), cp.asnumpy(inv), cp.asnumpy(ct), cpu_dx)
    np.testing.assert_allclose(cp.asnumpy(dx), cpu_dx, rtol=1e-10, atol=1e-12)
    m = cp.linspace(0, 6, 1000)
    e = cp.full(1000, 0.3)
    s, c = cp.empty_like(m), cp.empty_like(m)
    k("kepler")(m, e, s, c)
    assert cp.allclose(s * s + c * c, 1.0, atol=1e-12)
    big_e = cp.arctan2(s, c)  # M = E - e sin E, compared on the circle
    assert cp.allclose(cp.sin(big_e - 0.3 * s), cp.sin(m), atol=1e-9)
    assert cp.allclose(cp.cos(big_e - 0.3 * s), cp.cos(m), atol=1e-9)
    b, cc = cp.arange(4.0), cp.arange(12.0)
    a = cp.empty_like(cc)
    k("vector_add")(b, cc, a)
    assert cp.array_equal(a, cp.tile(b, 3) + cc)
    with pytest.raises(ValueError, match="eccentricity"):
        k("kepler")(m, cp.full(1000, 1.5), s, c)


def test_producer_stream_ordered_before_the_kernel(cp):
    """x is written on a CuPy stream that does not synchronise with the default stream; packfn
    asks __dlpack__ for its own stream (the legacy default), so CuPy orders the write first."""
    n = 1 << 24
    with cp.cuda.Stream(non_blocking=True):
        x = cp.ones(n, cp.float32)
        for _ in range(20):  # long enough that the kernel would otherwise read stale data
            x *= 1.0
        x += 1.0
        out = cp.empty_like(x)
        packfn.get_global("packfn.kernels.add_n")(x, out, 1.0)
    cp.cuda.Device().synchronize()
    assert float(out.min()) == 3.0 and float(out.max()) == 3.0


def test_export_orders_the_consumer_stream(cp):
    """packfn's kernels add 1 to a 256 MiB tensor 30 times in place, on packfn's stream (the
    legacy default), launched faster than they run; a consumer on a non-blocking CuPy stream
    imports the result at once (CuPy passes its stream to __dlpack__), and its first read must
    see all 30 additions. Unordered, it would run while the additions are still queued."""
    n = 1 << 26
    out = cp.zeros(n, cp.float32)
    cp.cuda.Device().synchronize()
    t = packfn.Tensor(out)
    add_n = packfn.get_global("packfn.kernels.add_n")
    for _ in range(30):
        add_n(t, t, 1.0)
    with cp.cuda.Stream(non_blocking=True):
        y = cp.from_dlpack(t)
        lo, hi = float(y.min()), float(y.max())
    assert (lo, hi) == (30.0, 30.0)


def test_export_to_cupy_and_errors_name_cuda(cp):
    x = cp.arange(6, dtype=cp.float64)
    t = packfn.Tensor(x)
    y = cp.from_dlpack(t)  # packfn's own export of a CUDA tensor
    assert y.data.ptr == x.data.ptr
    assert t.__dlpack_device__() == (2, 0)
    del t, y
    with pytest.raises(TypeError, match=r"vector_add: argument 1 \(c\)"):
        packfn.get_global("packfn.kernels.vector_add")(x, np.arange(6.0), x)


def test_jax_gpu_arrays_no_copy(cp):
    jax = pytest.importorskip("jax")
    try:
        gpu = jax.devices("cuda")[0]
    except RuntimeError:
        pytest.skip("jax has no CUDA backend here")
    import jax.numpy as jnp

    j = jnp.asarray(np.random.default_rng(3).standard_normal((16, 256)), jnp.float32, device=gpu)
    t = packfn.Tensor(j)
    assert t.data_ptr == j.unsafe_buffer_pointer() and t.device == "cuda:0"
    out = cp.empty((16, 256), cp.float32)
    packfn.get_global("packfn.kernels.rms_norm")(j, out, EPS)
    np.testing.assert_allclose(cp.asnumpy(out), _rms_norm_ref(np.asarray(j)), rtol=2e-5, atol=1e-6)
