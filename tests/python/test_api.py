"""Package, globals, modules, Function objects."""
import inspect
import os
import pydoc

import pytest

import packfn


def test_import_loads_kernels():
    names = packfn.list_globals()
    assert "packfn.kernels.rms_norm" in names
    assert names == sorted(names)
    assert packfn.__version__ == "0.1.0"


def test_abi_version_is_the_headers():
    """packfn.abi_version comes from PF_ABI_VERSION_MAJOR / _MINOR of include/packfn/abi.h (it
    was a literal that would not follow them)."""
    import re
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "include", "packfn", "abi.h")) as f:
        text = f.read()
    major, minor = (re.search(r"#define PF_ABI_VERSION_%s (\d+)" % k, text).group(1)
                    for k in ("MAJOR", "MINOR"))
    assert packfn.abi_version == "%s.%s" % (major, minor)


def test_shared_libraries_in_package_folder():
    folder = os.path.dirname(packfn.__file__)
    files = os.listdir(folder)
    assert "libpackfn.so" in files and "libpackfn_kernels.so" in files
    assert any(f.startswith("_packfn") and f.endswith(".so") for f in files)


def test_get_global_missing_suggests():
    with pytest.raises(KeyError) as e:
        packfn.get_global("packfn.kernels.rms_nrom")
    msg = str(e.value)
    assert "no global function is named 'packfn.kernels.rms_nrom'" in msg
    assert "did you mean 'packfn.kernels.rms_norm'" in msg
    with pytest.raises(KeyError, match="no global function is named 'zzz'"):
        packfn.get_global("zzz")
    with pytest.raises(TypeError):
        packfn.get_global(3)


def test_get_global_suggests_a_long_name_whole():
    """A bare name is near a dotted global ending in it, however long: the suggestion names that
    global whole (a 256-byte buffer cut it into a name no global has)."""
    long_name = "test.api." + "p" * 400 + ".suggested_whole"
    packfn.register_global(long_name, lambda: None, override=True)
    try:
        with pytest.raises(KeyError) as e:
            packfn.get_global("suggested_whole")
        assert f"did you mean '{long_name}'" in str(e.value)
    finally:
        packfn.remove_global(long_name)


def test_function_repr_signature_doc(rms_norm):
    assert repr(rms_norm) == "<packfn.Function rms_norm(x: Tensor, out: Tensor, eps: float) -> None>"
    assert rms_norm.signature == "rms_norm(x: Tensor, out: Tensor, eps: float) -> None"
    sig = inspect.signature(rms_norm)
    assert list(sig.parameters) == ["x", "out", "eps"]
    assert sig.parameters["eps"].annotation == "float"
    assert sig.parameters["x"].kind is inspect.Parameter.POSITIONAL_ONLY
    assert sig.return_annotation == "None"
    assert rms_norm.__name__ == "rms_norm"
    assert rms_norm.__doc__.startswith("rms_norm(x: Tensor")
    assert "rms_norm(x: Tensor, out: Tensor, eps: float) -> None" in pydoc.render_doc(rms_norm)


def test_function_identity_and_equality(rms_norm):
    again = packfn.get_global("packfn.kernels.rms_norm")
    assert again == rms_norm and hash(again) == hash(rms_norm)
    assert packfn.Function(rms_norm) is rms_norm
    with pytest.raises(TypeError, match="expected a callable"):
        packfn.Function(42)


def test_register_global_override_and_remove():
    def twice(x):
        """Doubles x."""
        return 2 * x

    f = packfn.register_global("test.twice", twice)
    try:
        assert isinstance(f, packfn.Function)
        assert packfn.get_global("test.twice")(21) == 42
        assert "Doubles x." in packfn.get_global("test.twice").__doc__
        with pytest.raises(ValueError):
            packfn.register_global("test.twice", lambda x: x)
        packfn.register_global("test.twice", lambda x: 3 * x, override=True)
        assert packfn.get_global("test.twice")(2) == 6
        assert "test.twice" in packfn.list_globals()
    finally:
        packfn.remove_global("test.twice")
    assert "test.twice" not in packfn.list_globals()
    with pytest.raises(KeyError):
        packfn.remove_global("test.twice")


def test_keywords_refused(identity):
    with pytest.raises(TypeError, match="positional arguments only"):
        identity(x=1)


def test_load_module_attributes():
    path = os.path.join(os.path.dirname(packfn.__file__), "libpackfn_kernels.so")
    m = packfn.load_module(path)
    assert isinstance(m, packfn.Module)
    assert m.path == path
    assert "rms_norm" in dir(m)
    assert m.exports()["rms_norm"] == "rms_norm(x: Tensor, out: Tensor, eps: float) -> None"
    assert isinstance(m.rms_norm, packfn.Function)
    with pytest.raises(AttributeError, match="no function 'nothing'$"):
        m.nothing
    with pytest.raises(AttributeError, match=r"no function 'rms_nrom' \(did you mean 'rms_norm'\?\)"):
        m.rms_nrom
    with pytest.raises(AttributeError):
        m.__wrapped__


def test_load_module_missing_file():
    with pytest.raises(OSError, match="cannot load"):
        packfn.load_module("/nonexistent/libnothing.so")


def test_system_module_sees_globals():
    m = packfn.system_module()
    assert m.path == "<system>"
    assert "packfn.kernels.rms_norm" in m.exports()


def test_objects_cannot_be_made_directly():
    for cls in (packfn.Object, packfn.Array, packfn.Map, packfn.Module):
        with pytest.raises(TypeError):
            cls()


def test_names_with_a_nul_name_nothing():
    """A name with an embedded NUL names no function: not the prefix up to the NUL, which C
    strings would see (remove_global("a\\0b") used to remove "a")."""
    packfn.register_global("test.victim", lambda: 1, override=True)
    try:
        name = r"'test\.victim\\x00other'"
        with pytest.raises(KeyError, match=r"no global function is named " + name):
            packfn.get_global("test.victim\0other")
        with pytest.raises(KeyError, match=r"remove_global: no global function is named " + name):
            packfn.remove_global("test.victim\0other")
        assert "test.victim" in packfn.list_globals()
    finally:
        packfn.remove_global("test.victim")
    m = packfn.load_module(os.path.join(os.path.dirname(packfn.__file__), "libpackfn_kernels.so"))
    with pytest.raises(AttributeError, match=r"has no function 'rms_norm\\x00junk'"):
        getattr(m, "rms_norm\0junk")
    assert m.rms_norm is not None


def test_module_attribute_names_no_utf8_encodes():
    """A name holding a lone surrogate names no export: hasattr() is False and getattr() raises
    AttributeError (they raised SystemError: the name was encoded with Python's AttributeError
    still set; review)."""
    m = packfn.system_module()
    for name in ("\ud800", "\udc80", "rms_norm\udfff", "__\ud800"):
        assert not hasattr(m, name), ascii(name)
        with pytest.raises(AttributeError):
            getattr(m, name)


def test_global_names_no_utf8_are_listed_and_found():
    """A global name that is no UTF-8 (registered from C) reads as a str holding U+DC80-U+DCFF
    for its bytes (surrogateescape), and that str names it again: list_globals() raised
    UnicodeDecodeError (and so did dir() and exports() of a module), get_global() and attribute
    lookups UnicodeEncodeError (review)."""
    import ctypes

    from _cabi import libpackfn

    lib = libpackfn()
    lib.pf_global_set.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    lib.pf_global_remove.argtypes = [ctypes.c_char_p]
    raw = b"test.caf\xe9"
    name = raw.decode("utf-8", "surrogateescape")
    f = packfn.Function(lambda: 7)
    assert lib.pf_global_set(raw, ctypes.c_void_p(f._address), 1) == 0
    try:
        assert name in packfn.list_globals()
        assert packfn.get_global(name)() == 7
        m = packfn.system_module()
        assert name in dir(m) and name in m.exports()
        assert getattr(m, name)() == 7
        with pytest.raises(KeyError) as e:
            packfn.get_global("test.caf\udce8")
        assert e.value.args[0].endswith("(did you mean 'test.caf\udce9'?)")
        with pytest.raises(AttributeError, match="did you mean 'test.caf\udce9'"):
            getattr(m, "test.caf\udce8")
        packfn.register_global(name, lambda: 8, override=True)  # the same bytes in C
        assert packfn.get_global(name)() == 8
        assert lib.pf_global_remove(raw) == 0
        packfn.register_global(name, lambda: 9)
        assert packfn.get_global(name)() == 9
    finally:
        packfn.remove_global(name)
    assert name not in packfn.list_globals()
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate no byte stands for
        packfn.get_global("test.\ud800")
    # a function's texts alike (they raised UnicodeDecodeError)
    lib.pf_function_set_info.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    assert lib.pf_function_set_info(ctypes.c_void_p(f._address), b"f\xe9(a: int) -> str",
                                    b"doc \xff") == 0
    assert f.signature == "f\udce9(a: int) -> str" and f.__name__ == "f\udce9"
    assert f.__doc__ == "f\udce9(a: int) -> str\n\ndoc \udcff"
    assert list(inspect.signature(f).parameters) == ["a"]


@pytest.mark.parametrize("qualname", ["\u00e9" * 200, "x" * 300, "caf\udce9." * 40])
def test_callback_signature_of_a_long_qualname_is_whole(qualname):
    """A callable's __qualname__ makes the signature text whole, however long: it was cut to 256
    bytes, in the middle of a UTF-8 sequence (.signature, __doc__ and __signature__ raised
    UnicodeDecodeError) or before the "(" (__name__ was "function"; review)."""

    def f():
        """Its doc."""

    f.__qualname__ = qualname
    F = packfn.Function(f)
    assert F.signature == qualname + "(*args) -> any"
    assert F.__name__ == F.__qualname__ == qualname
    assert F.__doc__ == qualname + "(*args) -> any\n\nIts doc."
    sig = inspect.signature(F)
    assert list(sig.parameters) == ["args"] and sig.return_annotation == "any"
    assert repr(F).startswith("<packfn.Function ")


def test_signature_with_parentheses_in_the_result():
    """The parameters end at the ")" closing the first "(", and the result annotation is read
    after it: a result "Tuple(int, int)" (docs/jax.md) was cut at its last ")", giving the
    parameters a: 'int', b: 'int) -> Tuple(int' (review)."""
    import ctypes

    from _cabi import libpackfn

    lib = libpackfn()
    lib.pf_function_set_info.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    F = packfn.Function(lambda a, b: (a, b))
    text = b"pair(a: int, b: int) -> Tuple(int, int)"
    assert lib.pf_function_set_info(ctypes.c_void_p(F._address), text, None) == 0
    sig = inspect.signature(F)
    assert [(p.name, p.annotation) for p in sig.parameters.values()] == [("a", "int"), ("b", "int")]
    assert sig.return_annotation == "Tuple(int, int)"
    from packfn._signature import signature_from_text

    sig = signature_from_text("f(x: Tensor, cb: Callable(int)) -> Tuple(int, float)")
    assert [(p.name, p.annotation) for p in sig.parameters.values()] == [
        ("x", "Tensor"), ("cb", "Callable(int)")]
    assert sig.return_annotation == "Tuple(int, float)"
    assert str(signature_from_text("g() -> None")) == "() -> 'None'"
    assert signature_from_text("h(a: int") is None and signature_from_text("no params") is None


def test_variadic_parameter_named_by_a_keyword():
    """A variadic parameter named by a Python keyword ("concat(*in: Tensor)"): inspect.Parameter
    takes keywords only as positional-only names, so __signature__ and inspect.signature raised
    ValueError ('in' is not a valid parameter name) instead of giving the signature (found by
    review). Such a name becomes arg<i>, as a name that is no identifier does; a positional-only
    parameter keeps its keyword name."""
    import ctypes

    from _cabi import libpackfn

    from packfn._signature import signature_from_text

    lib = libpackfn()
    lib.pf_function_set_info.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    F = packfn.Function(lambda *a: a)
    assert lib.pf_function_set_info(ctypes.c_void_p(F._address),
                                    b"concat(from: int, *in: Tensor) -> Tensor", None) == 0
    sig = inspect.signature(F)
    assert [(p.name, p.kind, p.annotation) for p in sig.parameters.values()] == [
        ("from", inspect.Parameter.POSITIONAL_ONLY, "int"),
        ("arg1", inspect.Parameter.VAR_POSITIONAL, "Tensor")]
    assert list(signature_from_text("f(*lambda)").parameters) == ["arg0"]


def test_stub_takes_by_keyword_only_what_the_runtime_does():
    """The type stub (__init__.pyi) lets a parameter be passed by keyword only where the runtime
    takes it so: the extension's METH_O and METH_VARARGS functions take positional arguments
    only, and the stub gave remove_global(name=...), load_module(path=...), Map.get(key,
    default=...), Array.index(value, start=..., stop=...) and Array.count(value=...), which a
    type checker accepted and the call refused ("takes no keyword arguments")."""
    import ast
    stub_path = os.path.join(os.path.dirname(packfn.__file__), "__init__.pyi")
    with open(stub_path) as f:
        tree = ast.parse(f.read())
    defs = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            defs.setdefault(node.name, node)
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef):
                    defs.setdefault(f"{node.name}.{sub.name}", sub)
    ident = packfn.Function(lambda x: x)
    m, a = ident({"a": 1}), ident([1, 2])
    cases = [
        ("get_global", packfn.get_global, {"name": "packfn.kernels.rms_norm"}),
        ("remove_global", packfn.remove_global, {"name": "packfn.test.stub_absent"}),
        ("register_global", packfn.register_global,
         {"name": "packfn.test.stub", "fn": len, "override": True}),
        ("load_module", packfn.load_module, {"path": "/nonexistent/libstub.so"}),
        ("from_dlpack", packfn.from_dlpack, {"obj": bytearray(2)}),
        ("error_class", packfn.error_class, {"kind": "ValueError"}),
        ("Function.__new__", packfn.Function, {"callable": len}),
        ("Tensor.__new__", packfn.Tensor, {"obj": bytearray(2)}),
        ("Map.get", lambda **kw: m.get("a", **kw), {"default": 0}),
        ("Array.index", lambda **kw: a.index(1, **kw), {"start": 0}),
        ("Array.count", a.count, {"value": 1}),
    ]
    try:
        for name, call, kwargs in cases:
            try:
                call(**kwargs)
                takes_keywords = True
            except TypeError as e:
                takes_keywords = "keyword" not in str(e)
                if takes_keywords:
                    raise
            except (KeyError, OSError):  # the absent global and library: keywords taken
                takes_keywords = True
            args = defs[name].args
            for param in kwargs:
                by_keyword = param in [p.arg for p in args.args + args.kwonlyargs]
                assert by_keyword == takes_keywords, (name, param, takes_keywords)
    finally:
        if "packfn.test.stub" in packfn.list_globals():
            packfn.remove_global("packfn.test.stub")
