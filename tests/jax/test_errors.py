"""Bad input raises Python exceptions: at trace time where the signature tells, from the
kernel at run time otherwise, never a crash."""
import os
import shutil
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import packfn
import packfn.jax as pj

RuntimeErr = getattr(jax.errors, "JaxRuntimeError", RuntimeError)


def spec(x, dtype=None):
    return jax.ShapeDtypeStruct(x.shape, dtype or x.dtype)


def test_wrong_dtype_raises_the_kernels_type_error():
    x = jnp.arange(8, dtype=jnp.int32).reshape(2, 4)
    f = pj.ffi_call("packfn.kernels.rms_norm", spec(x))
    with pytest.raises(RuntimeErr, match=r"INVALID_ARGUMENT: TypeError: rms_norm: argument 0 "
                                         r"\(x\): expected a float32 or float64 tensor, got int32"):
        jax.block_until_ready(jax.jit(lambda x: f(x, eps=1e-5))(x))


def test_wrong_rank_raises():
    x = jnp.float32(3.0)  # rms_norm needs at least one axis
    f = pj.ffi_call("packfn.kernels.rms_norm", spec(x))
    with pytest.raises(RuntimeErr, match=r"rms_norm: argument 0 \(x\)"):
        jax.block_until_ready(f(x, eps=1e-5))


def test_mismatched_result_shape_raises():
    x = jnp.ones((2, 4), jnp.float32)
    f = pj.ffi_call("packfn.kernels.rms_norm", jax.ShapeDtypeStruct((2, 5), jnp.float32))
    with pytest.raises(RuntimeErr, match=r"rms_norm: argument 1 \(out\)"):
        jax.block_until_ready(f(x, eps=1e-5))


def test_failing_kernel_raises_its_value_error():
    m = jnp.zeros(4)
    e = jnp.asarray([0.1, 0.2, 1.5, 0.3])
    f = pj.ffi_call("packfn.kernels.kepler", (spec(m), spec(m)))
    # on a GPU the CUDA version checks the values, and its errors name it (kepler_cuda)
    msg = (r"ValueError: kepler(_cuda)?: argument 1 \(eccentricity\): "
           r"expected values in \[0, 1\), got 1.5 at index 2")
    with pytest.raises(RuntimeErr, match=msg):
        jax.block_until_ready(jax.jit(f)(m, e))
    # the process goes on: the next call works
    s, c = f(m, jnp.full(4, 0.5))
    np.testing.assert_allclose(s, 0, atol=1e-15)
    # a negative eps is refused by the kernel too
    x = jnp.ones((2, 4))
    with pytest.raises(RuntimeErr, match="eps"):
        jax.block_until_ready(pj.ffi_call("packfn.kernels.rms_norm", spec(x))(x, eps=-1.0))


def test_trace_time_checks():
    x = jnp.ones((2, 4), jnp.float32)
    f = pj.ffi_call("packfn.kernels.rms_norm", spec(x))
    with pytest.raises(TypeError, match=r"missing eps \(float\)"):
        jax.jit(lambda x: f(x))(x)
    with pytest.raises(TypeError, match="unexpected epsilon"):
        f(x, eps=1e-5, epsilon=1)
    with pytest.raises(TypeError, match="expected float, got str"):
        f(x, eps="small")
    with pytest.raises(TypeError, match="static Python value"):
        jax.jit(lambda x, e: f(x, eps=e))(x, 1e-5)
    with pytest.raises(TypeError, match="2 tensor parameters"):
        f(x, x, eps=1e-5)
    g = pj.ffi_call("packfn.kernels.rms_norm", (spec(x), spec(x)))
    with pytest.raises(TypeError, match="1 operands and 2 results"):
        g(x, eps=1e-5)
    with pytest.raises(TypeError, match="expected float, got complex"):
        f(x, eps=np.complex128(1 + 2j))
    # an int past the float64 range is named like an int past int64 (a bare OverflowError was)
    with pytest.raises(TypeError, match=r"^packfn\.kernels\.rms_norm: argument eps: expected a "
                                        r"float in the float64 range, got 1797\d+$"):
        f(x, eps=2**1024)
    h = pj.ffi_call("packfn.kernels.add_n", jax.ShapeDtypeStruct((2,), jnp.int4))
    with pytest.raises(TypeError, match="dtype int4 cannot be passed to packfn functions"):
        h(jnp.ones(2, jnp.int4), n=1.0)


def test_float8_reaches_the_kernel(on_cpu):
    """float8 operands are passed with their DLPack codes (they were refused as having no DLPack
    equivalent: review): the kernel sees the dtype and refuses it itself."""
    h = pj.ffi_call("packfn.kernels.add_n", jax.ShapeDtypeStruct((2,), jnp.float8_e4m3fn))
    with pytest.raises((RuntimeErr, ValueError), match="got float8_e4m3fn"):
        jax.block_until_ready(h(jnp.ones(2, jnp.float8_e4m3fn), n=1.0))  # errors come with results


def test_int_attribute_outside_int64_is_refused_with_its_value(testmod, on_cpu):
    """An int past int64 is refused, not wrapped, and the message shows the range and the value
    (it said "expected an int that fits in 64 bits, got 64 bits")."""
    packfn.register_global("test.jax.pair", testmod.pair, override=True)  # pair(out, k: int)
    try:
        f = pj.ffi_call("test.jax.pair", jax.ShapeDtypeStruct((1,), jnp.float64))
        assert float(f(k=np.uint64(2**63 - 1))[0]) == 2.0**63
        assert float(f(k=-(2**63))[0]) == -(2.0**63)
        for big in (2**63, -(2**63) - 1, np.uint64(2**63), np.uint64(2**64 - 1)):
            with pytest.raises(TypeError, match=rf"^test\.jax\.pair: argument k: expected an int "
                                                rf"in \[-2\*\*63, 2\*\*63\), got {int(big)}$"):
                f(k=big)
    finally:
        packfn.remove_global("test.jax.pair")


def test_unknown_or_unfit_functions():
    with pytest.raises(KeyError, match="packfn.kernels.rms_norm"):
        pj.register("packfn.kernels.rms_nrom")
    packfn.register_global("test.jax.callback", lambda x: x, override=True)
    try:
        # a Python callable's signature is (*args): nothing XLA can fill
        with pytest.raises(TypeError, match=r"parameter 0 '\*args' cannot come from XLA"):
            pj.register("test.jax.callback")
    finally:
        packfn.remove_global("test.jax.callback")
    with pytest.raises(ValueError, match="unknown platform"):
        pj.register("packfn.kernels.vector_add", platforms=["tpu"])
    # a global name of bytes that are not UTF-8 (list_globals gives it surrogate-escaped) cannot
    # name an XLA target: refused by register, not a bare UnicodeEncodeError from inside it
    name = "test.jax.caf\udce9"
    packfn.register_global(name, packfn.get_global("packfn.kernels.add_n"), override=True)
    try:
        assert name in packfn.list_globals()
        with pytest.raises(ValueError, match=r"^packfn\.jax\.register: function name "
                                             r"'test\.jax\.caf\\udce9' is not UTF-8"):
            pj.register(name)
    finally:
        packfn.remove_global(name)
    with pytest.raises(TypeError, match=r"expected a function name \(str\), got bytes"):
        pj.register(b"packfn.kernels.add_n")


def test_missing_function_suggests_a_long_name_whole():
    """The nearest name of a KeyError is whole however long: a dotless name is near a dotted one
    ending in it, which may be far longer (the adapter cut it at the name's length plus 255
    bytes, suggesting a name no global has)."""
    near = "test.jax." + "p" * 400 + ".suggested_kernel"
    packfn.register_global(near, packfn.get_global("packfn.kernels.add_n"), override=True)
    x = jnp.ones(2)
    raw = jax.ffi.ffi_call(pj.register("packfn.kernels.add_n").target, spec(x))
    try:
        with pytest.raises(KeyError) as info:
            pj.register("suggested_kernel")
        assert f"(did you mean '{near}'?)" in str(info.value)
        # and the handler's bind by name (a call carrying no generation)
        with pytest.raises((RuntimeErr, ValueError)) as info:
            jax.block_until_ready(raw(x, packfn_name="suggested_kernel", n=np.float64(1)))
        assert f"(did you mean '{near}'?)" in str(info.value)
    finally:
        packfn.remove_global(near)


def test_call_without_the_function_name_attribute():
    t = pj.register("packfn.kernels.add_n")
    x = jnp.ones(3)
    raw = jax.ffi.ffi_call(t.target, spec(x))
    with pytest.raises(RuntimeErr, match="no string attribute packfn_name"):
        jax.block_until_ready(raw(x, n=np.float64(1)))
    with pytest.raises(RuntimeErr, match="no global function 'nope'"):
        jax.block_until_ready(raw(x, packfn_name="nope", packfn_slot=np.int64(0),
                                  n=np.float64(1)))
    with pytest.raises(RuntimeErr, match=r"argument 2 \(n\): expected a float attribute"):
        jax.block_until_ready(raw(x, packfn_name="packfn.kernels.add_n",
                                  packfn_slot=np.int64(t.slot), n="one"))


def test_raw_call_refuses_unknown_attributes_bools_and_nul_names():
    """The attributes are matched by name: one no parameter takes is refused (without
    packfn_slot the count alone let it pass), a bool is no number for a float parameter, and a
    name with a NUL byte is not cut at it."""
    t = pj.register("packfn.kernels.add_n")
    x = jnp.ones(3)
    raw = jax.ffi.ffi_call(t.target, spec(x))
    with pytest.raises(RuntimeErr, match="1 scalar parameters, but the call has 2 attributes"):
        jax.block_until_ready(raw(x, packfn_name="packfn.kernels.add_n", n=np.float64(1),
                                  bogus=np.float64(3)))
    with pytest.raises(RuntimeErr, match=r"argument 2 \(n\): expected a float attribute"):
        jax.block_until_ready(raw(x, packfn_name="packfn.kernels.add_n",
                                  packfn_slot=np.int64(t.slot), n=True))
    with pytest.raises(RuntimeErr, match="packfn_name holds a NUL byte"):
        jax.block_until_ready(raw(x, packfn_name="packfn.kernels.add_n\0junk",
                                  packfn_slot=np.int64(t.slot), n=np.float64(1)))
    # without packfn_slot the call still binds by name
    y = raw(x, packfn_name="packfn.kernels.add_n", n=np.float64(2))
    np.testing.assert_array_equal(np.asarray(y), np.full(3, 3.0))


def test_long_kernel_message_comes_whole(testmod):
    packfn.register_global("test.jax.shout", testmod.shout, override=True)
    try:
        f = pj.ffi_call("test.jax.shout", jax.ShapeDtypeStruct((1,), jnp.float64))
        with pytest.raises(RuntimeErr) as info:
            jax.block_until_ready(f(n=3000))
        assert "INVALID_ARGUMENT: ValueError: " + "a" * 3000 + "END" in str(info.value)
    finally:
        packfn.remove_global("test.jax.shout")


def test_failure_after_a_success_is_a_value_error_with_the_same_text():
    """jax 0.10 raises a failure from the Python path of a jitted call (its first call, and
    every call when that one failed) as JaxRuntimeError, and from its C++ fast path, which
    serves the calls after a first call that succeeded, as a builtins.ValueError with the same
    text, whatever the code; docs/jax.md and ffi_call's docstring tell to catch both (they
    said JaxRuntimeError, and ValueError only for NOT_FOUND)."""
    m = jnp.zeros(4)
    f = jax.jit(pj.ffi_call("packfn.kernels.kepler", (spec(m), spec(m))))
    jax.block_until_ready(f(m, jnp.full(4, 0.5)))
    msg = (r"^INVALID_ARGUMENT: ValueError: kepler(_cuda)?: argument 1 \(eccentricity\): "
           r"expected values in \[0, 1\), got 1.5 at index \d+")
    for _ in range(2):
        with pytest.raises((RuntimeErr, ValueError), match=msg) as info:
            jax.block_until_ready(f(m, jnp.full(4, 1.5)))
        if jax.__version__.startswith("0.10."):
            assert type(info.value) is ValueError
    assert "(jax.errors.JaxRuntimeError, ValueError)" in " ".join(pj.ffi_call.__doc__.split())


def test_kernel_message_not_utf8_comes_escaped(testmod):
    """Bytes of a kernel's message that are not UTF-8 come as \\xNN escapes (Python decoding
    the message raised UnicodeDecodeError instead of the kernel's error)."""
    packfn.register_global("test.jax.bad_utf8", testmod.bad_utf8, override=True)
    try:
        f = jax.jit(pj.ffi_call("test.jax.bad_utf8", jax.ShapeDtypeStruct((1,), jnp.float64)))
        for _ in range(2):  # the Python path, then the fast path
            with pytest.raises((RuntimeErr, ValueError)) as info:
                jax.block_until_ready(f())
            assert not isinstance(info.value, UnicodeError)
            assert str(info.value).startswith(
                "INVALID_ARGUMENT: ValueError: bad bytes \\xff\\xfe\\xc3 end")
    finally:
        packfn.remove_global("test.jax.bad_utf8")


def test_error_text_is_valid_utf8_and_cut_between_characters(tmp_path):
    """The adapter's xla_error itself (tests/jax/xla_error_text.c includes xla/packfn_xla.c),
    with its allocations failing: every message it hands XLA is valid UTF-8, bytes that are not
    escaped, and a message cut for want of memory is cut between characters (it cut a 4-byte
    character in the middle)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    pkg = os.path.dirname(packfn.__file__)
    exe = str(tmp_path / "xla_error_text")
    src = os.path.join(os.path.dirname(__file__), "xla_error_text.c")
    cmd = [cc, "-std=c11", "-I", os.path.join(pkg, "include"), "-isystem", jax.ffi.include_dir(),
           src, "-o", exe, "-L", pkg, "-lpackfn", "-Wl,-rpath," + pkg]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, " ".join(cmd) + "\n" + proc.stdout + proc.stderr
    out = [m.decode("utf-8") for m in subprocess.run([exe], capture_output=True,
                                                     check=True).stdout.split(b"\0")[:-1]]

    def cut(units):  # what fits in 508 bytes, whole units only, then "..."
        kept, size = "", 0
        for u in units:
            size += len(u.encode())
            if size > 508:
                return kept + "..."
            kept += u
        return kept

    wide = ["a"] + ["\U0001F600"] * 300
    bad = ["\\xff" if i % 3 == 0 else "b" for i in range(2000)]
    assert out == [
        "bad bytes \\xff\\xfe\\xc3 end",
        "overlong \\xc0\\x80 \\xe0\\x80\\x80, surrogate \\xed\\xa0\\x80, past U+10FFFF "
        "\\xf4\\x90\\x80\\x80 \\xf5, fine \U0001F600 \ud7ff, cut \\xe2\\x82",
        "".join(wide),
        cut(wide),
        "".join(bad),
        cut(bad),
        cut(bad),
    ]
    assert cut(wide) == "a" + "\U0001F600" * 126 + "..."


def test_failing_without_raising_is_named_and_no_stale_error_is_blamed(testmod, on_cpu):
    """A function returning -1 without raising is reported by name, and an error an earlier,
    successful call left raised on XLA's thread is not reported as the failure of the next
    call (it was, and the silent failure said only "failed without raising an error")."""
    out = jax.ShapeDtypeStruct((1,), jnp.float64)
    names = ("test.jax.leave_error", "test.jax.silent")
    for name in names:
        packfn.register_global(name, getattr(testmod, name.rsplit(".", 1)[-1]), override=True)
    try:
        leave = jax.jit(pj.ffi_call("test.jax.leave_error", out))
        silent = jax.jit(pj.ffi_call("test.jax.silent", out))
        msg = r"^INTERNAL: RuntimeError: test\.jax\.silent returned -1 without raising an error"
        for _ in range(2):
            assert float(leave()[0]) == 1.0  # succeeds, leaving an error raised on the thread
            with pytest.raises((RuntimeErr, ValueError), match=msg):
                jax.block_until_ready(silent())
        # nor is it reported by a packfn call from Python on the same thread (XLA's CPU handler
        # runs there): the adapter drops it after the call that left it (review)
        assert float(leave()[0]) == 1.0
        with pytest.raises(RuntimeError, match="failed without raising an error"):
            testmod.silent(np.zeros(1))
    finally:
        for name in names:
            packfn.remove_global(name)


def test_bind_failures_in_the_handler_keep_their_kind():
    """A call that binds by name fails with the code of packfn's error kind, as a failing
    function does."""
    t = pj.register("packfn.kernels.add_n")
    x = jnp.ones(3)
    raw = jax.ffi.ffi_call(t.target, spec(x))
    with pytest.raises(RuntimeErr, match="NOT_FOUND: KeyError: no global function 'nope'"):
        jax.block_until_ready(raw(x, packfn_name="nope", n=np.float64(1)))
    with pytest.raises(RuntimeErr, match="INVALID_ARGUMENT: ValueError: .*expected a function name"):
        jax.block_until_ready(raw(x, packfn_name="", n=np.float64(1)))
    packfn.register_global("test.jax.callback", lambda x: x, override=True)
    try:
        with pytest.raises(RuntimeErr, match=r"INVALID_ARGUMENT: TypeError: .*parameter 0 '\*args'"):
            jax.block_until_ready(raw(x, packfn_name="test.jax.callback", n=np.float64(1)))
    finally:
        packfn.remove_global("test.jax.callback")


def test_missing_adapter_says_how_to_build_it(monkeypatch):
    monkeypatch.setattr(pj, "_lib", None)
    monkeypatch.setattr(pj, "library_path", lambda: "/nonexistent/libpackfn_xla.so")
    with pytest.raises(ImportError, match=r"install jax .*pip install --no-build-isolation"):
        pj._library()


def test_hook_running_a_jitted_call_keeps_the_outer_error(hookmod, on_cpu):
    """C code that raised and then ran a Python hook keeps its error when the hook runs a jitted
    packfn call (the CPU handler runs on the caller's thread and cleared the error the call
    found: review); the call's own stray error is still dropped."""
    x = jnp.arange(1.0, 5.0, dtype=jnp.float32)
    f = jax.jit(lambda x: pj.ffi_call("packfn.kernels.add_n", spec(x))(x, n=np.float64(1.0)))
    np.testing.assert_allclose(f(x), np.asarray(x) + 1)  # compiled before the hook runs

    def hook():
        np.testing.assert_allclose(jax.block_until_ready(f(x)), np.asarray(x) + 1)

    with pytest.raises(ValueError, match="the failure raised before the hook ran"):
        hookmod.fail_after_notify(packfn.Function(hook))


def test_hook_registering_keeps_the_outer_error(hookmod):
    """C code that raised and then ran a Python hook keeps its error when the hook registers a
    function, also when the registration fails (pf_xla_bind raised its own error over the
    pending one and took both: the C code's failure came as "failed without raising an error":
    review)."""

    def hook():
        with pytest.raises(KeyError, match="no global function 'test.jax.nope'"):
            pj.register("test.jax.nope")
        packfn.register_global("test.jax.unfit", lambda x: x, override=True)
        try:
            with pytest.raises(TypeError, match="cannot come from XLA"):
                pj.register("test.jax.unfit")
        finally:
            packfn.remove_global("test.jax.unfit")
        assert pj.register("packfn.kernels.add_n").tensors == ("x", "out")

    with pytest.raises(ValueError, match="the failure raised before the hook ran"):
        hookmod.fail_after_notify(packfn.Function(hook))


def test_raw_call_int_attributes_of_every_width(testmod, on_cpu):
    """jax.ffi.ffi_call sends a NumPy integer with its own width: each is an int, for an int or a
    float parameter (all but int32 and uint8 were refused as "expected an int attribute":
    review)."""
    packfn.register_global("test.jax.pair", testmod.pair, override=True)  # pair(out, k: int)
    try:
        t = pj.register("test.jax.pair")
        raw = jax.ffi.ffi_call(t.target, jax.ShapeDtypeStruct((1,), jnp.float64))
        kinds = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
        for i, kind in enumerate(kinds):  # values differ: JAX caches calls by equal attributes
            k = kind(-(i + 1) if np.issubdtype(kind, np.signedinteger) else i + 1)
            out = raw(packfn_name=t.name, packfn_slot=np.int64(t.generation), k=k)
            assert float(out[0]) == float(k), kind
        # the largest uint64 an int parameter takes (JAX cannot lower a larger one: the adapter
        # refuses it, should another producer send it, rather than wrap it)
        out = raw(packfn_name=t.name, packfn_slot=np.int64(t.generation), k=np.uint64(2**63 - 1))
        assert float(out[0]) == 2.0**63
    finally:
        packfn.remove_global("test.jax.pair")
    add = pj.register("packfn.kernels.add_n")  # add_n(x, out, n: float)
    x = jnp.zeros(2)
    raw = jax.ffi.ffi_call(add.target, spec(x))
    for i, kind in enumerate((np.int8, np.int16, np.uint16, np.uint32, np.uint64)):
        n = kind(i + 11)
        out = raw(x, packfn_name=add.name, packfn_slot=np.int64(add.generation), n=n)
        np.testing.assert_array_equal(np.asarray(out), np.full(2, float(n)))


def test_trace_time_messages_count_positions_over_all_parameters(testmod, on_cpu):
    """A tensor is named by its position among all the parameters, as the adapter and the
    kernels name it: scaled(alpha, x, out) has x at 1 and out at 2 (packfn.jax counted the
    tensors only, and said "argument 0 (x)")."""
    packfn.register_global("test.jax.scaled", testmod.scaled, override=True)
    try:
        x = jnp.arange(3.0, dtype=jnp.float64)
        f = pj.ffi_call("test.jax.scaled", spec(x))
        np.testing.assert_array_equal(np.asarray(f(x, alpha=2.0)), 2 * np.arange(3.0))
        with pytest.raises(TypeError, match=r"^test\.jax\.scaled: argument 1 \(x\): operand of "
                                            r"dtype int4"):
            f(jnp.ones(3, jnp.int4), alpha=2.0)
        g = pj.ffi_call("test.jax.scaled", jax.ShapeDtypeStruct((3,), jnp.int4))
        with pytest.raises(TypeError, match=r"^test\.jax\.scaled: argument 2 \(out\): result of "
                                            r"dtype int4"):
            g(x, alpha=2.0)
        # the adapter counts the same way, for a call built without packfn.jax
        t = pj.register("test.jax.scaled")
        raw = jax.ffi.ffi_call(t.target, spec(x))
        with pytest.raises(RuntimeErr, match=r"scaled: argument 1 \(x\): XLA type"):
            jax.block_until_ready(raw(jnp.ones(3, jnp.int4), packfn_name=t.name,
                                      packfn_slot=np.int64(t.generation), alpha=2.0))
    finally:
        packfn.remove_global("test.jax.scaled")


def test_operand_without_a_plain_dtype_is_named():
    """An operand whose dtype NumPy cannot read (a typed PRNG key array, an object that is no
    array) is a TypeError naming the function and the argument (NumPy's "Cannot interpret
    'key<fry>' as a data type" came through, naming neither)."""
    f = pj.ffi_call("packfn.kernels.add_n", jax.ShapeDtypeStruct((), jnp.float32))
    with pytest.raises(TypeError, match=r"^packfn\.kernels\.add_n: argument 0 \(x\): operand of "
                                        r"dtype key<fry> cannot be passed to packfn functions"):
        f(jax.random.key(0), n=1.0)
    with pytest.raises(TypeError, match=r"^packfn\.kernels\.add_n: argument 0 \(x\): expected "
                                        r"an array, got object"):
        f(object(), n=1.0)
    g = pj.ffi_call("packfn.kernels.add_n", jax.ShapeDtypeStruct((), jax.random.key(0).dtype))
    with pytest.raises(TypeError, match=r"^packfn\.kernels\.add_n: argument 1 \(out\): result "
                                        r"of dtype key<fry> cannot be passed"):
        g(jnp.float32(1), n=1.0)


@pytest.mark.skipif(np.finfo(np.longdouble).max <= np.finfo(np.float64).max,
                    reason="long double is float64 here")
def test_float_keyword_past_float64_as_long_double_is_refused():
    """A float keyword past the float64 range is a TypeError whatever its type: a long double
    (1e4000) became inf with a RuntimeWarning and reached the kernel; an infinity given as such
    is passed on (the kernel decides)."""
    x = jnp.ones((2, 4), jnp.float32)
    f = pj.ffi_call("packfn.kernels.rms_norm", spec(x))
    with pytest.raises(TypeError, match=r"^packfn\.kernels\.rms_norm: argument eps: expected a "
                                        r"float in the float64 range, got 1e\+4000$"):
        f(x, eps=np.longdouble("1e4000"))
    with pytest.raises(TypeError, match="float64 range"):
        f(x, eps=-np.longdouble("1e4000"))
    with pytest.raises(RuntimeErr, match="eps"):  # inf itself is the kernel's to refuse
        jax.block_until_ready(f(x, eps=np.longdouble("inf")))


def test_call_without_results_runs(testmod, on_cpu):
    """A function with no result tensors (run for its check, or another effect) runs: XLA
    dropped such a call as dead code, under jit and eagerly, so its ValueError never came."""
    packfn.register_global("test.jax.check_positive", testmod.check_positive, override=True)
    try:
        check = pj.ffi_call("test.jax.check_positive", ())
        msg = r"INVALID_ARGUMENT: ValueError: check_positive: x\[2\] = -1 is not positive"
        bad = jnp.asarray([1.0, 2.0, -1.0])
        with pytest.raises(RuntimeErr, match=msg):
            jax.block_until_ready(jax.jit(check)(bad))
        with pytest.raises(RuntimeErr, match=msg):
            jax.block_until_ready(check(bad))
        # beside a result that is used, and under vmap
        with pytest.raises((RuntimeErr, ValueError), match=msg):
            jax.block_until_ready(jax.jit(lambda x: (check(x), x + 1)[1])(bad))
        each = pj.ffi_call("test.jax.check_positive", (), vmap_method="sequential")
        with pytest.raises(RuntimeErr, match=msg):
            jax.block_until_ready(jax.jit(jax.vmap(each))(jnp.stack([bad + 5, bad])))
        assert jax.jit(check)(jnp.ones(3)) == ()
    finally:
        packfn.remove_global("test.jax.check_positive")
