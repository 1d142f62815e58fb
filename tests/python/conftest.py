import pytest

import packfn


@pytest.fixture
def identity():
    """A global function (a Python callback) that returns its only argument."""
    fn = packfn.register_global("test.identity", lambda x: x, override=True)
    yield fn
    packfn.remove_global("test.identity")


@pytest.fixture
def rms_norm():
    return packfn.get_global("packfn.kernels.rms_norm")
