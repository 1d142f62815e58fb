"""Builds a small packfn library from a C source with the C compiler ($CC, else cc) against the
installed package's headers and libpackfn, and loads it (packfn.load_module); the pytest suites
(tests/python, tests/jax) share it. Skips the calling test when there is no compiler."""
import os
import shutil
import subprocess

import pytest


def build_testmod(tmp_path_factory, src, libs=()):
    import packfn

    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip(f"no C compiler to build {src}")
    pkg = os.path.dirname(packfn.__file__)
    name = os.path.splitext(os.path.basename(src))[0]
    lib = str(tmp_path_factory.mktemp(name) / f"lib{name}.so")
    cmd = [cc, "-std=c11", "-shared", "-fPIC", "-O1", "-I", os.path.join(pkg, "include"), src,
           "-o", lib, "-L", pkg, "-lpackfn", *libs, "-Wl,-rpath," + pkg]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, " ".join(cmd) + "\n" + proc.stdout + proc.stderr
    return packfn.load_module(lib)
