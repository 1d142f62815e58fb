"""Shared setup of the packfn.jax tests: float64 enabled (the Kepler derivatives are checked
against finite differences in double precision), the kernels and their jnp references."""
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402


def rms_norm_ref(x, eps):
    """The reference of the JAX FFI tutorial."""
    return x / jnp.sqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + eps)


@pytest.fixture
def rng():
    return np.random.default_rng(7)
