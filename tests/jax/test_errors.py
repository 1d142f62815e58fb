"""Bad input raises Python exceptions: at trace time where the signature tells, from the
kernel at run time otherwise, never a crash."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import packfn
import packfn.jax as pj

RuntimeErr = getattr(jax.errors, "JaxRuntimeError", RuntimeError)


def spec(x, dtype=None):
    return jax.ShapeDtypeStruct(x.shape, dtype or x.dtype)


def test_wrong_dtype_raises_the_kernels_type_error():
    x = jnp.arange(8, dtype=jnp.int32).reshape(2, 4)
    f = pj.ffi_call("packfn.kernels.rms_norm", spec(x))
    with pytest.raises(RuntimeErr, match=r"INVALID_ARGUMENT: TypeError: rms_norm: argument 0 "
                                         r"\(x\): expected a float32 or float64 tensor, got int32"):
        jax.block_until_ready(jax.jit(lambda x: f(x, eps=1e-5))(x))


def test_wrong_rank_raises():
    x = jnp.float32(3.0)  # rms_norm needs at least one axis
    f = pj.ffi_call("packfn.kernels.rms_norm", spec(x))
    with pytest.raises(RuntimeErr, match=r"rms_norm: argument 0 \(x\)"):
        jax.block_until_ready(f(x, eps=1e-5))


def test_mismatched_result_shape_raises():
    x = jnp.ones((2, 4), jnp.float32)
    f = pj.ffi_call("packfn.kernels.rms_norm", jax.ShapeDtypeStruct((2, 5), jnp.float32))
    with pytest.raises(RuntimeErr, match=r"rms_norm: argument 1 \(out\)"):
        jax.block_until_ready(f(x, eps=1e-5))


def test_failing_kernel_raises_its_value_error():
    m = jnp.zeros(4)
    e = jnp.asarray([0.1, 0.2, 1.5, 0.3])
    f = pj.ffi_call("packfn.kernels.kepler", (spec(m), spec(m)))
    # on a GPU the CUDA version checks the values, and its errors name it (kepler_cuda)
    msg = (r"ValueError: kepler(_cuda)?: argument 1 \(eccentricity\): "
           r"expected values in \[0, 1\), got 1.5 at index 2")
    with pytest.raises(RuntimeErr, match=msg):
        jax.block_until_ready(jax.jit(f)(m, e))
    # the process goes on: the next call works
    s, c = f(m, jnp.full(4, 0.5))
    np.testing.assert_allclose(s, 0, atol=1e-15)
    # a negative eps is refused by the kernel too
    x = jnp.ones((2, 4))
    with pytest.raises(RuntimeErr, match="eps"):
        jax.block_until_ready(pj.ffi_call("packfn.kernels.rms_norm", spec(x))(x, eps=-1.0))


def test_trace_time_checks():
    x = jnp.ones((2, 4), jnp.float32)
    f = pj.ffi_call("packfn.kernels.rms_norm", spec(x))
    with pytest.raises(TypeError, match=r"missing eps \(float\)"):
        jax.jit(lambda x: f(x))(x)
    with pytest.raises(TypeError, match="unexpected epsilon"):
        f(x, eps=1e-5, epsilon=1)
    with pytest.raises(TypeError, match="expected float, got str"):
        f(x, eps="small")
    with pytest.raises(TypeError, match="static Python value"):
        jax.jit(lambda x, e: f(x, eps=e))(x, 1e-5)
    with pytest.raises(TypeError, match="2 tensor parameters"):
        f(x, x, eps=1e-5)
    g = pj.ffi_call("packfn.kernels.rms_norm", (spec(x), spec(x)))
    with pytest.raises(TypeError, match="1 operands and 2 results"):
        g(x, eps=1e-5)
    with pytest.raises(TypeError, match="expected float, got complex"):
        f(x, eps=np.complex128(1 + 2j))
    # int parameters (no packfn kernel has one): values past 64 bits are refused, not wrapped
    t = pj.register("packfn.kernels.add_n")
    assert pj._scalar(t, "k", "int", np.uint64(2**63 - 1)) == 2**63 - 1
    for big in (np.uint64(2**64 - 1), 2**63, -(2**63) - 1):
        with pytest.raises(TypeError, match="fits in 64 bits"):
            pj._scalar(t, "k", "int", big)
    h = pj.ffi_call("packfn.kernels.add_n", jax.ShapeDtypeStruct((2,), jnp.float8_e4m3fn))
    with pytest.raises(TypeError, match="no DLPack equivalent"):
        h(jnp.ones(2, jnp.float8_e4m3fn), n=1.0)


def test_unknown_or_unfit_functions():
    with pytest.raises(KeyError, match="packfn.kernels.rms_norm"):
        pj.register("packfn.kernels.rms_nrom")
    packfn.register_global("test.jax.callback", lambda x: x, override=True)
    try:
        # a Python callable's signature is (*args): nothing XLA can fill
        with pytest.raises(TypeError, match=r"parameter 0 '\*args' cannot come from XLA"):
            pj.register("test.jax.callback")
    finally:
        packfn.remove_global("test.jax.callback")
    with pytest.raises(ValueError, match="unknown platform"):
        pj.register("packfn.kernels.vector_add", platforms=["tpu"])


def test_call_without_the_function_name_attribute():
    t = pj.register("packfn.kernels.add_n")
    x = jnp.ones(3)
    raw = jax.ffi.ffi_call(t.target, spec(x))
    with pytest.raises(RuntimeErr, match="no string attribute packfn_name"):
        jax.block_until_ready(raw(x, n=np.float64(1)))
    with pytest.raises(RuntimeErr, match="no global function 'nope'"):
        jax.block_until_ready(raw(x, packfn_name="nope", packfn_slot=np.int64(0),
                                  n=np.float64(1)))
    with pytest.raises(RuntimeErr, match=r"argument 2 \(n\): expected a float attribute"):
        jax.block_until_ready(raw(x, packfn_name="packfn.kernels.add_n",
                                  packfn_slot=np.int64(t.slot), n="one"))


def test_raw_call_refuses_unknown_attributes_bools_and_nul_names():
    """The attributes are matched by name: one no parameter takes is refused (without
    packfn_slot the count alone let it pass), a bool is no number for a float parameter, and a
    name with a NUL byte is not cut at it."""
    t = pj.register("packfn.kernels.add_n")
    x = jnp.ones(3)
    raw = jax.ffi.ffi_call(t.target, spec(x))
    with pytest.raises(RuntimeErr, match="1 scalar parameters, but the call has 2 attributes"):
        jax.block_until_ready(raw(x, packfn_name="packfn.kernels.add_n", n=np.float64(1),
                                  bogus=np.float64(3)))
    with pytest.raises(RuntimeErr, match=r"argument 2 \(n\): expected a float attribute"):
        jax.block_until_ready(raw(x, packfn_name="packfn.kernels.add_n",
                                  packfn_slot=np.int64(t.slot), n=True))
    with pytest.raises(RuntimeErr, match="packfn_name holds a NUL byte"):
        jax.block_until_ready(raw(x, packfn_name="packfn.kernels.add_n\0junk",
                                  packfn_slot=np.int64(t.slot), n=np.float64(1)))
    # without packfn_slot the call still binds by name
    y = raw(x, packfn_name="packfn.kernels.add_n", n=np.float64(2))
    np.testing.assert_array_equal(np.asarray(y), np.full(3, 3.0))


def test_long_kernel_message_comes_whole(testmod):
    packfn.register_global("test.jax.shout", testmod.shout, override=True)
    try:
        f = pj.ffi_call("test.jax.shout", jax.ShapeDtypeStruct((1,), jnp.float64))
        with pytest.raises(RuntimeErr) as info:
            jax.block_until_ready(f(n=3000))
        assert "INVALID_ARGUMENT: ValueError: " + "a" * 3000 + "END" in str(info.value)
    finally:
        packfn.remove_global("test.jax.shout")


def test_bind_failures_in_the_handler_keep_their_kind():
    """A call that binds by name fails with the code of packfn's error kind, as a failing
    function does."""
    t = pj.register("packfn.kernels.add_n")
    x = jnp.ones(3)
    raw = jax.ffi.ffi_call(t.target, spec(x))
    with pytest.raises(RuntimeErr, match="NOT_FOUND: KeyError: no global function 'nope'"):
        jax.block_until_ready(raw(x, packfn_name="nope", n=np.float64(1)))
    with pytest.raises(RuntimeErr, match="INVALID_ARGUMENT: ValueError: .*expected a function name"):
        jax.block_until_ready(raw(x, packfn_name="", n=np.float64(1)))
    packfn.register_global("test.jax.callback", lambda x: x, override=True)
    try:
        with pytest.raises(RuntimeErr, match=r"INVALID_ARGUMENT: TypeError: .*parameter 0 '\*args'"):
            jax.block_until_ready(raw(x, packfn_name="test.jax.callback", n=np.float64(1)))
    finally:
        packfn.remove_global("test.jax.callback")


def test_missing_adapter_says_how_to_build_it(monkeypatch):
    monkeypatch.setattr(pj, "_lib", None)
    monkeypatch.setattr(pj, "library_path", lambda: "/nonexistent/libpackfn_xla.so")
    with pytest.raises(ImportError, match=r"install jax .*pip install --no-build-isolation"):
        pj._library()
