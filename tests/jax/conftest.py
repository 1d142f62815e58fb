"""Shared setup of the packfn.jax tests: float64 enabled (the Kepler derivatives are checked
against finite differences in double precision), the kernels and their jnp references, and
xla_testmod.c compiled against the installed package."""
import os
import shutil
import subprocess

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


@pytest.fixture(scope="session")
def testmod(tmp_path_factory):
    """xla_testmod.c built with the C compiler ($CC, else cc) against the installed package's
    headers and libpackfn, loaded (packfn.load_module); skips when there is no compiler."""
    import packfn

    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build tests/jax/xla_testmod.c")
    pkg = os.path.dirname(packfn.__file__)
    src = os.path.join(os.path.dirname(__file__), "xla_testmod.c")
    lib = str(tmp_path_factory.mktemp("xla_testmod") / "libxla_testmod.so")
    cmd = [cc, "-std=c11", "-shared", "-fPIC", "-O1", "-I", os.path.join(pkg, "include"), src,
           "-o", lib, "-L", pkg, "-lpackfn", "-Wl,-rpath," + pkg]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, " ".join(cmd) + "\n" + proc.stdout + proc.stderr
    return packfn.load_module(lib)
