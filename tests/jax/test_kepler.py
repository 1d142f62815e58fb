"""The Kepler solver of "extending JAX": packfn's kepler kernel under jit and vmap, with a
custom_jvp giving the implicit derivatives, checked against finite differences."""
import jax
import jax.numpy as jnp
import numpy as np

import packfn.jax as pj


def kepler_raw(mean_anom, ecc):
    shape = jax.ShapeDtypeStruct(mean_anom.shape, mean_anom.dtype)
    return pj.ffi_call("packfn.kernels.kepler", (shape, shape), vmap_method="broadcast_all")(
        mean_anom, ecc
    )


@jax.custom_jvp
def kepler(mean_anom, ecc):
    return kepler_raw(mean_anom, ecc)


@kepler.defjvp
def kepler_jvp(primals, tangents):
    # M = E - e sin E  =>  dE = (dM + sin E de) / (1 - e cos E)
    mean_anom, ecc = primals
    d_mean, d_ecc = tangents
    sin_e, cos_e = kepler(mean_anom, ecc)
    d_e = (d_mean + sin_e * d_ecc) / (1 - ecc * cos_e)
    return (sin_e, cos_e), (cos_e * d_e, -sin_e * d_e)


def inputs(rng, n=64):
    m = jnp.asarray(rng.uniform(-10, 10, size=n))
    e = jnp.asarray(rng.uniform(0, 0.95, size=n))
    return m, e


def test_kepler_solves_the_equation_under_jit(rng):
    m, e = inputs(rng)
    sin_e, cos_e = jax.jit(kepler)(m, e)
    np.testing.assert_allclose(sin_e**2 + cos_e**2, 1, rtol=1e-14)
    big_e = jnp.arctan2(sin_e, cos_e)
    resid = jnp.mod(big_e - e * sin_e - m + jnp.pi, 2 * jnp.pi) - jnp.pi
    np.testing.assert_allclose(resid, 0, atol=1e-12)


def test_kepler_under_vmap(rng):
    m, e = inputs(rng, 24)
    m2, e2 = m.reshape(4, 6), e.reshape(4, 6)
    sin_v, cos_v = jax.jit(jax.vmap(kepler))(m2, e2)
    sin_d, cos_d = kepler(m, e)
    np.testing.assert_allclose(sin_v.ravel(), sin_d, rtol=0, atol=0)
    np.testing.assert_allclose(cos_v.ravel(), cos_d, rtol=0, atol=0)
    # vmap over one argument only: the other is broadcast
    sin_b, _ = jax.vmap(kepler, in_axes=(0, None))(m2, e2[0])
    np.testing.assert_allclose(sin_b, kepler(m2, jnp.broadcast_to(e2[0], m2.shape))[0])


def test_kepler_derivatives_match_finite_differences(rng):
    m, e = inputs(rng, 16)
    h = 1e-6
    for out in (0, 1):
        d_m = jax.jit(jax.vmap(jax.grad(lambda a, b: kepler(a, b)[out], argnums=0)))(m, e)
        d_e = jax.jit(jax.vmap(jax.grad(lambda a, b: kepler(a, b)[out], argnums=1)))(m, e)
        fd_m = (kepler(m + h, e)[out] - kepler(m - h, e)[out]) / (2 * h)
        fd_e = (kepler(m, e + h)[out] - kepler(m, e - h)[out]) / (2 * h)
        np.testing.assert_allclose(d_m, fd_m, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(d_e, fd_e, rtol=1e-6, atol=1e-7)


def test_kepler_jvp_and_grad_of_a_loss(rng):
    m, e = inputs(rng, 8)

    def loss(m, e):
        s, c = kepler(m, e)
        return jnp.sum(s * c)

    g_m, g_e = jax.grad(loss, argnums=(0, 1))(m, e)
    h = 1e-6
    for i in range(3):
        dm = jnp.zeros_like(m).at[i].set(h)
        np.testing.assert_allclose(g_m[i], (loss(m + dm, e) - loss(m - dm, e)) / (2 * h),
                                   rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(g_e[i], (loss(m, e + dm) - loss(m, e - dm)) / (2 * h),
                                   rtol=1e-6, atol=1e-8)
