"""The rms_norm tutorial of JAX's FFI documentation, with packfn's kernels."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import packfn
import packfn.jax as pj
from conftest import rms_norm_ref


def rms_norm(x, eps=1e-5):
    call = pj.ffi_call(
        "packfn.kernels.rms_norm",
        jax.ShapeDtypeStruct(x.shape, x.dtype),
        vmap_method="broadcast_all",
    )
    return call(x, eps=eps)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rms_norm_matches_reference_under_jit(rng, dtype):
    x = jnp.asarray(rng.normal(size=(5, 16)).astype(dtype))
    for eps in (1e-5, 0.5):
        out = jax.jit(rms_norm, static_argnames="eps")(x, eps=eps)
        assert out.dtype == dtype and out.shape == x.shape
        tol = 1e-6 if dtype == np.float32 else 1e-13
        np.testing.assert_allclose(out, rms_norm_ref(x, eps), rtol=tol, atol=tol)


def test_eps_reaches_the_kernel_as_a_float64_attribute(rng):
    # eps large enough that float32 rounding of it would show
    x = jnp.asarray(rng.normal(size=(3, 4)))
    eps = 0.1 + 1e-12
    np.testing.assert_allclose(rms_norm(x, eps), rms_norm_ref(x, eps), rtol=1e-15, atol=0)


def test_eager_call_and_leading_batch_axes(rng):
    x = jnp.asarray(rng.normal(size=(2, 3, 8)).astype(np.float32))
    np.testing.assert_allclose(rms_norm(x), rms_norm_ref(x, 1e-5), rtol=1e-6, atol=1e-6)


def test_vmap_broadcast_all(rng):
    x = jnp.asarray(rng.normal(size=(4, 3, 8)).astype(np.float32))
    out = jax.vmap(rms_norm)(x)
    np.testing.assert_allclose(out, rms_norm_ref(x, 1e-5), rtol=1e-6, atol=1e-6)
    # a batch axis that is not the leading one, and nested vmaps
    out = jax.vmap(rms_norm, in_axes=1, out_axes=1)(x)
    np.testing.assert_allclose(out, rms_norm_ref(x, 1e-5), rtol=1e-6, atol=1e-6)
    out = jax.jit(jax.vmap(jax.vmap(rms_norm)))(x)
    np.testing.assert_allclose(out, rms_norm_ref(x, 1e-5), rtol=1e-6, atol=1e-6)


# ---- custom_vjp from the forward and backward kernels ----

@jax.custom_vjp
def rms_norm_vjp(x, eps=1e-5):
    return rms_norm(x, eps)


def rms_norm_fwd(x, eps=1e-5):
    out, inv_rms = pj.ffi_call(
        "packfn.kernels.rms_norm_fwd",
        (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(x.shape[:-1], x.dtype)),
        vmap_method="broadcast_all",
    )(x, eps=eps)
    return out, (x, inv_rms)


def rms_norm_bwd(res, ct):
    x, inv_rms = res
    dx = pj.ffi_call(
        "packfn.kernels.rms_norm_bwd",
        jax.ShapeDtypeStruct(x.shape, x.dtype),
        vmap_method="broadcast_all",
    )(x, inv_rms, ct)
    return dx, None


rms_norm_vjp.defvjp(rms_norm_fwd, rms_norm_bwd)


def test_custom_vjp_grad_matches_reference(rng):
    x = jnp.asarray(rng.normal(size=(6, 10)))
    w = jnp.asarray(rng.normal(size=(6, 10)))

    def loss(f):
        return lambda x: jnp.sum(w * f(x, 1e-5))

    got = jax.jit(jax.grad(loss(rms_norm_vjp)))(x)
    want = jax.grad(loss(rms_norm_ref))(x)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # the forward kernel's value matches too, and the gradient composes with vmap
    np.testing.assert_allclose(rms_norm_vjp(x), rms_norm_ref(x, 1e-5), rtol=1e-13)
    per_row = jax.vmap(jax.grad(lambda r: jnp.sum(jnp.sin(rms_norm_vjp(r)))))(x)
    ref_row = jax.vmap(jax.grad(lambda r: jnp.sum(jnp.sin(rms_norm_ref(r, 1e-5)))))(x)
    np.testing.assert_allclose(per_row, ref_row, rtol=1e-12, atol=1e-12)


# ---- registration ----

def test_register_is_idempotent_and_names_the_target():
    a = pj.register("packfn.kernels.rms_norm")
    b = pj.register("packfn.kernels.rms_norm")
    assert a is b
    assert a.target == "packfn:packfn.kernels.rms_norm"
    assert a.tensors == ("x", "out") and a.scalars == {"eps": "float"}
    assert "cpu" in a.platforms


def test_many_functions_no_fixed_limit(rng):
    # 150 names for add_n: slots beyond the first chunks of the adapter's table
    add_n = packfn.get_global("packfn.kernels.add_n")
    names = [f"test.jax.add_n_{i}" for i in range(150)]
    for n in names:
        packfn.register_global(n, add_n, override=True)
    try:
        slots = [pj.register(n).slot for n in names]
        assert len(set(slots)) == 150
        x = jnp.asarray(rng.normal(size=(7,)))
        for i in (0, 63, 64, 149):
            f = pj.ffi_call(names[i], jax.ShapeDtypeStruct(x.shape, x.dtype))
            np.testing.assert_allclose(jax.jit(lambda x: f(x, n=float(i)))(x), x + i)
    finally:
        for n in names:
            packfn.remove_global(n)


def test_stale_slot_is_rebound_by_name(rng):
    t = pj.register("packfn.kernels.add_n")
    x = jnp.asarray(rng.normal(size=(5,)))
    raw = jax.ffi.ffi_call(t.target, jax.ShapeDtypeStruct(x.shape, x.dtype))
    out = raw(x, packfn_name="packfn.kernels.add_n", packfn_slot=np.int64(10**9),
              n=np.float64(2.0))
    np.testing.assert_allclose(out, x + 2)
    # a slot of another function is not trusted either
    other = pj.register("packfn.kernels.rms_norm").slot
    out = raw(x, packfn_name="packfn.kernels.add_n", packfn_slot=np.int64(other),
              n=np.float64(3.0))
    np.testing.assert_allclose(out, x + 3)


def test_target_is_immutable_and_hashable():
    """A Target is a frozen dataclass, and register returns the one packfn.jax keeps for the name,
    whose scalars its calls check keywords against: its scalars cannot be changed (a dict could,
    and an added name then made every call of the function "missing" it), and it is hashable
    (the dict made hash() a TypeError)."""
    t = pj.register("packfn.kernels.rms_norm")
    with pytest.raises(TypeError):
        t.scalars["extra"] = "int"
    assert pj.register("packfn.kernels.rms_norm").scalars == {"eps": "float"}
    assert hash(t) == hash(pj.register("packfn.kernels.rms_norm"))
    x = jnp.ones((2, 4), jnp.float32)
    y = pj.ffi_call("packfn.kernels.rms_norm", jax.ShapeDtypeStruct(x.shape, x.dtype))(x, eps=0.0)
    np.testing.assert_allclose(np.asarray(y), np.ones((2, 4)), rtol=1e-6)
