# npy_numpy_check.py: the NumPy side of the .npy interoperability test: writes files with NumPy
# for src/npy/ to read, and checks that NumPy reads the files src/npy/ wrote.
#
# How the pieces fit (CTest runs the three steps in order, see tests/CMakeLists.npy.txt):
#   1. python npy_numpy_check.py DIR           NumPy writes DIR/np_*.npy: every supported dtype,
#                                              C and Fortran order, little- and big-endian, plus
#                                              scalar, empty, version 2.0 and 3.0 files, and
#                                              DIR/repr_NNN.npy with repr(array) in repr_NNN.txt.
#   2. npy_interop read DIR && npy_interop write DIR
#                                              (tests/npy_interop.c) reads every np_*.npy and
#                                              checks its values, prints every repr_NNN.npy and
#                                              compares with repr_NNN.txt, then writes
#                                              DIR/ours_*.npy with the same values.
#   3. python npy_numpy_check.py DIR --verify  NumPy loads every ours_*.npy, checks dtype,
#                                              shape and values, and that the bytes equal what
#                                              np.save writes for the same array.
# Values are a formula of the element's C-order index, written out here and in npy_interop.c
# (value_of): the two must stay in step. Needs only numpy; exits 1 on any failure.
import io
import os
import sys

import numpy as np

CODES = ["b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]
SHAPE = (2, 3, 4)
# Our printer follows NumPy 2.3's repr (float32 turns scientific at 1e6 instead of 1e8, and
# summarised arrays show their shape); older NumPy prints some cases differently.
REPR_MIN_VERSION = (2, 3)


def values(code, shape):
    """The test values: a function of each element's C-order index i (see value_of in C)."""
    n = int(np.prod(shape, dtype=np.int64))
    i = np.arange(n, dtype=np.int64)
    kind, size = code[0], int(code[1:])
    if kind == "b":
        out = i % 3 == 0
    elif kind in "iu":
        scale = sum(1 << (8 * k) for k in range(size))  # 0x01, 0x0101, ...
        v = (i * 37) % 251
        if kind == "i":
            v = v - 125
        out = np.array([int(x) * scale for x in v], dtype=f"<{code}")
    elif code == "f2":
        out = ((i - 10) * 0.25).astype(np.float16)
    elif code == "f4":
        out = (i - 10).astype(np.float32) / np.float32(3)
    elif code == "f8":
        out = (i - 10).astype(np.float64) / 3.0
    elif code == "c8":
        out = np.empty(n, dtype=np.complex64)
        out.real = (i - 10).astype(np.float32) / np.float32(3)
        out.imag = -(i.astype(np.float32) * np.float32(0.5))
    else:  # c16
        out = np.empty(n, dtype=np.complex128)
        out.real = (i - 10).astype(np.float64) / 3.0
        out.imag = i * 1.5
    return out.reshape(shape)


def save(path, arr, version=None):
    with open(path, "wb") as f:
        np.lib.format.write_array(f, arr, version=version, allow_pickle=False)


def write_numpy_files(d):
    for code in CODES:
        base = values(code, SHAPE)
        for order in ("C", "F"):
            for endian in ("le", "be"):
                if endian == "be" and code in ("b1", "i1", "u1"):
                    continue  # one-byte types have no byte order
                arr = base.astype(base.dtype.newbyteorder("<" if endian == "le" else ">"))
                arr = np.asfortranarray(arr) if order == "F" else np.ascontiguousarray(arr)
                save(os.path.join(d, f"np_{code}_{order}_{endian}.npy"), arr)
    save(os.path.join(d, "np_scalar_f8.npy"), values("f8", ()))
    save(os.path.join(d, "np_empty_i4.npy"), values("i4", (0, 3)))
    save(os.path.join(d, "np_vec_u2.npy"), values("u2", (5,)))
    save(os.path.join(d, "np_v2_f4.npy"), values("f4", SHAPE), version=(2, 0))
    save(os.path.join(d, "np_v3_c8.npy"), values("c8", SHAPE), version=(3, 0))
    version = tuple(int(x) for x in np.__version__.split(".")[:2])
    if version >= REPR_MIN_VERSION:
        for k, arr in enumerate(repr_cases()):
            save(os.path.join(d, f"repr_{k:03d}.npy"), arr)
            with open(os.path.join(d, f"repr_{k:03d}.txt"), "w") as f:
                f.write(repr(arr))
    else:
        print(f"numpy {np.__version__} is older than 2.3: no repr cases written")


def random_floats(rng, n, dtype):
    """Values of mixed magnitude, with zeros, integers, nan and inf sprinkled in."""
    style = rng.integers(0, 6)
    if style == 0:
        v = rng.normal(size=n)
    elif style == 1:
        v = rng.integers(-1000, 1000, size=n).astype(np.float64)
    elif style == 2:
        v = 10.0 ** rng.uniform(-6, 12, size=n) * rng.choice([-1, 1], size=n)
    elif style == 3:
        v = rng.uniform(0, 100, size=n).round(rng.integers(0, 4))
    elif style == 4:
        v = 10.0 ** rng.uniform(-3, 5, size=n)
    else:
        v = rng.normal(size=n) * 10.0 ** rng.integers(-5, 9)
    special = rng.uniform(size=n)
    v[special < 0.05] = 0.0
    if rng.integers(0, 4) == 0:
        v[special > 0.97] = np.nan
        v[(special > 0.94) & (special <= 0.97)] = rng.choice([np.inf, -np.inf])
    with np.errstate(over="ignore"):
        return v.astype(dtype)


def repr_cases():
    f8, f4, f2 = np.float64, np.float32, np.float16
    cases = [
        np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=f4),
        np.array([1.5, 2.25, -3.0]),
        np.array([1e-5, 1.0, 1e5]),
        np.array([1e-100, 1.0]),
        np.array([1e16, 1.0]),
        np.array([1e6, 1.0], dtype=f4),
        np.array([999999.0, 1.0], dtype=f4),
        np.array([99999992.0], dtype=f4),
        np.array([0.1, 0.2, 1 / 3], dtype=f2),
        np.array([1000.0, 1.0], dtype=f2),
        np.array([np.nan, np.inf, -np.inf]),
        np.array([np.nan, 1.5], dtype=f4),
        np.array([-np.inf, 100.5]),
        np.array([0.0, -0.0]),
        np.array([1 + 2j, 3 - 4.5j, complex(np.nan, 1)]),
        np.array([complex(np.nan, np.inf), 1 + 1j], dtype=np.complex64),
        np.array([True, False, True]),
        np.array([[True], [False]]),
        np.array(True),
        np.array(1.5, dtype=f2),
        np.array(np.nan),
        np.array(-7, dtype=np.int32),
        np.array(3 + 4j),
        np.array([], dtype=f4),
        np.zeros((0, 3), dtype=np.int64),
        np.zeros((2, 0, 4), dtype=np.uint8),
        np.array([2**63 - 1, -(2**63)]),
        np.array([2**64 - 1, 0], dtype=np.uint64),
        np.arange(-50, 50, dtype=np.int8),
        np.arange(24, dtype=np.int16).reshape(2, 3, 4),
        np.arange(16.0).reshape(2, 2, 2, 2),
        np.arange(30) * 1.1,
        np.arange(2000),
        np.arange(2000.0).reshape(2, 1000),
        np.arange(1200, dtype=np.int32).reshape(30, 40),
        np.arange(2000, dtype=f4).reshape(10, 10, 20) / 7,
        np.arange(1001).reshape(7, 11, 13)[:, :, 0].copy(),
        np.arange(1 / 3, 40, 1.0),
    ]
    rng = np.random.default_rng(20240601)
    dtypes = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
              np.uint64, f2, f4, f8, np.complex64, np.complex128]
    for _ in range(400):
        dtype = np.dtype(dtypes[rng.integers(0, len(dtypes))])
        ndim = int(rng.integers(0, 5))
        big = rng.integers(0, 8) == 0
        shape = tuple(int(x) for x in rng.integers(1, 40 if big else 6, size=ndim))
        n = int(np.prod(shape, dtype=np.int64))
        if dtype.kind == "b":
            arr = rng.integers(0, 2, size=n).astype(bool)
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            bits = int(rng.integers(1, info.bits + 1))
            lo = max(int(info.min), -(2 ** (bits - 1)))
            hi = min(int(info.max), 2 ** bits - 1)
            arr = rng.integers(lo, hi, size=n, endpoint=True, dtype=dtype)
        elif dtype.kind == "f":
            arr = random_floats(rng, n, dtype)
        else:
            part = np.float32 if dtype.itemsize == 8 else np.float64
            arr = (random_floats(rng, n, part) + 1j * random_floats(rng, n, part)).astype(dtype)
        cases.append(arr.reshape(shape))
    return cases


def verify_our_files(d):
    failures = 0
    checked = 0

    def check(name, expected):
        nonlocal failures, checked
        checked += 1
        path = os.path.join(d, name)
        try:
            got = np.load(path, allow_pickle=False)
        except Exception as e:  # noqa: BLE001 - any failure to load is a test failure
            print(f"FAIL {name}: numpy cannot load it: {e}")
            failures += 1
            return
        problems = []
        if got.dtype != expected.dtype:
            problems.append(f"dtype {got.dtype}, expected {expected.dtype}")
        if got.shape != expected.shape:
            problems.append(f"shape {got.shape}, expected {expected.shape}")
        elif not np.array_equal(got, expected):
            problems.append(f"values differ:\n{got!r}\nexpected\n{expected!r}")
        with open(path, "rb") as f:
            ours = f.read()
        theirs = io.BytesIO()
        np.lib.format.write_array(theirs, expected, allow_pickle=False)
        # NumPy 1.24 and later pad the header for growth as our writer does.
        if hasattr(np.lib.format, "GROWTH_AXIS_MAX_DIGITS") and ours != theirs.getvalue():
            problems.append(f"bytes differ from np.save's: {ours[:128]!r} vs "
                            f"{theirs.getvalue()[:128]!r}")
        if problems:
            failures += 1
            print(f"FAIL {name}: " + "; ".join(problems))

    for code in CODES:
        check(f"ours_{code}.npy", values(code, SHAPE))
    check("ours_scalar_f8.npy", values("f8", ()))
    check("ours_empty_i4.npy", values("i4", (0, 3)))
    check("ours_vec_u2.npy", values("u2", (5,)))
    print(f"{checked - failures} passed, {failures} failed")
    return failures == 0


def main(argv):
    if len(argv) not in (2, 3) or (len(argv) == 3 and argv[2] != "--verify"):
        print(f"usage: {argv[0]} DIR [--verify]", file=sys.stderr)
        return 2
    d = argv[1]
    if len(argv) == 3:
        return 0 if verify_our_files(d) else 1
    os.makedirs(d, exist_ok=True)
    for name in os.listdir(d):
        if name.endswith((".npy", ".txt")):
            os.remove(os.path.join(d, name))  # stale files from an earlier run
    write_numpy_files(d)
    print(f"numpy {np.__version__}: wrote test files into {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
