"""Shared setup of the packfn.jax tests: float64 enabled (the Kepler derivatives are checked
against finite differences in double precision), the kernels and their jnp references, and
xla_testmod.c compiled against the installed package, with a fixture that keeps a test's
computations on the CPU (on_cpu) for its functions."""
import os
import sys

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from pf_testmod import build_testmod  # noqa: E402  (tests/pf_testmod.py)


def rms_norm_ref(x, eps):
    """The reference of the JAX FFI tutorial."""
    return x / jnp.sqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + eps)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.fixture(scope="session")
def testmod(tmp_path_factory):
    """xla_testmod.c built against the installed package and loaded (tests/pf_testmod.py)."""
    return build_testmod(tmp_path_factory, os.path.join(os.path.dirname(__file__), "xla_testmod.c"))


@pytest.fixture(scope="session")
def hookmod(tmp_path_factory):
    """tests/python/thread_testmod.c (fail_after_notify: raises, runs a hook, fails)."""
    src = os.path.join(os.path.dirname(__file__), "..", "python", "thread_testmod.c")
    return build_testmod(tmp_path_factory, src, ["-lpthread"])


@pytest.fixture
def on_cpu():
    """Runs the test's computations on the CPU: the functions of xla_testmod.c write their
    results from the host, so on a machine with a GPU they must not receive CUDA buffers."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield
