import os
import sys

import pytest

import packfn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from pf_testmod import build_testmod  # noqa: E402  (tests/pf_testmod.py)


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
