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


@pytest.fixture(scope="session")
def thread_testmod(tmp_path_factory):
    """thread_testmod.c built with the C compiler ($CC, else cc) against the installed package's
    headers and libpackfn, loaded (packfn.load_module); skips when there is no compiler."""
    import os
    import shutil
    import subprocess

    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build tests/python/thread_testmod.c")
    pkg = os.path.dirname(packfn.__file__)
    src = os.path.join(os.path.dirname(__file__), "thread_testmod.c")
    lib = str(tmp_path_factory.mktemp("thread_testmod") / "libthread_testmod.so")
    cmd = [cc, "-std=c11", "-shared", "-fPIC", "-O1", "-I", os.path.join(pkg, "include"), src,
           "-o", lib, "-L", pkg, "-lpackfn", "-lpthread", "-Wl,-rpath," + pkg]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, " ".join(cmd) + "\n" + proc.stdout + proc.stderr
    return packfn.load_module(lib)
