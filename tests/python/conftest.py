import os
import sys

import pytest

import packfn

# tests/ on the path only for this import: left there, its folder jax/ (tests/jax, no
# __init__.py) imports as a namespace package "jax" where jax is not installed, so
# pytest.importorskip("jax") went on and the JAX tests failed instead of skipping
_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _TESTS)
try:
    from pf_testmod import build_testmod  # noqa: E402  (tests/pf_testmod.py)
finally:
    sys.path.remove(_TESTS)


@pytest.fixture
def identity():
    """A global function (a Python callback) that returns its only argument."""
    fn = packfn.register_global("test.identity", lambda x: x, override=True)
    yield fn
    packfn.remove_global("test.identity")


@pytest.fixture
def rms_norm():
    return packfn.get_global("packfn.kernels.rms_norm")


@pytest.fixture(scope="session")
def thread_testmod(tmp_path_factory):
    """thread_testmod.c built against the installed package and loaded (tests/pf_testmod.py)."""
    src = os.path.join(os.path.dirname(__file__), "thread_testmod.c")
    return build_testmod(tmp_path_factory, src, ["-lpthread"])
